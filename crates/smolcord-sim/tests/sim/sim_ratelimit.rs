//! The simulator's rate limits look like Discord's: `Via: 1.1 google` on
//! every REST answer, per-route buckets whose counts really count down per
//! major parameter, and the three 429s (user, shared, global) with
//! Discord's headers and body, injected or earned.

use crate::support;

use serde_json::json;
use smolcord_sim::{RestFault, RestRateLimit, SimConfig};
use std::time::Duration;
use support::sim_client::*;

fn remaining(reply: &Reply) -> u32 {
    reply
        .header("x-ratelimit-remaining")
        .expect("X-RateLimit-Remaining")
        .parse()
        .expect("a count")
}

fn reset_after(reply: &Reply) -> f64 {
    reply
        .header("x-ratelimit-reset-after")
        .expect("X-RateLimit-Reset-After")
        .parse()
        .expect("seconds")
}

#[test]
fn every_rest_answer_comes_via_google() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        for (method, path, auth) in [
            ("GET", "/api/v10/gateway", false),
            ("GET", "/api/v10/gateway/bot", false),
            ("GET", "/api/v10/gateway/bot", true),
            ("GET", "/api/v10/nope", true),
            ("GET", "/api/v7/gateway", false),
        ] {
            let reply = conn.request(method, path, auth, None).await;
            assert_eq!(
                reply.header("via"),
                Some("1.1 google"),
                "{method} {path} -> {}",
                reply.status
            );
        }
    })
}

#[test]
fn buckets_count_down_per_route_and_channel() {
    run(async {
        let sim = sim();
        let channels = &sim.config().guilds[0].channels;
        let (one, two) = (channels[0].id, channels[1].id);
        let mut conn = Http::connect(&sim).await;
        let body = json!({"content": "hi"});
        let mut counts = Vec::new();
        let mut resets = Vec::new();
        let mut buckets = Vec::new();
        for _ in 0..6 {
            let path = format!("/api/v10/channels/{one}/messages");
            let reply = conn.request("POST", &path, true, Some(&body)).await;
            assert_eq!(reply.status, 200);
            counts.push(remaining(&reply));
            resets.push(reset_after(&reply));
            buckets.push(reply.header("x-ratelimit-bucket").unwrap().to_owned());
        }
        let limit = RestRateLimit::REPORTED.per_route;
        let want: Vec<u32> = (1..=6).map(|n| limit - n).collect();
        assert_eq!(counts, want, "one request each");
        assert!(buckets.iter().all(|b| *b == buckets[0]), "{buckets:?}");
        assert!(
            buckets[0].len() == 32 && buckets[0].bytes().all(|b| b.is_ascii_hexdigit()),
            "an opaque id: {}",
            buckets[0]
        );
        assert!(
            resets.windows(2).all(|w| w[1] <= w[0]),
            "the window runs out, it does not restart: {resets:?}"
        );
        // Another channel: the same route's bucket, its own count.
        let other = conn
            .request(
                "POST",
                &format!("/api/v10/channels/{two}/messages"),
                true,
                Some(&body),
            )
            .await;
        assert_eq!(
            other.header("x-ratelimit-bucket"),
            Some(buckets[0].as_str())
        );
        assert_eq!(remaining(&other), limit - 1);
        // Another route: another bucket.
        let typing = conn
            .request(
                "POST",
                &format!("/api/v10/channels/{one}/typing"),
                true,
                None,
            )
            .await;
        assert_eq!(typing.status, 204);
        assert_ne!(
            typing.header("x-ratelimit-bucket"),
            Some(buckets[0].as_str())
        );
        assert_eq!(remaining(&typing), limit - 1);
    })
}

#[test]
fn an_enforced_route_limit_answers_a_user_scope_429() {
    run(async {
        let sim = sim_with(SimConfig {
            rest_rate_limit: Some(RestRateLimit {
                per_route: 2,
                window: Duration::from_secs(3),
                global_per_second: 50,
            }),
            ..SimConfig::default()
        });
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        let body = json!({"content": "hi"});
        let mut conn = Http::connect(&sim).await;
        let first = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!((first.status, remaining(&first)), (200, 1));
        assert_eq!(first.header("x-ratelimit-limit"), Some("2"));
        let second = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!((second.status, remaining(&second)), (200, 0));
        let limited = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!(limited.status, 429);
        assert_eq!(limited.header("via"), Some("1.1 google"));
        assert_eq!(limited.header("x-ratelimit-scope"), Some("user"));
        assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
        assert_eq!(
            limited.header("x-ratelimit-bucket"),
            first.header("x-ratelimit-bucket")
        );
        assert_eq!(limited.header("x-ratelimit-global"), None);
        let json = limited.json();
        assert_eq!(json["message"], "You are being rate limited.");
        assert_eq!(json["global"], false);
        let retry_after = json["retry_after"].as_f64().expect("retry_after seconds");
        assert!(retry_after > 0.0 && retry_after <= 3.0, "{retry_after}");
        let header: u64 = limited.header("retry-after").unwrap().parse().unwrap();
        assert_eq!(header, retry_after.ceil() as u64);
    })
}

