//! RestClient against a tiny scripted HTTP/1.1 server on 127.0.0.1: each
//! test queues canned answers and inspects the requests the server saw.
// Tests may block (std::fs, std::net); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::time::{Duration, Instant};

use futures_lite::future;
use smolcord::protocol::{ChannelType, Snowflake};
use smolcord::rest::{MessageDraft, RestClient, RestError, USER_AGENT};
use smolcord::token::Token;

use server::{Canned, Server};

const SECRET: &str = "MTIz.sekrit-token.XyZ";

/// Runs a test body with a hard bound, so a hang fails instead of stalling CI.
fn run<T>(fut: impl std::future::Future<Output = T>) -> T {
    smol::block_on(future::or(fut, async {
        async_io::Timer::after(Duration::from_secs(30)).await;
        panic!("test did not finish within 30 s");
    }))
}

fn client(server: &Server) -> RestClient {
    RestClient::new(&server.base(), Token::new(SECRET).unwrap())
}

fn message_json(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","channel_id":"123","author":{{"id":"1","username":"bot"}},"content":"hi","extra":{{"ignored":true}}}}"#
    )
}

fn assert_no_secret(e: &RestError) {
    let shown = format!("{e} {e:?}");
    assert!(
        !shown.contains(SECRET) && !shown.contains("sekrit"),
        "{shown}"
    );
}

#[test]
fn sends_auth_user_agent_and_json() {
    run(async {
        let server = Server::start(vec![
            Canned::json(200, &message_json("9")),
            Canned::new(204, ""),
            Canned::json(
                200,
                r#"{"url":"wss://gw.example","shards":1,"session_start_limit":{"total":1000,"remaining":998,"reset_after":3600000,"max_concurrency":1}}"#,
            ),
        ])
        .await;
        let rest = client(&server);
        let message = rest
            .create_message(Snowflake::new(123), &MessageDraft::text("hello <@1>"))
            .await
            .unwrap();
        assert_eq!(
            (message.id.to_string(), message.channel_id.to_string()),
            ("9".to_owned(), "123".to_owned())
        );
        rest.trigger_typing(Snowflake::new(123)).await.unwrap();
        let gateway = rest.gateway_bot().await.unwrap();
        assert_eq!(gateway.url, "wss://gw.example");
        assert_eq!(gateway.session_start_limit.remaining, 998);

        let seen = server.requests();
        assert_eq!(seen.len(), 3);
        let post = &seen[0];
        assert_eq!(
            (post.method.as_str(), post.path.as_str()),
            ("POST", "/api/v10/channels/123/messages")
        );
        assert_eq!(
            post.header("authorization"),
            Some(format!("Bot {SECRET}").as_str())
        );
        assert_eq!(post.header("user-agent"), Some(USER_AGENT));
        assert!(USER_AGENT.starts_with("DiscordBot (https://github.com/smolcord/smolcord, "));
        assert_eq!(post.header("content-type"), Some("application/json"));
        let body: serde_json::Value = serde_json::from_slice(&post.body).unwrap();
        assert_eq!(body["content"], "hello <@1>");
        assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]));
        assert!(body["nonce"]
            .as_str()
            .is_some_and(|n| !n.is_empty() && n.len() <= 25));
        assert_eq!(body["enforce_nonce"], true);

        assert_eq!(seen[1].method, "POST");
        assert_eq!(seen[1].path, "/api/v10/channels/123/typing");
        assert_eq!(
            seen[1].header("authorization"),
            Some(format!("Bot {SECRET}").as_str())
        );
        assert_eq!(
            (seen[2].method.as_str(), seen[2].path.as_str()),
            ("GET", "/api/v10/gateway/bot")
        );
    });
}

