//! The simulator's HTTP side: REST routes and their checks, injected 429 /
//! 403 / 5xx, the request log, attachment bytes, keep-alive, and the
//! control API's good and bad requests.

use crate::support;

use serde_json::{json, Value};
use smolcord_sim::{RestFault, RestFaultKind, SimEvent, DEFAULT_SIM_TOKEN};
use std::time::Duration;
use support::sim_client::*;

const DMS: u64 = 1 << 12;

#[test]
fn gateway_routes_and_auth() {
    run(async {
        let sim = sim();
        let reply = http(&sim, "GET", "/api/v10/gateway", false, None).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("content-type"), Some("application/json"));
        assert_eq!(reply.json()["url"], sim.gateway_url());

        let reply = http(&sim, "GET", "/api/v10/gateway/bot", false, None).await;
        assert_eq!(reply.status, 401);
        assert_eq!(reply.json()["message"], "401: Unauthorized");
        let mut wrong = Http::connect(&sim).await;
        wrong
            .send_raw(b"GET /api/v10/gateway/bot HTTP/1.1\r\nAuthorization: Bot nope\r\n\r\n")
            .await;
        assert_eq!(wrong.read_reply().await.status, 401);

        let reply = http(&sim, "GET", "/api/v10/gateway/bot", true, None).await;
        assert_eq!(reply.status, 200);
        let body = reply.json();
        assert_eq!(body["url"], sim.gateway_url());
        assert_eq!(body["shards"], 1);
        assert_eq!(body["session_start_limit"]["total"], 1000);
        assert_eq!(body["session_start_limit"]["remaining"], 1000);
        assert_eq!(body["session_start_limit"]["max_concurrency"], 1);
        assert!(reply.header("x-ratelimit-bucket").is_some());

        // An identify spends one session start.
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(DMS).await;
        let body = http(&sim, "GET", "/api/v10/gateway/bot", true, None)
            .await
            .json();
        assert_eq!(body["session_start_limit"]["remaining"], 999);

        let me = http(&sim, "GET", "/api/v10/users/@me", true, None)
            .await
            .json();
        assert_eq!(me["id"], sim.config().bot_id.to_string());
        let app = http(&sim, "GET", "/api/v10/oauth2/applications/@me", true, None).await;
        assert_eq!(app.status, 200);
        assert_eq!(
            http(&sim, "GET", "/api/v10/nope", true, None).await.status,
            404
        );
        assert_eq!(
            http(&sim, "DELETE", "/api/v10/gateway/bot", true, None)
                .await
                .status,
            405
        );
    });
}

#[test]
fn dm_reply_edit_and_typing() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(DMS).await;
        let (_, dm_channel) = sim.send_dm(42, "alice", "hi bot");
        client.expect_dispatch().await;

        let mut conn = Http::connect(&sim).await;
        let opened = conn
            .request(
                "POST",
                "/api/v10/users/@me/channels",
                true,
                Some(&json!({"recipient_id": "42"})),
            )
            .await;
        assert_eq!(opened.status, 200);
        let channel = opened.json();
        assert_eq!(
            channel["id"],
            dm_channel.to_string(),
            "one DM channel per user"
        );
        assert_eq!(channel["type"], 1);
        assert_eq!(channel["recipients"][0]["username"], "alice");
        assert_eq!(sim.dm_channel_of(42), dm_channel);

        let path = format!("/api/v10/channels/{dm_channel}/typing");
        let typing = conn.request("POST", &path, true, None).await;
        assert_eq!(typing.status, 204);

        let path = format!("/api/v10/channels/{dm_channel}/messages");
        let posted = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "hello alice", "nonce": "n1"})),
            )
            .await;
        assert_eq!(posted.status, 200);
        assert_eq!(posted.header("content-type"), Some("application/json"));
        let message = posted.json();
        for field in [
            "id",
            "channel_id",
            "author",
            "content",
            "timestamp",
            "edited_timestamp",
            "tts",
            "mention_everyone",
            "mentions",
            "mention_roles",
            "attachments",
            "embeds",
            "pinned",
            "type",
            "flags",
        ] {
            assert!(
                message.get(field).is_some(),
                "message lacks `{field}`: {message}"
            );
        }
        assert_eq!(message["author"]["bot"], true);
        assert_eq!(message["nonce"], "n1");
        // Discord echoes the bot's own message on the gateway.
        let echo = client.expect_dispatch().await;
        assert_eq!(echo["t"], "MESSAGE_CREATE");
        assert_eq!(echo["d"]["id"], message["id"]);

        let id = message["id"].as_str().unwrap_or_default().to_owned();
        let edit_path = format!("/api/v10/channels/{dm_channel}/messages/{id}");
        let edited = conn
            .request(
                "PATCH",
                &edit_path,
                true,
                Some(&json!({"content": "hello again"})),
            )
            .await;
        assert_eq!(edited.status, 200);
        assert_eq!(edited.json()["content"], "hello again");
        assert!(edited.json()["edited_timestamp"].is_string());
        assert_eq!(client.expect_dispatch().await["t"], "MESSAGE_UPDATE");

        let messages = sim.messages_in(dm_channel);
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].content, "hello again");
        assert_eq!(messages[0].edits, 1);

        // A reply to the user's message.
        let reply = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "re", "message_reference": {"message_id": id}})),
            )
            .await
            .json();
        assert_eq!(reply["type"], 19);
        assert_eq!(sim.messages_in(dm_channel).len(), 2);
    });
}