#[test]
fn injected_429s_of_each_scope_look_like_discords() {
    run(async {
        let sim = sim();
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        let body = json!({"content": "hi"});
        let mut conn = Http::connect(&sim).await;
        let served = conn.request("POST", &path, true, Some(&body)).await;
        let bucket = served.header("x-ratelimit-bucket").unwrap().to_owned();

        // A route's limit: that route's bucket, spent until retry_after.
        sim.rest_fault(RestFault::rate_limited(1, 0.25).on(&path));
        let user = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!(user.status, 429);
        assert_eq!(user.header("via"), Some("1.1 google"));
        assert_eq!(user.header("x-ratelimit-scope"), Some("user"));
        assert_eq!(user.header("x-ratelimit-bucket"), Some(bucket.as_str()));
        assert_eq!(user.header("x-ratelimit-remaining"), Some("0"));
        assert_eq!(user.header("x-ratelimit-reset-after"), Some("0.250"));
        assert_eq!(user.header("retry-after"), Some("1"));
        assert_eq!(
            user.json(),
            json!({"message": "You are being rate limited.", "retry_after": 0.25, "global": false})
        );

        // A shared limit: the bucket keeps its real count; code 20028 on a
        // channel, as Discord answers a channel's write limit.
        sim.rest_fault(RestFault::shared_rate_limited(1, 2.5).on(&path));
        let shared = conn.request("POST", &path, true, Some(&body)).await;
        assert_eq!(shared.status, 429);
        assert_eq!(shared.header("x-ratelimit-scope"), Some("shared"));
        assert_eq!(shared.header("x-ratelimit-bucket"), Some(bucket.as_str()));
        assert_eq!(remaining(&shared), remaining(&served));
        assert_eq!(shared.header("retry-after"), Some("3"));
        let json = shared.json();
        assert_eq!(json["code"], 20028);
        assert_eq!(json["global"], false);
        assert_eq!(json["retry_after"], 2.5);

        // The global limit: no bucket headers at all.
        sim.rest_fault(RestFault::global_rate_limited(1, 0.5));
        let global = conn.request("GET", "/api/v10/users/@me", true, None).await;
        assert_eq!(global.status, 429);
        assert_eq!(global.header("via"), Some("1.1 google"));
        assert_eq!(global.header("x-ratelimit-scope"), Some("global"));
        assert_eq!(global.header("x-ratelimit-global"), Some("true"));
        assert_eq!(global.header("x-ratelimit-bucket"), None);
        assert_eq!(global.header("x-ratelimit-remaining"), None);
        assert_eq!(
            global.json(),
            json!({"message": "You are being rate limited.", "retry_after": 0.5, "global": true})
        );

        // The control API takes the scope by name.
        let control = sim.control_url();
        let queued = conn
            .request(
                "POST",
                &format!(
                    "{}/rest-fault",
                    control.trim_start_matches(&format!("http://{}", sim.local_addr()))
                ),
                false,
                Some(
                    &json!({"kind": "rate_limited", "scope": "shared", "retry_after": 0.1,
                              "path_prefix": "/api/v10/users"}),
                ),
            )
            .await;
        assert_eq!(
            queued.status,
            200,
            "{:?}",
            String::from_utf8_lossy(&queued.body)
        );
        let shared = conn.request("GET", "/api/v10/users/@me", true, None).await;
        assert_eq!(shared.header("x-ratelimit-scope"), Some("shared"));
        assert_eq!(
            shared.json()["message"],
            "The resource is being rate limited."
        );
        assert_eq!(shared.json().get("code"), None);
        // Faults are spent: served again.
        assert_eq!(
            conn.request("POST", &path, true, Some(&body)).await.status,
            200
        );
    })
}