#[test]
fn create_dm_and_edit_message() {
    run(async {
        let server = Server::start(vec![
            Canned::json(200, r#"{"id":"555","type":1}"#),
            Canned::json(200, &message_json("77")),
        ])
        .await;
        let rest = client(&server);
        let dm = rest.create_dm(Snowflake::new(42)).await.unwrap();
        assert_eq!((dm.id, dm.kind), (Snowflake::new(555), ChannelType::DM));
        rest.edit_message(
            Snowflake::new(123),
            Snowflake::new(77),
            &MessageDraft::text("done"),
        )
        .await
        .unwrap();
        let seen = server.requests();
        assert_eq!(seen[0].path, "/api/v10/users/@me/channels");
        let body: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
        assert_eq!(body["recipient_id"], "42");
        assert_eq!(
            (seen[1].method.as_str(), seen[1].path.as_str()),
            ("PATCH", "/api/v10/channels/123/messages/77")
        );
    });
}

#[test]
fn honours_retry_after_on_429() {
    run(async {
        let server = Server::start(vec![
            Canned::json(
                429,
                r#"{"message":"You are being rate limited.","retry_after":0.4,"global":false}"#,
            )
            .header("Retry-After", "3")
            .header("X-RateLimit-Scope", "user"),
            Canned::json(200, &message_json("1")),
        ])
        .await;
        let start = Instant::now();
        client(&server)
            .create_message(Snowflake::new(123), &MessageDraft::text("x"))
            .await
            .unwrap();
        let elapsed = start.elapsed();
        let seen = server.requests();
        assert_eq!(seen.len(), 2, "retried once");
        let gap = seen[1].at - seen[0].at;
        assert!(gap >= Duration::from_millis(400), "waited only {gap:?}");
        // The body's precise float wins over the rounded-up header (3 s).
        assert!(
            gap < Duration::from_millis(2500),
            "waited {gap:?}: header used?"
        );
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    });
}

#[test]
fn retry_after_header_alone_is_honoured() {
    run(async {
        let server = Server::start(vec![
            Canned::new(429, "<html>slow down</html>").header("Retry-After", "1"),
            Canned::json(200, &message_json("1")),
        ])
        .await;
        client(&server)
            .create_message(Snowflake::new(123), &MessageDraft::text("x"))
            .await
            .unwrap();
        let seen = server.requests();
        let gap = seen[1].at - seen[0].at;
        assert!(gap >= Duration::from_secs(1), "waited only {gap:?}");
        assert!(gap < Duration::from_secs(5), "waited {gap:?}");
    });
}

#[test]
fn too_long_rate_limit_gives_up_at_once() {
    run(async {
        let server = Server::start(vec![Canned::json(
            429,
            r#"{"message":"You are being rate limited.","retry_after":120.0,"global":true}"#,
        )])
        .await;
        let start = Instant::now();
        let err = client(&server)
            .create_message(Snowflake::new(123), &MessageDraft::text("x"))
            .await
            .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(
            matches!(err, RestError::RateLimitedTooLong { attempts: 1, .. }),
            "{err:?}"
        );
        assert!(!err.is_permanent());
    });
}

#[test]
fn exhausted_bucket_delays_the_next_call_on_that_channel_only() {
    run(async {
        let exhausted = Canned::json(200, &message_json("1"))
            .header("X-RateLimit-Limit", "5")
            .header("X-RateLimit-Remaining", "0")
            .header("X-RateLimit-Reset-After", "1.0")
            .header("X-RateLimit-Bucket", "abcd");
        let fresh = Canned::json(200, &message_json("2"))
            .header("X-RateLimit-Limit", "5")
            .header("X-RateLimit-Remaining", "4")
            .header("X-RateLimit-Reset-After", "5")
            .header("X-RateLimit-Bucket", "abcd");
        let server = Server::start(vec![exhausted, fresh.clone(), fresh]).await;
        let rest = client(&server);
        rest.create_message(Snowflake::new(111), &MessageDraft::text("a"))
            .await
            .unwrap();
        rest.create_message(Snowflake::new(222), &MessageDraft::text("b"))
            .await
            .unwrap(); // other channel: no wait
        rest.create_message(Snowflake::new(111), &MessageDraft::text("c"))
            .await
            .unwrap(); // same bucket: waits
        let seen = server.requests();
        assert_eq!(seen.len(), 3);
        let other = seen[1].at - seen[0].at;
        let same = seen[2].at - seen[0].at;
        assert!(
            other < Duration::from_millis(800),
            "other channel waited {other:?}"
        );
        assert!(
            same >= Duration::from_millis(1000),
            "same channel waited only {same:?}"
        );
        assert!(
            same < Duration::from_secs(5),
            "same channel waited {same:?}"
        );
    });
}

#[test]
fn discord_json_error_is_typed_and_permanent() {
    run(async {
        let server = Server::start(vec![Canned::json(
            403,
            r#"{"message":"Missing Access","code":50001}"#,
        )])
        .await;
        let err = client(&server)
            .create_message(Snowflake::new(123), &MessageDraft::text("x"))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            RestError::Http {
                status: 403,
                code: Some(50001),
                message: "Missing Access".into(),
                route: "POST /channels/{channel_id}/messages".into(),
            }
        );
        assert!(err.is_permanent());
        assert_eq!(server.requests().len(), 1, "a 4xx is not retried");
        let shown = err.to_string();
        assert!(
            shown.contains("403") && shown.contains("50001") && shown.contains("Missing Access"),
            "{shown}"
        );
    });
}

