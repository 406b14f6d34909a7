//! Identify pacing and `max_concurrency` are settable (flags of `smolcord
//! sim`, the control API, the Rust handle): two Identifies in one bucket
//! within the identify window get op 9 for the second, as Discord answers;
//! another bucket is not held up; `GET /gateway/bot` reports the buckets
//! and shards configured. `smolcord sim` paces by default.

use crate::support;

use serde_json::{json, Value};
use smolcord_sim::{IdentifyPacing, DEFAULT_SIM_TOKEN};
use std::net::SocketAddr;
use std::time::Duration;
use support::binary::Smolcord;
use support::sim_client::*;

const DMS: u64 = 1 << 12;

async fn identify_shard(addr: SocketAddr, shard: [u32; 2]) -> (Client, Value) {
    let mut client = Client::connect_addr(addr, "/?v=10&encoding=json").await;
    client.expect_hello().await;
    client
        .identify_with(json!({"token": DEFAULT_SIM_TOKEN, "intents": DMS, "shard": shard}))
        .await;
    let answer = client.frame().await;
    (client, answer)
}

fn is_ready(frame: &Value) -> bool {
    frame["op"] == 0 && frame["t"] == "READY"
}

fn is_invalid_session(frame: &Value) -> bool {
    frame["op"] == 9 && frame["d"] == false
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn spawn_sim(extra: &[&str]) -> (Smolcord, SocketAddr) {
    let addr = free_addr();
    let listen = addr.to_string();
    let sim = Smolcord::spawn(
        &[&["sim", "--listen", &listen][..], extra].concat(),
        [("RUST_LOG", "info")],
    );
    support::wait::poll_until(Duration::from_secs(30), || {
        sim.stdout().contains("  control ").then_some(())
    })
    .unwrap_or_else(|| panic!("`smolcord sim` printed no URLs: {}", sim.stdout()));
    (sim, addr)
}

#[test]
fn the_sim_command_paces_identifies_per_bucket() {
    let (sim, addr) = spawn_sim(&["--max-concurrency", "2", "--shards", "4"]);
    assert!(
        sim.stdout().contains("max_concurrency 2"),
        "{}",
        sim.stdout()
    );
    run(async {
        let mut http = Http::connect_addr(addr).await;
        let body = http
            .request("GET", "/api/v10/gateway/bot", true, None)
            .await
            .json();
        assert_eq!(body["shards"], 4);
        assert_eq!(body["session_start_limit"]["max_concurrency"], 2);

        let (_first, answer) = identify_shard(addr, [0, 4]).await;
        assert!(is_ready(&answer), "{answer}");
        // Shard 1 is bucket 1: not held up by shard 0.
        let (_other, answer) = identify_shard(addr, [1, 4]).await;
        assert!(is_ready(&answer), "{answer}");
        // Shard 2 is bucket 0 again, within 5 s: op 9, as Discord answers.
        let (_second, answer) = identify_shard(addr, [2, 4]).await;
        assert!(is_invalid_session(&answer), "{answer}");
    });
}

#[test]
fn the_sim_command_can_leave_pacing_off() {
    let (_sim, addr) = spawn_sim(&["--identify-pacing", "off"]);
    run(async {
        for _ in 0..2 {
            let (_client, answer) = identify_shard(addr, [0, 1]).await;
            assert!(is_ready(&answer), "{answer}");
        }
    });
}

#[test]
fn the_sim_command_refuses_bad_pacing_flags() {
    for (args, said) in [
        (
            &["sim", "--max-concurrency", "0"][..],
            "--max-concurrency must be 1 to 1024",
        ),
        (&["sim", "--shards", "0"][..], "--shards must be 1 to 4096"),
        (
            &["sim", "--identify-pacing", "maybe"][..],
            "--identify-pacing takes on or off",
        ),
    ] {
        let mut sim = Smolcord::spawn(args, [("RUST_LOG", "info")]);
        let code = sim.wait(Duration::from_secs(30)).code();
        assert!(matches!(code, Some(1 | 2)), "{args:?}: {code:?}");
        assert!(sim.stderr().contains(said), "{args:?}: {}", sim.stderr());
    }
}

#[test]
fn the_control_api_and_the_handle_change_pacing_while_running() {
    run(async {
        let sim = sim();
        let addr = sim.local_addr();
        // SimConfig::default() does not pace: tests re-identify quickly.
        for _ in 0..2 {
            let (_client, answer) = identify_shard(addr, [0, 1]).await;
            assert!(is_ready(&answer), "{answer}");
        }
        let mut http = Http::connect(&sim).await;
        let set = http
            .request(
                "POST",
                "/control/identify",
                false,
                Some(&json!({"enforce": true, "max_concurrency": 4, "shards": 8})),
            )
            .await;
        assert_eq!(set.status, 200, "{:?}", String::from_utf8_lossy(&set.body));
        assert_eq!(
            set.json(),
            json!({"enforce": true, "max_concurrency": 4, "shards": 8})
        );
        let body = http
            .request("GET", "/api/v10/gateway/bot", true, None)
            .await
            .json();
        assert_eq!(
            (
                body["shards"].as_u64(),
                body["session_start_limit"]["max_concurrency"].as_u64()
            ),
            (Some(8), Some(4))
        );
        let (_a, answer) = identify_shard(addr, [0, 8]).await;
        assert!(is_ready(&answer), "{answer}");
        let (_b, answer) = identify_shard(addr, [4, 8]).await;
        assert!(is_invalid_session(&answer), "bucket 0 again: {answer}");
        let (_c, answer) = identify_shard(addr, [3, 8]).await;
        assert!(is_ready(&answer), "bucket 3: {answer}");

        let bad = http
            .request(
                "POST",
                "/control/identify",
                false,
                Some(&json!({"max_concurrency": 0})),
            )
            .await;
        assert_eq!(bad.status, 400);
        assert!(bad.json()["error"]
            .as_str()
            .unwrap()
            .contains("max_concurrency"));

        sim.set_identify_pacing(IdentifyPacing {
            enforce: false,
            ..sim.identify_pacing()
        })
        .unwrap();
        let (_d, answer) = identify_shard(addr, [4, 8]).await;
        assert!(is_ready(&answer), "pacing off again: {answer}");
        let now = http
            .request("GET", "/control/identify", false, None)
            .await
            .json();
        assert_eq!(now["enforce"], false);
    })
}
