//! Application commands as Discord serves them: the bulk overwrite is
//! checked and kept; a user's use of a command reaches the bot as
//! INTERACTION_CREATE; the answer is taken once, within its deadline,
//! authorised by the interaction's token (not the bot's), ephemeral by
//! flag 64; a deferred answer is edited through the webhook route until
//! the token expires; a guild's commands are overwritten and listed on
//! their own route; the REST log keeps no interaction token.

use crate::support;

use serde_json::{json, Value};
use smolcord_sim::{SimConfig, SimError, SimGuild, Simulator, REDACTED_TOKEN};
use std::time::Duration;
use support::sim_client::*;

fn commands_path(sim: &Simulator) -> String {
    format!("/api/v10/applications/{}/commands", sim.config().bot_id)
}

async fn register(sim: &Simulator, http: &mut Http) {
    let body = json!([
        {"name": "approve", "description": "Approve a pairing code", "contexts": [1],
         "options": [{"type": 3, "name": "code", "description": "The code", "required": true,
                      "max_length": 32}]},
        {"name": "status", "description": "Status", "contexts": [1]},
    ]);
    let reply = http
        .request("PUT", &commands_path(sim), true, Some(&body))
        .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
}

/// Connects a bot session and returns it with the next INTERACTION_CREATE
/// after `used`.
async fn session(sim: &Simulator) -> Client {
    let (mut client, _) = Client::hello(sim).await;
    client.identify_ready(1 << 12).await;
    client
}

async fn interaction(client: &mut Client) -> Value {
    loop {
        let frame = client.expect_dispatch().await;
        if frame["t"] == "INTERACTION_CREATE" {
            return frame["d"].clone();
        }
    }
}

fn callback_path(d: &Value) -> String {
    format!(
        "/api/v10/interactions/{}/{}/callback",
        d["id"].as_str().unwrap(),
        d["token"].as_str().unwrap()
    )
}

fn original_path(d: &Value) -> String {
    format!(
        "/api/v10/webhooks/{}/{}/messages/@original",
        d["application_id"].as_str().unwrap(),
        d["token"].as_str().unwrap()
    )
}

#[test]
fn registration_is_a_checked_bulk_overwrite() {
    run(async {
        let sim = sim();
        let mut http = Http::connect(&sim).await;
        // Only registered commands can be used.
        assert!(matches!(
            sim.use_command(7, "u", "status", &[]),
            Err(SimError::UnknownCommand(_))
        ));
        register(&sim, &mut http).await;
        register(&sim, &mut http).await;
        let (commands, overwrites) = sim.registered_commands();
        assert_eq!(overwrites, 2);
        let names: Vec<_> = commands.iter().map(|c| c["name"].clone()).collect();
        assert_eq!(names, [json!("approve"), json!("status")]);
        // Without the bot token: 401; for another application: 403.
        let unauthorized = http
            .request("PUT", &commands_path(&sim), false, Some(&json!([])))
            .await;
        assert_eq!(unauthorized.status, 401);
        let other = http
            .request(
                "PUT",
                "/api/v10/applications/5/commands",
                true,
                Some(&json!([])),
            )
            .await;
        assert_eq!(other.json()["code"], 50001);
        // A name Discord refuses: 400 50035 naming it; the list stays.
        let bad = http
            .request(
                "PUT",
                &commands_path(&sim),
                true,
                Some(&json!([{"name": "Approve", "description": "x"}])),
            )
            .await;
        assert_eq!(bad.status, 400);
        assert!(bad.json()["errors"]["0.name"].is_object(), "{}", bad.json());
        assert_eq!(sim.registered_commands().0.len(), 2);
        // An option the command does not declare is refused.
        assert!(sim.use_command(7, "u", "status", &[("x", "1")]).is_err());
        sim.shutdown();
    });
}

#[test]
fn an_interaction_is_answered_once_by_its_token_and_ephemeral_by_flag_64() {
    run(async {
        let sim = sim();
        let mut http = Http::connect(&sim).await;
        register(&sim, &mut http).await;
        let mut bot = session(&sim).await;
        let used = sim
            .use_command(7, "owner", "approve", &[("code", "ABCD2345")])
            .unwrap();
        let d = interaction(&mut bot).await;
        assert_eq!(d["type"], 2);
        assert_eq!(d["id"], used.interaction_id.to_string());
        assert_eq!(d["channel_id"], used.channel_id.to_string());
        assert_eq!(d["user"]["id"], "7");
        assert_eq!(d["data"]["name"], "approve");
        assert_eq!(d["data"]["options"][0]["value"], "ABCD2345");
        assert!(sim.interaction_answer(used.interaction_id).is_none());

        // A wrong token is an unknown interaction.
        let wrong = format!(
            "/api/v10/interactions/{}/nope/callback",
            used.interaction_id
        );
        let body = json!({"type": 4, "data": {"content": "done", "flags": 64}});
        let refused = http.request("POST", &wrong, false, Some(&body)).await;
        assert_eq!(refused.json()["code"], 10062);
        // No bot token needed.
        let ok = http
            .request("POST", &callback_path(&d), false, Some(&body))
            .await;
        assert_eq!(ok.status, 204, "{}", String::from_utf8_lossy(&ok.body));
        let again = http
            .request("POST", &callback_path(&d), false, Some(&body))
            .await;
        assert_eq!(again.status, 400);
        assert_eq!(again.json()["code"], 40060);
        let answer = sim.interaction_answer(used.interaction_id).unwrap();
        assert!(answer.ephemeral && !answer.deferred);
        assert_eq!(answer.content.as_deref(), Some("done"));
        assert_eq!(answer.refused_callbacks, 1);
        sim.shutdown();
    });
}