#[test]
fn message_checks_follow_discord() {
    run(async {
        let sim = sim();
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        let mut conn = Http::connect(&sim).await;
        let unknown = conn
            .request(
                "POST",
                "/api/v10/channels/5/messages",
                true,
                Some(&json!({"content": "x"})),
            )
            .await;
        assert_eq!(
            (unknown.status, unknown.json()["code"].as_u64()),
            (404, Some(10003))
        );
        let empty = conn
            .request("POST", &path, true, Some(&json!({"content": ""})))
            .await;
        assert_eq!(
            (empty.status, empty.json()["code"].as_u64()),
            (400, Some(50006))
        );
        let long = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "x".repeat(2001)})),
            )
            .await;
        assert_eq!(
            (long.status, long.json()["code"].as_u64()),
            (400, Some(50035))
        );
        assert!(long.json()["errors"]["content"].is_object());
        let unknown_message = conn
            .request(
                "PATCH",
                &format!("{path}/123"),
                true,
                Some(&json!({"content": "x"})),
            )
            .await;
        assert_eq!(unknown_message.json()["code"], 10008);
        // Not JSON, and no Content-Type at all.
        conn.send_raw(
            format!("POST {path} HTTP/1.1\r\nAuthorization: Bot {DEFAULT_SIM_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\n{{x}}").as_bytes(),
        )
        .await;
        let bad = conn.read_reply().await;
        assert_eq!(
            (bad.status, bad.json()["code"].as_u64()),
            (400, Some(50109))
        );
        conn.send_raw(
            format!("POST {path} HTTP/1.1\r\nAuthorization: Bot {DEFAULT_SIM_TOKEN}\r\nContent-Length: 2\r\n\r\n{{}}").as_bytes(),
        )
        .await;
        let untyped = conn.read_reply().await;
        assert_eq!(
            (untyped.status, untyped.json()["code"].as_u64()),
            (400, Some(50035))
        );
        let fine = conn
            .request("POST", &path, true, Some(&json!({"content": "ok"})))
            .await;
        assert_eq!(fine.status, 200);
        assert!(fine.json()["guild_id"].is_string());
    });
}