#[test]
fn server_errors_are_retried() {
    run(async {
        let server = Server::start(vec![
            Canned::new(500, "oops"),
            Canned::new(502, "bad gateway"),
            Canned::json(200, &message_json("1")),
        ])
        .await;
        client(&server)
            .create_message(Snowflake::new(123), &MessageDraft::text("x"))
            .await
            .unwrap();
        assert_eq!(server.requests().len(), 3);

        let server = Server::start(vec![
            Canned::new(500, "a"),
            Canned::new(500, "b"),
            Canned::new(503, "c"),
        ])
        .await;
        let err = client(&server)
            .create_message(Snowflake::new(123), &MessageDraft::text("x"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, RestError::Http { status: 503, .. }),
            "{err:?}"
        );
        assert!(!err.is_permanent());
        assert_eq!(server.requests().len(), 3, "three tries, then give up");
    });
}

#[test]
fn unanswered_request_times_out_after_three_tries() {
    run(async {
        let server = Server::start(vec![Canned::hang(), Canned::hang(), Canned::hang()]).await;
        let start = Instant::now();
        let err = client(&server)
            .with_timeout(Duration::from_millis(300))
            .trigger_typing(Snowflake::new(123))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            RestError::Timeout {
                route: "POST /channels/{channel_id}/typing".into()
            }
        );
        assert!(!err.is_permanent());
        assert_eq!(server.requests().len(), 3, "three tries, then give up");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
    });
}

#[test]
fn idempotent_requests_are_sent_again_after_a_timeout() {
    run(async {
        let server = Server::start(vec![
            Canned::hang(),
            Canned::json(
                200,
                r#"{"url":"wss://gw.example","shards":1,"session_start_limit":{"total":1000,"remaining":998,"reset_after":3600000,"max_concurrency":1}}"#,
            ),
            Canned::hang(),
            Canned::json(200, r#"{"id":"555","type":1}"#),
            Canned::hang(),
            Canned::json(200, &message_json("77")),
            Canned::hang(),
            Canned::new(204, ""),
        ])
        .await;
        // Long enough that an answer that is not held back always makes it.
        let rest = client(&server).with_timeout(Duration::from_millis(500));
        rest.gateway_bot().await.unwrap();
        rest.create_dm(Snowflake::new(42)).await.unwrap();
        rest.edit_message(
            Snowflake::new(123),
            Snowflake::new(77),
            &MessageDraft::text("done"),
        )
        .await
        .unwrap();
        rest.trigger_typing(Snowflake::new(123)).await.unwrap();
        let seen: Vec<String> = server
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert_eq!(
            seen,
            [
                "GET /api/v10/gateway/bot",
                "GET /api/v10/gateway/bot",
                "POST /api/v10/users/@me/channels",
                "POST /api/v10/users/@me/channels",
                "PATCH /api/v10/channels/123/messages/77",
                "PATCH /api/v10/channels/123/messages/77",
                "POST /api/v10/channels/123/typing",
                "POST /api/v10/channels/123/typing",
            ]
        );
    });
}

/// A message whose first answer comes too late: the simulator (which
/// dedupes nonces as Discord does) created it, the client gave up on the
/// answer and sent it again with the same nonce, and got the one message.
#[test]
fn a_message_that_timed_out_is_sent_again_and_posted_once() {
    use smolcord::rest::Nonce;
    use smolcord_sim::{RestFault, RestFaultKind, SimConfig, Simulator, DEFAULT_SIM_TOKEN};
    run(async {
        let sim = Simulator::start(SimConfig::default()).expect("simulator starts");
        let (_, dm) = sim.send_dm(42, "alice", "hi");
        let path = format!("/api/v10/channels/{dm}/messages");
        // Held far past the client's timeout (and the test's bound: the
        // call returns long before the held answer would come).
        sim.rest_fault(RestFault {
            kind: RestFaultKind::Delay(Duration::from_secs(60)),
            count: 1,
            path_prefix: Some(path.clone()),
        });
        let rest = RestClient::new(&sim.api_base(), Token::new(DEFAULT_SIM_TOKEN).unwrap())
            .with_timeout(Duration::from_secs(1));
        let nonce = Nonce::new("r1.0").unwrap();
        let message = rest
            .create_message(dm, &MessageDraft::text("the reply").nonce(&nonce))
            .await
            .expect("the retry gets the message the first try created");
        let messages = sim.messages_in(dm);
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(message.id, messages[0].id);
        let posts: Vec<_> = sim
            .rest_requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == path)
            .collect();
        assert_eq!(posts.len(), 2, "the first try and one retry");
        assert!(posts.iter().all(|r| r.body["nonce"] == "r1.0"));
        assert_eq!(sim.stats().totals.duplicates_prevented, 1);
    });
}

