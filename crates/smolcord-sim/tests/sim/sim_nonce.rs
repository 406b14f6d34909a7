//! The simulator's `enforce_nonce`, as Discord documents it: a repeated
//! nonce within the window returns the original message and creates
//! nothing; a late answer (`delay` REST fault) still takes effect; a 401
//! fault refuses like a bad token.

use crate::support;

use serde_json::json;
use smolcord_sim::{RestFault, RestFaultKind, SimConfig};
use std::time::{Duration, Instant};
use support::sim_client::*;

#[test]
fn a_repeated_nonce_returns_the_original_message() {
    run(async {
        let sim = sim();
        let (_, dm) = sim.send_dm(42, "alice", "hi");
        let other = sim.dm_channel_of(43);
        let path = format!("/api/v10/channels/{dm}/messages");
        let mut conn = Http::connect(&sim).await;
        let post = |body: serde_json::Value| {
            let (sim, path) = (&sim, &path);
            async move { http(sim, "POST", path, true, Some(&body)).await }
        };

        let first = post(json!({"content": "one", "nonce": "r1", "enforce_nonce": true})).await;
        assert_eq!(first.status, 200);
        let first = first.json();
        // Discord returns the original, whatever the repeat says.
        let again = post(json!({"content": "two", "nonce": "r1", "enforce_nonce": true})).await;
        assert_eq!(again.status, 200);
        assert_eq!(again.json()["id"], first["id"]);
        assert_eq!(again.json()["content"], "one");
        // Per author, not per channel.
        let elsewhere = conn
            .request(
                "POST",
                &format!("/api/v10/channels/{other}/messages"),
                true,
                Some(&json!({"content": "three", "nonce": "r1", "enforce_nonce": true})),
            )
            .await;
        assert_eq!(elsewhere.json()["id"], first["id"]);
        assert_eq!(sim.stats().totals.duplicates_prevented, 2);

        // Without enforce_nonce a nonce is only echoed; an integer nonce
        // counts as its digits.
        let echoed = post(json!({"content": "four", "nonce": "r1"})).await.json();
        assert_ne!(echoed["id"], first["id"]);
        let int = post(json!({"content": "five", "nonce": 77, "enforce_nonce": true})).await;
        let int_again = post(json!({"content": "six", "nonce": "77", "enforce_nonce": true})).await;
        assert_eq!(int.json()["id"], int_again.json()["id"]);

        let contents: Vec<String> = sim.messages_in(dm).into_iter().map(|m| m.content).collect();
        assert_eq!(contents, ["one", "four", "five"]);
        assert!(sim.messages_in(other).is_empty());
        assert_eq!(sim.stats().totals.duplicates_prevented, 3);

        // Discord takes at most 25 characters.
        let long =
            post(json!({"content": "x", "nonce": "n".repeat(26), "enforce_nonce": true})).await;
        assert_eq!(long.status, 400);
        assert_eq!(
            long.json()["errors"]["nonce"]["_errors"][0]["code"],
            "BASE_TYPE_MAX_LENGTH"
        );
    });
}

#[test]
fn a_nonce_is_forgotten_after_the_window() {
    run(async {
        let window = Duration::from_millis(300);
        let sim = sim_with(SimConfig {
            nonce_window: window,
            ..SimConfig::default()
        });
        let (_, dm) = sim.send_dm(42, "alice", "hi");
        let path = format!("/api/v10/channels/{dm}/messages");
        let body = json!({"content": "again", "nonce": "w1", "enforce_nonce": true});
        let first = http(&sim, "POST", &path, true, Some(&body)).await.json();
        let sent = Instant::now();
        at(sent + window + Duration::from_millis(100)).await;
        let later = http(&sim, "POST", &path, true, Some(&body)).await.json();
        assert_ne!(later["id"], first["id"], "a new message after the window");
        assert_eq!(sim.messages_in(dm).len(), 2);
        assert_eq!(sim.stats().totals.duplicates_prevented, 0);
    });
}

#[test]
fn a_late_answer_has_taken_effect_and_a_retry_with_its_nonce_is_deduplicated() {
    run(async {
        let sim = sim();
        let (_, dm) = sim.send_dm(42, "alice", "hi");
        let path = format!("/api/v10/channels/{dm}/messages");
        sim.rest_fault(RestFault {
            kind: RestFaultKind::Delay(Duration::from_secs(30)),
            count: 1,
            path_prefix: Some(path.clone()),
        });
        let body = json!({"content": "lost answer", "nonce": "l1", "enforce_nonce": true});
        // The client gives up on the answer; the message exists anyway.
        let mut conn = Http::connect(&sim).await;
        let head = format!(
            "POST {path} HTTP/1.1\r\nAuthorization: Bot {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            smolcord_sim::DEFAULT_SIM_TOKEN,
            body.to_string().len()
        );
        conn.send_raw(head.as_bytes()).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while sim.messages_in(dm).is_empty() {
            assert!(
                Instant::now() < deadline,
                "the delayed request never took effect"
            );
            at(Instant::now() + Duration::from_millis(20)).await;
        }
        drop(conn);
        // The retry (same nonce) gets the original.
        let retry = http(&sim, "POST", &path, true, Some(&body)).await;
        assert_eq!(retry.status, 200);
        assert_eq!(sim.messages_in(dm).len(), 1);
        assert_eq!(retry.json()["id"], sim.messages_in(dm)[0].id.to_string());
        assert_eq!(sim.stats().totals.duplicates_prevented, 1);
    });
}

#[test]
fn an_unauthorized_fault_answers_401() {
    run(async {
        let sim = sim();
        sim.rest_fault(RestFault {
            kind: RestFaultKind::Unauthorized,
            count: 1,
            path_prefix: Some("/api/v10/gateway/bot".into()),
        });
        let refused = http(&sim, "GET", "/api/v10/gateway/bot", true, None).await;
        assert_eq!(refused.status, 401);
        assert_eq!(refused.json()["message"], "401: Unauthorized");
        let fine = http(&sim, "GET", "/api/v10/gateway/bot", true, None).await;
        assert_eq!(fine.status, 200);
    });
}