#[test]
fn injected_429_403_and_5xx() {
    run(async {
        let sim = sim();
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        let body = json!({"content": "hi"});
        sim.rest_fault(RestFault::rate_limited(1, 0.5).on("/api/v10/channels"));
        let mut conn = Http::connect(&sim).await;
        // Outside the prefix: untouched.
        assert_eq!(
            conn.request("GET", "/api/v10/gateway", false, None)
                .await
                .status,
            200
        );
        let limited = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!(limited.status, 429);
        let json = limited.json();
        assert_eq!(json["retry_after"], 0.5);
        assert_eq!(json["global"], false);
        assert!(json["message"].is_string());
        assert_eq!(limited.header("retry-after"), Some("1"));
        assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
        assert_eq!(limited.header("x-ratelimit-reset-after"), Some("0.500"));
        assert_eq!(limited.header("x-ratelimit-scope"), Some("user"));
        assert!(limited.header("x-ratelimit-reset").is_some());
        assert!(limited.header("x-ratelimit-limit").is_some());
        assert_eq!(
            conn.request("POST", &path, true, Some(&body)).await.status,
            200
        );

        sim.rest_fault(RestFault {
            kind: RestFaultKind::RateLimited {
                retry_after: 2.25,
                global: true,
            },
            count: 1,
            path_prefix: None,
        });
        let global = conn.request("GET", "/api/v10/gateway", false, None).await;
        assert_eq!(global.status, 429);
        assert_eq!(global.header("x-ratelimit-global"), Some("true"));
        assert_eq!(global.header("retry-after"), Some("3"));

        sim.rest_fault(RestFault {
            kind: RestFaultKind::Forbidden,
            count: 1,
            path_prefix: None,
        });
        let forbidden = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!(
            (forbidden.status, forbidden.json()["code"].as_u64()),
            (403, Some(50007))
        );

        sim.rest_fault(RestFault {
            kind: RestFaultKind::ServerError(502),
            count: 2,
            path_prefix: None,
        });
        assert_eq!(
            conn.request("POST", &path, true, Some(&body)).await.status,
            502
        );
        assert_eq!(
            conn.request("POST", &path, true, Some(&body)).await.status,
            502
        );
        assert_eq!(
            conn.request("POST", &path, true, Some(&body)).await.status,
            200
        );

        // Everything was recorded, in order, with bodies and statuses.
        let log = sim.rest_requests();
        let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [200, 429, 200, 429, 403, 502, 502, 200]);
        assert_eq!(log[1].method, "POST");
        assert_eq!(log[1].path, path);
        assert_eq!(log[1].body, body);
        assert!(log.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        let rest_event = sim
            .wait_for(WAIT, |e| matches!(e, SimEvent::Rest { status: 403, .. }))
            .await;
        assert!(rest_event.is_some());
    });
}

#[test]
fn voice_note_bytes_are_served() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(DMS).await;
        let ogg: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let note = sim.send_voice_dm(42, "alice", ogg.clone(), Duration::from_millis(3200));
        let message = client.expect_dispatch().await;
        let d = &message["d"];
        assert_eq!(d["flags"], 8192);
        assert_eq!(d["content"], "");
        assert_eq!(d["id"], note.message_id.to_string());
        let attachment = &d["attachments"][0];
        assert_eq!(attachment["content_type"], "audio/ogg");
        assert_eq!(attachment["size"], 5000);
        assert_eq!(attachment["duration_secs"], 3.2);
        assert!(attachment["waveform"].is_string());
        assert_eq!(attachment["url"], note.url);
        let typed: smolcord::protocol::Message =
            serde_json::from_value(d.clone()).expect("the protocol model reads it");
        assert!(typed.is_voice_message());

        let prefix = format!("http://{}", sim.local_addr());
        let path = note
            .url
            .strip_prefix(&prefix)
            .expect("served by the simulator");
        let reply = http(&sim, "GET", path, false, None).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("content-type"), Some("audio/ogg"));
        assert_eq!(reply.body, ogg);
        assert_eq!(
            http(&sim, "GET", "/attachments/1/2/x.ogg", false, None)
                .await
                .status,
            404
        );
    });
}

#[test]
fn keep_alive_connection_close_chunked_and_multipart() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        for _ in 0..3 {
            assert_eq!(
                conn.request("GET", "/api/v10/gateway", false, None)
                    .await
                    .status,
                200
            );
        }
        conn.send_raw(b"GET /api/v10/gateway HTTP/1.1\r\nConnection: close\r\n\r\n")
            .await;
        assert_eq!(conn.read_reply().await.status, 200);
        assert!(conn.is_closed().await, "Connection: close is honoured");

        let channel = sim.config().guilds[0].channels[1].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        let mut conn = Http::connect(&sim).await;
        let body = r#"{"content":"chunked"}"#;
        conn.send_raw(
            format!(
                "POST {path} HTTP/1.1\r\nAuthorization: Bot {DEFAULT_SIM_TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                10, &body[..10], body.len() - 10, &body[10..]
            )
            .as_bytes(),
        )
        .await;
        let reply = conn.read_reply().await;
        assert_eq!(
            reply.status,
            200,
            "{:?}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.json()["content"], "chunked");

        let multipart = "--B0UND\r\nContent-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json\r\n\r\n{\"content\":\"with file\"}\r\n--B0UND\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"note.txt\"\r\nContent-Type: text/plain\r\n\r\nfile body\r\n--B0UND--\r\n";
        conn.send_raw(
            format!(
                "POST {path} HTTP/1.1\r\nAuthorization: Bot {DEFAULT_SIM_TOKEN}\r\nContent-Type: multipart/form-data; boundary=B0UND\r\nContent-Length: {}\r\n\r\n{multipart}",
                multipart.len()
            )
            .as_bytes(),
        )
        .await;
        let reply = conn.read_reply().await.json();
        assert_eq!(reply["content"], "with file");
        let url = reply["attachments"][0]["url"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let prefix = format!("http://{}", sim.local_addr());
        let file = http(
            &sim,
            "GET",
            url.strip_prefix(&prefix).unwrap_or("/"),
            false,
            None,
        )
        .await;
        assert_eq!(file.body, b"file body");
        let log = sim.rest_requests();
        assert!(log.iter().any(|r| r.files == ["note.txt"]));
    });
}