#[test]
fn a_guilds_commands_are_a_bulk_overwrite_of_their_own_and_listed() {
    run(async {
        let guild = SimGuild::example();
        let sim = sim_with(SimConfig {
            guilds: vec![guild.clone()],
            ..SimConfig::default()
        });
        let bot = sim.config().bot_id;
        let path =
            |app: u64, guild: u64| format!("/api/v10/applications/{app}/guilds/{guild}/commands");
        let here = path(bot.get(), guild.id.get());
        let mut http = Http::connect(&sim).await;
        // Nothing registered yet: an empty list.
        let empty = http.request("GET", &here, true, None).await;
        assert_eq!(empty.status, 200);
        assert_eq!(empty.json(), json!([]));
        let body = json!([{"name": "deploy", "description": "Deploy"}]);
        let set = http.request("PUT", &here, true, Some(&body)).await;
        assert_eq!(set.status, 200, "{}", String::from_utf8_lossy(&set.body));
        let first = set.json();
        assert_eq!(first[0]["guild_id"], guild.id.to_string());
        assert_eq!(first[0]["application_id"], bot.to_string());
        // Listed as registered; the same again keeps its id and version.
        let listed = http.request("GET", &here, true, None).await;
        assert_eq!(listed.json(), first);
        let again = http.request("PUT", &here, true, Some(&body)).await;
        assert_eq!(again.json()[0]["id"], first[0]["id"]);
        assert_eq!(again.json()[0]["version"], first[0]["version"]);
        // The global commands are another list.
        assert!(sim.registered_commands().0.is_empty());
        // Checked as the global overwrite; refused, the list stays.
        let bad = json!([{"name": "Deploy", "description": "x"}]);
        let refused = http.request("PUT", &here, true, Some(&bad)).await;
        assert_eq!(refused.status, 400);
        assert!(refused.json()["errors"]["0.name"].is_object());
        let listed = http.request("GET", &here, true, None).await;
        assert_eq!(listed.json(), first);
        // Another application: 403 50001; a guild the bot is not in: 404
        // 10004; without the bot token: 401.
        let other = http
            .request("GET", &path(5, guild.id.get()), true, None)
            .await;
        assert_eq!(
            (other.status, other.json()["code"].clone()),
            (403, json!(50001))
        );
        let stranger = http
            .request("PUT", &path(bot.get(), 99), true, Some(&body))
            .await;
        assert_eq!(
            (stranger.status, stranger.json()["code"].clone()),
            (404, json!(10004))
        );
        let unauthorized = http.request("GET", &here, false, None).await;
        assert_eq!(unauthorized.status, 401);
        // Other methods on the path are not allowed.
        let delete = http.request("DELETE", &here, true, None).await;
        assert_eq!(delete.status, 405);
        sim.shutdown();
    });
}

#[test]
fn the_rest_log_keeps_no_interaction_token() {
    run(async {
        let sim = sim();
        let mut http = Http::connect(&sim).await;
        register(&sim, &mut http).await;
        let mut bot = session(&sim).await;
        sim.use_command(7, "owner", "status", &[]).unwrap();
        let d = interaction(&mut bot).await;
        let token = d["token"].as_str().unwrap().to_owned();
        let deferred = json!({"type": 5, "data": {"flags": 64}});
        let reply = http
            .request("POST", &callback_path(&d), false, Some(&deferred))
            .await;
        assert_eq!(reply.status, 204);
        let edit = json!({"content": "all well"});
        let reply = http
            .request("PATCH", &original_path(&d), false, Some(&edit))
            .await;
        assert_eq!(reply.status, 200);
        let paths: Vec<String> = sim.rest_requests().into_iter().map(|r| r.path).collect();
        let id = d["id"].as_str().unwrap();
        let app = d["application_id"].as_str().unwrap();
        assert!(
            paths.contains(&format!(
                "/api/v10/interactions/{id}/{REDACTED_TOKEN}/callback"
            )),
            "{paths:?}"
        );
        assert!(
            paths.contains(&format!(
                "/api/v10/webhooks/{app}/{REDACTED_TOKEN}/messages/@original"
            )),
            "{paths:?}"
        );
        // Nowhere in the log, nor in what the control API serves.
        assert!(paths.iter().all(|p| !p.contains(&token)), "{paths:?}");
        let served = http.request("GET", "/control/rest-log", false, None).await;
        assert_eq!(served.status, 200);
        let served = String::from_utf8_lossy(&served.body).into_owned();
        assert!(served.contains(REDACTED_TOKEN), "{served}");
        assert!(!served.contains(&token), "{served}");
        sim.shutdown();
    });
}

