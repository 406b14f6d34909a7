//! The simulator keeps channel history as Discord does: every message,
//! users' and the bot's, paged by `GET /channels/{id}/messages` (`before`,
//! `after`, `around`, `limit` 1–100, newest first) and fetched one by one
//! by `GET /channels/{id}/messages/{id}`; and a DM sent while the bot has
//! no session is in the history only, never dispatched to a later fresh
//! session.

use crate::support;

use serde_json::{json, Value};
use smolcord_sim::{Fault, SimEvent};
use std::time::Duration;
use support::sim_client::*;

fn ids(reply: &Reply) -> Vec<String> {
    reply
        .json()
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {:?}", reply.json()))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn history_pages_newest_first_around_before_and_after() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        // Five messages: the user's and the bot's, interleaved.
        let mut sent = Vec::new();
        for n in 0..5 {
            if n % 2 == 0 {
                let (id, _) = sim.send_dm(42, "user", &format!("user {n}"));
                sent.push(id.to_string());
            } else {
                let channel = sim.dm_channel_of(42);
                let reply = conn
                    .request(
                        "POST",
                        &format!("/api/v10/channels/{channel}/messages"),
                        true,
                        Some(&json!({"content": format!("bot {n}")})),
                    )
                    .await;
                assert_eq!(reply.status, 200);
                sent.push(reply.json()["id"].as_str().unwrap().to_owned());
            }
        }
        let channel = sim.dm_channel_of(42);
        let base = format!("/api/v10/channels/{channel}/messages");
        let newest_first: Vec<String> = sent.iter().rev().cloned().collect();
        let get = |query: String| format!("{base}{query}");

        let all = conn.request("GET", &get(String::new()), true, None).await;
        assert_eq!(all.status, 200);
        assert_eq!(ids(&all), newest_first, "default: newest first");
        assert_eq!(all.json()[4]["content"], "user 0");
        assert_eq!(all.json()[3]["author"]["bot"], true);

        let two = conn
            .request("GET", &get("?limit=2".into()), true, None)
            .await;
        assert_eq!(ids(&two), &newest_first[..2]);
        // after: the ones right after the anchor, still newest first.
        let after = conn
            .request(
                "GET",
                &get(format!("?after={}&limit=2", sent[1])),
                true,
                None,
            )
            .await;
        assert_eq!(ids(&after), [sent[3].clone(), sent[2].clone()]);
        let caught_up = conn
            .request("GET", &get(format!("?after={}", sent[4])), true, None)
            .await;
        assert_eq!(ids(&caught_up), Vec::<String>::new());
        let before = conn
            .request(
                "GET",
                &get(format!("?before={}&limit=2", sent[3])),
                true,
                None,
            )
            .await;
        assert_eq!(ids(&before), [sent[2].clone(), sent[1].clone()]);
        let around = conn
            .request(
                "GET",
                &get(format!("?around={}&limit=3", sent[2])),
                true,
                None,
            )
            .await;
        assert_eq!(
            ids(&around),
            [sent[3].clone(), sent[2].clone(), sent[1].clone()]
        );

        // One message, anyone's.
        let one = conn
            .request("GET", &format!("{base}/{}", sent[0]), true, None)
            .await;
        assert_eq!(one.status, 200);
        assert_eq!(one.json()["content"], "user 0");
        let unknown = conn
            .request("GET", &format!("{base}/{}1", sent[0]), true, None)
            .await;
        assert_eq!(unknown.status, 404);
        assert_eq!(unknown.json()["code"], 10008);
        // The bot edits only its own.
        let theirs = conn
            .request(
                "PATCH",
                &format!("{base}/{}", sent[0]),
                true,
                Some(&json!({"content": "mine now"})),
            )
            .await;
        assert_eq!(theirs.status, 403);
        assert_eq!(theirs.json()["code"], 50005);
        // Only the bot's messages are "the bot's messages".
        assert_eq!(sim.messages_in(channel).len(), 2);
    });
}

#[test]
fn bad_history_queries_are_answered_like_discord() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        let channel = sim.dm_channel_of(42);
        let base = format!("/api/v10/channels/{channel}/messages");
        for (query, field, code) in [
            ("?limit=0", "limit", "NUMBER_TYPE_MIN"),
            ("?limit=101", "limit", "NUMBER_TYPE_MAX"),
            ("?limit=ten", "limit", "NUMBER_TYPE_COERCE"),
            ("?after=soon", "after", "NUMBER_TYPE_COERCE"),
        ] {
            let reply = conn
                .request("GET", &format!("{base}{query}"), true, None)
                .await;
            assert_eq!(reply.status, 400, "{query}");
            let body: Value = reply.json();
            assert_eq!(body["code"], 50035, "{query}: {body}");
            assert_eq!(body["errors"][field]["_errors"][0]["code"], code, "{body}");
        }
        let hundred = conn
            .request("GET", &format!("{base}?limit=100"), true, None)
            .await;
        assert_eq!(hundred.status, 200);
        let unknown = conn
            .request("GET", "/api/v10/channels/1/messages", true, None)
            .await;
        assert_eq!(unknown.status, 404);
        assert_eq!(unknown.json()["code"], 10003);
        let unauthorized = conn.request("GET", &base, false, None).await;
        assert_eq!(unauthorized.status, 401);
    });
}

#[test]
fn a_dm_sent_while_no_session_lives_is_in_the_history_only() {
    run(async {
        let sim = sim_with(fast(500));
        let mut first = Client::connect(&sim, "/?v=10&encoding=json").await;
        first.expect_hello().await;
        first.identify_ready(1 << 12).await;
        // Not resumable: the session is gone.
        assert_eq!(sim.fault(Fault::InvalidSession(false)), 1);
        first.expect_op(9).await;
        sim.wait_for(Duration::from_secs(5), |e| {
            matches!(e, SimEvent::InvalidSession { .. })
        })
        .await
        .expect("the op 9 took effect");
        let (gap, channel) = sim.send_dm(42, "user", "in the gap");

        let mut second = Client::connect(&sim, "/?v=10&encoding=json").await;
        second.expect_hello().await;
        second.identify_ready(1 << 12).await;
        let (after, _) = sim.send_dm(42, "user", "after");
        // The first dispatch of the fresh session is the later DM.
        let dispatch = second.expect_dispatch().await;
        assert_eq!(dispatch["t"], "MESSAGE_CREATE", "{dispatch}");
        assert_eq!(dispatch["d"]["id"], after.to_string(), "{dispatch}");
        // Both are in the history.
        let page = http(
            &sim,
            "GET",
            &format!("/api/v10/channels/{channel}/messages"),
            true,
            None,
        )
        .await;
        assert_eq!(ids(&page), [after.to_string(), gap.to_string()]);
    });
}