#[test]
fn refused_connection_is_a_transport_error() {
    run(async {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let rest = RestClient::new(
            &format!("http://127.0.0.1:{port}/api/v10"),
            Token::new(SECRET).unwrap(),
        );
        let err = rest.gateway_bot().await.unwrap_err();
        assert!(
            matches!(&err, RestError::Transport { route, .. } if route == "GET /gateway/bot"),
            "{err:?}"
        );
        assert!(!err.is_permanent());
        assert_no_secret(&err);
    });
}

#[test]
fn token_never_appears_in_errors() {
    run(async {
        let echo = format!(r#"{{"message":"bad header: Bot {SECRET}","code":40001}}"#);
        let server = Server::start(vec![
            Canned::json(401, &echo),
            Canned::new(400, &format!("plain text Bot {SECRET}")),
            Canned::json(200, &format!(r#"{{"id": 5, "oops": "{SECRET}"}}"#)),
        ])
        .await;
        let rest = client(&server);
        for _ in 0..3 {
            let err = rest
                .create_message(Snowflake::new(123), &MessageDraft::text("x"))
                .await
                .unwrap_err();
            assert_no_secret(&err);
        }
        assert!(!format!("{rest:?}").contains("sekrit"));
    });
}

#[test]
fn bad_arguments_never_reach_the_server() {
    run(async {
        let server = Server::start(vec![]).await;
        let rest = client(&server);
        // An id is a `Snowflake` by type now: "12/../../users" cannot be
        // passed at all. A nonce or a reply on an edit can.
        let nonce = smolcord::rest::Nonce::random();
        let err = rest
            .edit_message(
                Snowflake::new(12),
                Snowflake::new(1),
                &MessageDraft::text("x").nonce(&nonce),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, RestError::InvalidInput { .. }) && err.is_permanent(),
            "{err:?}"
        );
        let err = rest
            .create_message(Snowflake::new(123), &MessageDraft::text(&"x".repeat(2001)))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("2001"), "{err}");
        assert!(rest
            .create_message(Snowflake::new(123), &MessageDraft::text("  "))
            .await
            .is_err());
        assert!(rest
            .download("file:///etc/passwd", 10, Path::new("/nonexistent"))
            .await
            .is_err());
        assert!(server.requests().is_empty());
    });
}

#[test]
fn download_streams_to_file_without_authorization() {
    run(async {
        let payload: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
        let server = Server::start(vec![
            Canned::bytes(200, payload.clone()),
            Canned::bytes(200, payload.clone()).chunked(),
        ])
        .await;
        let dir = tempfile::tempdir().unwrap();
        let rest = client(&server);
        for name in ["a.ogg", "b.ogg"] {
            let dest = dir.path().join(name);
            let url = format!("{}/attachments/1/2/{name}?ex=1&hm=2", server.origin());
            let written = rest.download(&url, 200_000, &dest).await.unwrap();
            assert_eq!(written, payload.len() as u64);
            assert_eq!(std::fs::read(&dest).unwrap(), payload);
            // A voice note is private: only we may read it, whatever the umask.
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&dest).unwrap().permissions(),
            );
            assert_eq!(mode & 0o777, 0o600, "{name} has mode {mode:o}");
        }
        for request in server.requests() {
            assert_eq!(
                request.header("authorization"),
                None,
                "the CDN never sees the token"
            );
            assert_eq!(request.header("user-agent"), Some(USER_AGENT));
        }
    });
}