#[test]
fn ureq_keeps_working_across_requests() {
    let sim = sim();
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let auth = format!("Bot {DEFAULT_SIM_TOKEN}");
    for _ in 0..2 {
        let mut reply = agent
            .get(format!("{}/gateway/bot", sim.api_base()))
            .header("Authorization", &auth)
            .call()
            .expect("request");
        assert_eq!(reply.status(), 200);
        let body: Value =
            serde_json::from_str(&reply.body_mut().read_to_string().expect("body")).expect("JSON");
        assert_eq!(body["shards"], 1);
    }
    let channel = sim.config().guilds[0].channels[0].id;
    let reply = agent
        .post(format!("{}/channels/{channel}/messages", sim.api_base()))
        .header("Authorization", &auth)
        .header("Content-Type", "application/json")
        .send(r#"{"content":"from ureq"}"#)
        .expect("post");
    assert_eq!(reply.status(), 200);
    assert_eq!(sim.messages_in(channel)[0].content, "from ureq");
}

async fn control(
    sim: &smolcord_sim::Simulator,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Reply {
    let mut conn = Http::connect(sim).await;
    let body = body.unwrap_or("");
    conn.send_raw(
        format!("{method} /control{path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
            .as_bytes(),
    )
    .await;
    conn.read_reply().await
}

#[test]
fn control_api_good_requests() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(DMS).await;

        let reply = control(
            &sim,
            "POST",
            "/dm",
            Some(r#"{"author_id":"42","author_name":"alice","content":"via control"}"#),
        )
        .await;
        assert_eq!(reply.status, 200);
        let ids = reply.json();
        let dm = client.expect_dispatch().await;
        assert_eq!(dm["d"]["content"], "via control");
        assert_eq!(dm["d"]["id"], ids["message_id"]);
        assert_eq!(dm["d"]["channel_id"], ids["channel_id"]);

        let reply = control(
            &sim,
            "POST",
            "/dm",
            Some(r#"{"author_id":42,"voice_ogg_base64":"T2dnUw==","duration_secs":1.5}"#),
        )
        .await;
        assert_eq!(reply.status, 200);
        let voice = client.expect_dispatch().await;
        assert_eq!(voice["d"]["flags"], 8192);
        assert_eq!(voice["d"]["attachments"][0]["size"], 4);

        let reply = control(
            &sim,
            "POST",
            "/dispatch",
            Some(r#"{"event":"CUSTOM_EVENT","d":{"x":1}}"#),
        )
        .await;
        assert_eq!(reply.json()["seqs"], json!([4]));
        let custom = client.expect_dispatch().await;
        assert_eq!(
            (custom["t"].as_str(), custom["d"]["x"].as_u64()),
            (Some("CUSTOM_EVENT"), Some(1))
        );

        let channel = sim.config().guilds[0].channels[0].id;
        let body = format!(r#"{{"channel_id":"{channel}","author_id":"7","content":"guild"}}"#);
        assert_eq!(
            control(&sim, "POST", "/guild-message", Some(&body))
                .await
                .status,
            200
        );

        let reply = control(
            &sim,
            "POST",
            "/rest-fault",
            Some(r#"{"kind":"forbidden","count":1}"#),
        )
        .await;
        assert_eq!(reply.status, 200);
        assert_eq!(
            http(&sim, "GET", "/api/v10/gateway", false, None)
                .await
                .status,
            403
        );

        let stats = control(&sim, "GET", "/stats", None).await.json();
        assert_eq!(stats["totals"]["connections"], 1);
        assert_eq!(stats["totals"]["sessions_started"], 1);
        let log = control(&sim, "GET", "/rest-log", None).await.json();
        assert_eq!(log.as_array().map(Vec::len), Some(1));
        assert_eq!(log[0]["status"], 403);
        let posted = http(
            &sim,
            "POST",
            &format!("/api/v10/channels/{channel}/messages"),
            true,
            Some(&json!({"content":"c"})),
        )
        .await;
        assert_eq!(posted.status, 200);
        let messages = control(
            &sim,
            "GET",
            &format!("/messages?channel_id={channel}"),
            None,
        )
        .await
        .json();
        assert_eq!(messages[0]["content"], "c");
        assert_eq!(control(&sim, "GET", "", None).await.status, 200);
    });
}

#[test]
fn control_api_bad_requests_get_400_naming_the_problem() {
    run(async {
        let sim = sim();
        let cases: &[(&str, &str, Option<&str>, u16, &str)] = &[
            ("POST", "/fault", Some("not json"), 400, "not JSON"),
            ("POST", "/fault", None, 400, "JSON body is required"),
            ("POST", "/fault", Some("[1]"), 400, "JSON object"),
            (
                "POST",
                "/fault",
                Some(r#"{"kind":"explode"}"#),
                400,
                "unknown fault kind `explode`",
            ),
            (
                "POST",
                "/fault",
                Some(r#"{"kind":"drop_acks"}"#),
                400,
                "missing field `n`",
            ),
            (
                "POST",
                "/fault",
                Some(r#"{"kind":"stall","ms":-5}"#),
                400,
                "`ms`",
            ),
            (
                "POST",
                "/rest-fault",
                Some(r#"{"kind":"teapot"}"#),
                400,
                "teapot",
            ),
            (
                "POST",
                "/rest-fault",
                Some(r#"{"kind":"server_error","status":404}"#),
                400,
                "5xx",
            ),
            (
                "POST",
                "/dispatch",
                Some(r#"{"d":{}}"#),
                400,
                "missing field `event`",
            ),
            (
                "POST",
                "/dm",
                Some(r#"{"content":"x"}"#),
                400,
                "missing field `author_id`",
            ),
            (
                "POST",
                "/dm",
                Some(r#"{"author_id":"abc"}"#),
                400,
                "`author_id` must be a Discord id",
            ),
            (
                "POST",
                "/dm",
                Some(r#"{"author_id":1,"voice_ogg_base64":"%%%"}"#),
                400,
                "base64",
            ),
            (
                "POST",
                "/guild-message",
                Some(r#"{"channel_id":"5","author_id":"1"}"#),
                400,
                "channel 5",
            ),
            ("GET", "/messages", None, 400, "channel_id"),
            ("GET", "/fault", None, 405, "not allowed"),
            ("GET", "/nowhere", None, 404, "no control endpoint"),
        ];
        for (method, path, body, status, needle) in cases {
            let reply = control(&sim, method, path, *body).await;
            assert_eq!(reply.status, *status, "{method} {path} {body:?}");
            let error = reply.json()["error"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                error.contains(needle),
                "{method} {path}: `{error}` lacks `{needle}`"
            );
        }
        // Still serving.
        assert_eq!(control(&sim, "GET", "/stats", None).await.status, 200);
    });
}

#[test]
fn a_rest_fault_with_a_method_takes_only_that_method_and_answers_carry_date() {
    run(async {
        let sim = sim();
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        sim.rest_fault(RestFault {
            kind: RestFaultKind::ServerError(500),
            count: 1,
            path_prefix: Some(format!("GET {path}")),
        });
        let mut conn = Http::connect(&sim).await;
        let body = json!({"content": "hi"});
        let posted = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!(posted.status, 200, "a post is not a history read");
        let date = posted.header("date").expect("a Date header").to_owned();
        assert!(smolcord::rest::parse_http_date(&date).is_some(), "{date}");
        let read = conn
            .request("GET", &format!("{path}?limit=5"), true, None)
            .await;
        assert_eq!(read.status, 500);
        assert_eq!(conn.request("GET", &path, true, None).await.status, 200);
    });
}
