//! The simulator's token is shaped like Discord's: its first part is the
//! base64 of the bot's user id, the id READY and `GET /users/@me` give; a
//! configured token (`SimConfig::with_token`, `smolcord sim --token T`)
//! replaces it and brings its own bot id.

use crate::support;

use base64::Engine;
use serde_json::json;
use smolcord::protocol::Snowflake;
use smolcord::token::Token;
use smolcord_sim::{bot_id_of_token, sim_token_for, SimConfig, DEFAULT_SIM_TOKEN};
use std::net::SocketAddr;
use std::time::Duration;
use support::binary::Smolcord;
use support::sim_client::*;

const DMS: u64 = 1 << 12;

/// What a library that reads the bot id from the token (discord.js and
/// others) computes: base64 of the first part, as text.
fn id_in_token(token: &str) -> String {
    let first = token.split('.').next().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(first)
        .unwrap_or_else(|e| panic!("the token's first part is not base64: {e}"));
    String::from_utf8(bytes).expect("UTF-8")
}

#[test]
fn the_default_token_names_the_bot_ready_announces() {
    run(async {
        assert_eq!(
            DEFAULT_SIM_TOKEN.split('.').count(),
            3,
            "{DEFAULT_SIM_TOKEN}"
        );
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        let ready = client.identify_ready(DMS).await;
        let id = ready["d"]["user"]["id"].as_str().unwrap().to_owned();
        assert_eq!(id_in_token(DEFAULT_SIM_TOKEN), id);
        let me = http(&sim, "GET", "/api/v10/users/@me", true, None).await;
        assert_eq!(me.json()["id"], id);
        assert_eq!(
            bot_id_of_token(DEFAULT_SIM_TOKEN),
            Some(sim.config().bot_id)
        );
    })
}

#[test]
fn a_configured_token_replaces_the_default_and_brings_its_bot_id() {
    run(async {
        let token = sim_token_for(Snowflake::new(424_242_424_242_424_242));
        let sim = sim_with(SimConfig::default().with_token(Token::new(&token).unwrap()));
        assert_eq!(id_in_token(&token), "424242424242424242");

        let (mut old, _) = Client::hello(&sim).await;
        old.identify(DMS).await;
        assert_eq!(
            old.expect_close().await,
            Some(4004),
            "the default is refused"
        );

        let (mut client, _) = Client::hello(&sim).await;
        client
            .identify_with(json!({"token": token, "intents": DMS}))
            .await;
        let ready = client.expect_dispatch().await;
        assert_eq!(ready["t"], "READY");
        assert_eq!(ready["d"]["user"]["id"], "424242424242424242");

        let mut conn = Http::connect(&sim).await;
        let me = conn
            .request_as(Some(&token), "GET", "/api/v10/users/@me", None)
            .await;
        assert_eq!(me.json()["id"], "424242424242424242");
        let refused = conn
            .request_as(Some(DEFAULT_SIM_TOKEN), "GET", "/api/v10/users/@me", None)
            .await;
        assert_eq!(refused.status, 401);
    })
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `smolcord sim --token T` accepts T (and only T), prints it, and its
/// READY's bot id is the one T's first part names.
#[test]
fn the_sim_command_takes_a_token() {
    let token = sim_token_for(Snowflake::new(777_000_000_000_000_777));
    let addr = free_addr();
    let listen = addr.to_string();
    let sim = Smolcord::spawn(
        &["sim", "--listen", &listen, "--token", &token],
        [("RUST_LOG", "info")],
    );
    let bound = Duration::from_secs(30);
    support::wait::poll_until(bound, || sim.stdout().contains("  control ").then_some(()))
        .unwrap_or_else(|| panic!("`smolcord sim` printed no URLs: {}", sim.stdout()));
    assert!(
        sim.stdout().contains(&format!("  token    {token}\n")),
        "{}",
        sim.stdout()
    );
    run(async {
        let mut client = Client::connect_addr(addr, "/?v=10&encoding=json").await;
        client.expect_hello().await;
        client
            .identify_with(json!({"token": token, "intents": DMS}))
            .await;
        let ready = client.expect_dispatch().await;
        assert_eq!(ready["d"]["user"]["id"], "777000000000000777");
        let mut conn = Http::connect_addr(addr).await;
        let refused = conn
            .request_as(Some(DEFAULT_SIM_TOKEN), "GET", "/api/v10/users/@me", None)
            .await;
        assert_eq!(refused.status, 401);
    });
}

#[test]
fn the_sim_command_refuses_a_blank_token() {
    let mut sim = Smolcord::spawn(&["sim", "--token", " "], [("RUST_LOG", "info")]);
    assert_eq!(sim.wait(Duration::from_secs(30)).code(), Some(2));
    assert!(
        sim.stderr().contains("--token must not be blank"),
        "{}",
        sim.stderr()
    );
}