#[test]
fn download_over_the_cap_is_refused_and_removed() {
    run(async {
        let big = vec![7u8; 5000];
        let server = Server::start(vec![
            Canned::bytes(200, big.clone()),
            Canned::bytes(200, big).chunked(),
        ])
        .await;
        let dir = tempfile::tempdir().unwrap();
        let rest = client(&server);
        for name in ["sized.ogg", "chunked.ogg"] {
            let dest = dir.path().join(name);
            let url = format!("{}/attachments/{name}?ex=1", server.origin());
            let err = rest.download(&url, 1000, &dest).await.unwrap_err();
            assert!(
                matches!(&err, RestError::TooLarge { limit: 1000, .. }),
                "{err:?}"
            );
            assert!(err.to_string().contains("1000-byte cap"), "{err}");
            assert!(
                !err.to_string().contains("ex=1"),
                "no query in errors: {err}"
            );
            assert!(err.is_permanent());
            assert!(!dest.exists(), "partial file left behind: {name}");
        }
    });
}

#[test]
fn download_follows_redirects_on_the_same_host_only_and_checks_each_hop() {
    run(async {
        let payload = vec![9u8; 3000];
        // A foreign host listening for real: a request reaching it would be counted.
        let foreign = Server::start(vec![Canned::bytes(200, b"stolen".to_vec())]).await;
        let server = Server::start(vec![
            // 1: relative, then absolute on the API's own host: followed.
            Canned::new(302, "").header("Location", "/attachments/1/2/moved.png?ex=2"),
            Canned::new(307, "").header("Location", "next.png"),
            Canned::bytes(200, payload.clone()),
            // 2: off to another host (another port is another origin).
            Canned::new(302, "").header(
                "Location",
                &format!("{}/latest/meta-data", foreign.origin()),
            ),
            // 3: a loop on the same host.
            Canned::new(302, "").header("Location", "/a"),
            Canned::new(302, "").header("Location", "/b"),
            Canned::new(302, "").header("Location", "/c"),
            Canned::new(302, "").header("Location", "/d"),
        ])
        .await;
        let dir = tempfile::tempdir().unwrap();
        let rest = client(&server);
        let dest = dir.path().join("a.png");
        let url = format!("{}/attachments/1/2/a.png?ex=1", server.origin());
        assert_eq!(rest.download(&url, 10_000, &dest).await.unwrap(), 3000);
        assert_eq!(std::fs::read(&dest).unwrap(), payload);
        let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
        assert_eq!(
            paths,
            [
                "/attachments/1/2/a.png?ex=1",
                "/attachments/1/2/moved.png?ex=2",
                "/attachments/1/2/next.png"
            ]
        );

        let dest = dir.path().join("b.png");
        let err = rest.download(&url, 10_000, &dest).await.unwrap_err();
        match &err {
            RestError::ForeignHost {
                origin, redirects, ..
            } => {
                assert_eq!(origin, &foreign.origin());
                assert_eq!(*redirects, 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(err.is_permanent());
        assert!(err.to_string().contains("not followed"), "{err}");
        assert!(
            !err.to_string().contains("meta-data"),
            "no path in errors: {err}"
        );
        assert!(foreign.requests().is_empty(), "the foreign host was asked");
        assert!(!dest.exists());
        server.requests();

        let err = rest.download(&url, 10_000, &dest).await.unwrap_err();
        assert!(
            matches!(err, RestError::TooManyRedirects { limit: 3, .. }),
            "{err:?}"
        );
        assert_eq!(server.requests().len(), 4, "the URL and 3 redirects");
        assert!(!dest.exists());

        // The URL itself off the CDN: nothing is asked at all.
        let err = rest
            .download(&format!("{}/x", foreign.origin()), 10, &dest)
            .await
            .unwrap_err();
        assert!(
            matches!(err, RestError::ForeignHost { redirects: 0, .. }),
            "{err:?}"
        );
        assert!(foreign.requests().is_empty());
    });
}

mod server {
    //! A scripted HTTP/1.1 server: answers each request with the next canned
    //! response and records what it received (keep-alive aware).

    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use async_net::{TcpListener, TcpStream};
    use futures_lite::{AsyncReadExt, AsyncWriteExt};

    #[derive(Clone)]
    pub struct Canned {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        chunked: bool,
        hang: bool,
    }

    impl Canned {
        pub fn new(status: u16, body: &str) -> Canned {
            Canned::bytes(status, body.as_bytes().to_vec())
        }
        pub fn bytes(status: u16, body: Vec<u8>) -> Canned {
            Canned {
                status,
                headers: Vec::new(),
                body,
                chunked: false,
                hang: false,
            }
        }
        pub fn json(status: u16, body: &str) -> Canned {
            Canned::new(status, body).header("Content-Type", "application/json")
        }
        pub fn hang() -> Canned {
            Canned {
                hang: true,
                ..Canned::new(200, "")
            }
        }
        pub fn header(mut self, name: &str, value: &str) -> Canned {
            self.headers.push((name.into(), value.into()));
            self
        }
        pub fn chunked(mut self) -> Canned {
            self.chunked = true;
            self
        }
    }

    pub struct Recorded {
        pub method: String,
        pub path: String,
        headers: Vec<(String, String)>,
        pub body: Vec<u8>,
        pub at: Instant,
    }

    impl Recorded {
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    type Shared<T> = Arc<Mutex<T>>;

    pub struct Server {
        port: u16,
        recorded: Shared<Vec<Recorded>>,
        _task: smol::Task<()>,
    }

    impl Server {
        pub async fn start(script: Vec<Canned>) -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let script: Shared<VecDeque<Canned>> = Arc::new(Mutex::new(script.into()));
            let recorded: Shared<Vec<Recorded>> = Arc::default();
            let log = recorded.clone();
            let task = smol::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    smol::spawn(serve(stream, script.clone(), log.clone())).detach();
                }
            });
            Server {
                port,
                recorded,
                _task: task,
            }
        }

        pub fn origin(&self) -> String {
            format!("http://127.0.0.1:{}", self.port)
        }

        pub fn base(&self) -> String {
            format!("{}/api/v10", self.origin())
        }

        pub fn requests(&self) -> Vec<Recorded> {
            std::mem::take(&mut *self.recorded.lock().unwrap())
        }
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|w| w == needle)
    }

    async fn serve(
        mut stream: TcpStream,
        script: Shared<VecDeque<Canned>>,
        log: Shared<Vec<Recorded>>,
    ) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let head_end = loop {
                if let Some(i) = find(&buf, b"\r\n\r\n") {
                    break i + 4;
                }
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut first = lines.next().unwrap_or_default().split(' ');
            let method = first.next().unwrap_or_default().to_owned();
            let path = first.next().unwrap_or_default().to_owned();
            let headers: Vec<(String, String)> = lines
                .filter_map(|line| line.split_once(':'))
                .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
                .collect();
            let length: usize = headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < head_end + length {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let body = buf[head_end..head_end + length].to_vec();
            buf.drain(..head_end + length);
            log.lock().unwrap().push(Recorded {
                method,
                path,
                headers,
                body,
                at: Instant::now(),
            });

            let canned = script.lock().unwrap().pop_front();
            let canned = canned.unwrap_or_else(|| Canned::new(599, "script exhausted"));
            if canned.hang {
                futures_lite::future::pending::<()>().await;
            }
            let mut out = format!("HTTP/1.1 {} X\r\n", canned.status);
            for (name, value) in &canned.headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            let mut bytes;
            if canned.chunked {
                out.push_str("Transfer-Encoding: chunked\r\n\r\n");
                bytes = out.into_bytes();
                for piece in canned.body.chunks(1000) {
                    bytes.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    bytes.extend_from_slice(piece);
                    bytes.extend_from_slice(b"\r\n");
                }
                bytes.extend_from_slice(b"0\r\n\r\n");
            } else {
                out.push_str(&format!("Content-Length: {}\r\n\r\n", canned.body.len()));
                bytes = out.into_bytes();
                bytes.extend_from_slice(&canned.body);
            }
            if stream.write_all(&bytes).await.is_err() || stream.flush().await.is_err() {
                return;
            }
        }
    }
}
