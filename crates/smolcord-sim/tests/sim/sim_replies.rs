//! Message bodies the simulator refuses and replies it completes, as
//! Discord does: a reply carries the message it answers as
//! `referenced_message`; a reply to a message that does not exist is 400
//! 50035 unless `fail_if_not_exists: false`; an embed whose title is an
//! object, a flag that cannot be set, and other wrong field types are 400
//! 50035 naming the field.

use crate::support;

use serde_json::{json, Value};
use support::sim_client::*;

fn invalid_form_at(reply: &Reply, path: &[&str]) -> String {
    assert_eq!(
        reply.status,
        400,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    let json = reply.json();
    assert_eq!(json["code"], 50035, "{json}");
    let mut at = &json["errors"];
    for part in path {
        at = &at[*part];
    }
    at["_errors"][0]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error at {path:?}: {json}"))
        .to_owned()
}

#[test]
fn replies_carry_the_referenced_message() {
    run(async {
        let sim = sim();
        let guild = sim.config().guilds[0].id;
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        let mut conn = Http::connect(&sim).await;
        let first = conn
            .request("POST", &path, true, Some(&json!({"content": "first"})))
            .await
            .json();
        let id = first["id"].as_str().unwrap().to_owned();

        let reply = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "second", "message_reference": {"message_id": id}})),
            )
            .await;
        assert_eq!(reply.status, 200);
        let reply: Value = reply.json();
        assert_eq!(reply["type"], 19);
        assert_eq!(reply["referenced_message"]["id"], id.as_str());
        assert_eq!(reply["referenced_message"]["content"], "first");
        assert_eq!(reply["message_reference"]["message_id"], id.as_str());
        assert_eq!(
            reply["message_reference"]["channel_id"],
            channel.to_string()
        );
        assert_eq!(reply["message_reference"]["guild_id"], guild.to_string());

        // Unknown: refused, nothing made.
        let before = sim.messages_in(channel).len();
        let unknown = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "x", "message_reference": {"message_id": "123"}})),
            )
            .await;
        assert_eq!(
            invalid_form_at(&unknown, &["message_reference"]),
            "MESSAGE_REFERENCE_UNKNOWN_MESSAGE"
        );
        assert_eq!(sim.messages_in(channel).len(), before);

        // Unless the client says it does not mind: sent without it.
        let lenient = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "y", "message_reference":
                              {"message_id": "123", "fail_if_not_exists": false}})),
            )
            .await;
        assert_eq!(lenient.status, 200);
        let lenient: Value = lenient.json();
        assert_eq!(lenient["type"], 0);
        assert!(lenient.get("message_reference").is_none(), "{lenient}");
        assert_eq!(sim.messages_in(channel).len(), before + 1);
    })
}

#[test]
fn bodies_of_the_wrong_shape_are_400_50035() {
    run(async {
        let sim = sim();
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        let mut conn = Http::connect(&sim).await;
        let title = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"embeds": [{"title": {"text": "no"}}]})),
            )
            .await;
        assert_eq!(
            invalid_form_at(&title, &["embeds", "0", "title"]),
            "STRING_TYPE_CONVERT"
        );
        let flags = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "x", "flags": 2})),
            )
            .await;
        assert_eq!(invalid_form_at(&flags, &["flags"]), "MESSAGE_FLAGS_INVALID");
        let silent = conn
            .request(
                "POST",
                &path,
                true,
                Some(&json!({"content": "x", "flags": 4096})),
            )
            .await;
        assert_eq!(silent.status, 200);
        let id = silent.json()["id"].as_str().unwrap().to_owned();
        assert_eq!(sim.messages_in(channel).len(), 1, "only the good one");

        let edit = conn
            .request(
                "PATCH",
                &format!("{path}/{id}"),
                true,
                Some(&json!({"embeds": [{"fields": [{"name": "n", "value": 5}]}]})),
            )
            .await;
        assert_eq!(
            invalid_form_at(&edit, &["embeds", "0", "fields", "0", "value"]),
            "STRING_TYPE_CONVERT"
        );
        assert_eq!(sim.messages_in(channel)[0].edits, 0);
    })
}