#[test]
fn a_deferred_answer_is_edited_until_the_token_expires() {
    run(async {
        let sim = sim();
        let mut http = Http::connect(&sim).await;
        register(&sim, &mut http).await;
        let mut bot = session(&sim).await;
        let used = sim.use_command(7, "owner", "status", &[]).unwrap();
        let d = interaction(&mut bot).await;
        // Nothing to edit before the first answer.
        let early = http
            .request(
                "PATCH",
                &original_path(&d),
                false,
                Some(&json!({"content": "x"})),
            )
            .await;
        assert_eq!(early.json()["code"], 10008);
        let deferred = json!({"type": 5, "data": {"flags": 64}});
        let reply = http
            .request("POST", &callback_path(&d), false, Some(&deferred))
            .await;
        assert_eq!(reply.status, 204);
        let thinking = sim.interaction_answer(used.interaction_id).unwrap();
        assert!(thinking.deferred && thinking.ephemeral && thinking.content.is_none());
        let edited = http
            .request(
                "PATCH",
                &original_path(&d),
                false,
                Some(&json!({"content": "all well"})),
            )
            .await;
        assert_eq!(edited.status, 200);
        assert_eq!(edited.json()["content"], "all well");
        let answer = sim.interaction_answer(used.interaction_id).unwrap();
        assert_eq!(answer.content.as_deref(), Some("all well"));
        assert_eq!(answer.edits, 1);
        // Past the token's life: 401 50027.
        sim.set_interaction_deadlines(Duration::from_secs(3), Duration::ZERO);
        let expired = http
            .request(
                "PATCH",
                &original_path(&d),
                false,
                Some(&json!({"content": "late"})),
            )
            .await;
        assert_eq!(expired.status, 401);
        assert_eq!(expired.json()["code"], 50027);
        sim.shutdown();
    });
}

#[test]
fn an_answer_after_the_deadline_is_an_unknown_interaction() {
    run(async {
        let sim = sim();
        let mut http = Http::connect(&sim).await;
        register(&sim, &mut http).await;
        sim.set_interaction_deadlines(Duration::from_millis(50), Duration::from_secs(900));
        let mut bot = session(&sim).await;
        let used = sim.use_command(7, "owner", "status", &[]).unwrap();
        let d = interaction(&mut bot).await;
        smol::Timer::after(Duration::from_millis(100)).await;
        let late = http
            .request(
                "POST",
                &callback_path(&d),
                false,
                Some(&json!({"type": 4, "data": {"content": "late", "flags": 64}})),
            )
            .await;
        assert_eq!(late.status, 404);
        assert_eq!(late.json()["code"], 10062);
        assert!(sim.interaction_answer(used.interaction_id).is_none());
        assert!(sim.interaction_answered_late(used.interaction_id));
        // The replay a resume would bring is the same interaction.
        sim.replay_interaction(used.interaction_id).unwrap();
        let replayed = interaction(&mut bot).await;
        assert_eq!(replayed["id"], d["id"]);
        sim.shutdown();
    });
}

#[test]
fn the_control_api_uses_a_command_and_reads_the_answer() {
    run(async {
        let sim = sim();
        let mut http = Http::connect(&sim).await;
        register(&sim, &mut http).await;
        let mut bot = session(&sim).await;
        let used = http
            .request(
                "POST",
                "/control/command",
                false,
                Some(&json!({"user_id": "7", "name": "approve", "options": {"code": "ABCD2345"}})),
            )
            .await
            .json();
        let d = interaction(&mut bot).await;
        assert_eq!(used["interaction_id"], d["id"]);
        let path = format!("/control/interaction?id={}", d["id"].as_str().unwrap());
        assert_eq!(
            http.request("GET", &path, false, None).await.json()["answered"],
            false
        );
        let body = json!({"type": 4, "data": {"content": "ok", "flags": 64}});
        http.request("POST", &callback_path(&d), false, Some(&body))
            .await;
        let read = http.request("GET", &path, false, None).await.json();
        assert_eq!(read["answered"], true);
        assert_eq!(read["ephemeral"], true);
        assert_eq!(read["content"], "ok");
        let unknown = http
            .request(
                "POST",
                "/control/command",
                false,
                Some(&json!({"user_id": "7", "name": "nope"})),
            )
            .await;
        assert_eq!(unknown.status, 400);
        assert!(unknown.json()["error"].as_str().unwrap().contains("/nope"));
        sim.shutdown();
    });
}
