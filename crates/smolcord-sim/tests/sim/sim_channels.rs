//! Guild channel messages as Discord sends them (issue 31): a mention of
//! the bot puts it in `mentions` (and `<@id>` in the text), a reply
//! carries `message_reference` and `referenced_message` and pings the
//! author it answers, and without MESSAGE_CONTENT a message's text is
//! withheld unless it mentions the bot — on the gateway and in the REST
//! history alike (the history gave it away before: found by a probe).

use crate::support;

use serde_json::{json, Value};
use smolcord::protocol::{Intents, Snowflake};
use smolcord_sim::{ChannelPost, SimConfig, SimGuild};
use support::sim_client::*;

const GUILD_MESSAGES: u64 = 1 << 9;
const CONTENT: u64 = 1 << 15;

fn general() -> Snowflake {
    SimGuild::example().channels[0].id
}

async fn next_message(client: &mut Client) -> Value {
    loop {
        let frame = client.expect_dispatch().await;
        if frame["t"] == "MESSAGE_CREATE" {
            return frame["d"].clone();
        }
    }
}

#[test]
fn without_the_intent_only_a_mention_carries_its_text() {
    run(async {
        let sim = sim();
        let bot = sim.config().bot_id.to_string();
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(GUILD_MESSAGES).await;
        let plain = sim
            .post_in_channel(&ChannelPost::new(general(), 42, "ann", "hello all"))
            .unwrap();
        let d = next_message(&mut client).await;
        assert_eq!(d["id"], plain.to_string());
        assert_eq!(d["content"], "", "no intent, no mention: withheld");
        assert_eq!(d["mentions"], json!([]));

        let mention = sim
            .post_in_channel(&ChannelPost::new(general(), 42, "ann", "what time?").mentioning())
            .unwrap();
        let d = next_message(&mut client).await;
        assert_eq!(d["content"], format!("<@{bot}> what time?"));
        assert_eq!(d["mentions"][0]["id"], bot);

        // A reply to the bot's mention, the ping left on: the bot is
        // mentioned; the message it answers is judged on its own.
        let reply = sim
            .post_in_channel(
                &ChannelPost::new(general(), 43, "bo", "same question").replying_to(mention),
            )
            .unwrap();
        let d = next_message(&mut client).await;
        assert_eq!(d["id"], reply.to_string());
        assert_eq!(d["type"], 19);
        assert_eq!(d["message_reference"]["message_id"], mention.to_string());
        assert_eq!(d["referenced_message"]["id"], mention.to_string());
        assert_eq!(
            d["referenced_message"]["content"],
            format!("<@{bot}> what time?")
        );
        assert_eq!(
            d["mentions"][0]["id"], "42",
            "a reply pings whom it answers"
        );
        assert_eq!(
            d["content"], "",
            "the reply itself does not mention the bot"
        );

        // The REST history withholds the same (the application has no
        // MESSAGE_CONTENT enabled).
        let mut conn = Http::connect(&sim).await;
        let page = conn
            .request(
                "GET",
                &format!("/api/v10/channels/{}/messages", general()),
                true,
                None,
            )
            .await;
        assert_eq!(page.status, 200);
        let by_id = |id: Snowflake| {
            page.json()
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["id"] == id.to_string())
                .cloned()
                .unwrap()
        };
        assert_eq!(by_id(plain)["content"], "", "history gives away no text");
        assert_eq!(by_id(mention)["content"], format!("<@{bot}> what time?"));
        assert_eq!(by_id(reply)["content"], "");
    });
}

#[test]
fn with_the_intent_every_message_carries_its_text() {
    run(async {
        let sim = sim_with(SimConfig {
            enabled_privileged_intents: Intents::MESSAGE_CONTENT,
            ..SimConfig::default()
        });
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(GUILD_MESSAGES | CONTENT).await;
        let plain = sim
            .post_in_channel(&ChannelPost::new(general(), 42, "ann", "hello all"))
            .unwrap();
        assert_eq!(next_message(&mut client).await["content"], "hello all");
        let mut conn = Http::connect(&sim).await;
        let one = conn
            .request(
                "GET",
                &format!("/api/v10/channels/{}/messages?limit=1", general()),
                true,
                None,
            )
            .await;
        assert_eq!(one.json()[0]["id"], plain.to_string());
        assert_eq!(one.json()[0]["content"], "hello all");
    });
}

#[test]
fn the_control_api_posts_mentions_and_replies_and_names_bad_ones() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        let first = conn
            .request(
                "POST",
                "/control/guild-message",
                false,
                Some(
                    &json!({"channel_id": general().to_string(), "author_id": 42,
                             "content": "hi", "mention_bot": true}),
                ),
            )
            .await;
        assert_eq!(first.status, 200, "{:?}", first.json());
        let first_id = first.json()["message_id"].as_str().unwrap().to_owned();
        let reply = conn
            .request(
                "POST",
                "/control/guild-message",
                false,
                Some(
                    &json!({"channel_id": general().to_string(), "author_id": 43,
                             "content": "and", "reply_to": first_id, "ping_replied": false}),
                ),
            )
            .await;
        assert_eq!(reply.status, 200, "{:?}", reply.json());
        let unknown = conn
            .request(
                "POST",
                "/control/guild-message",
                false,
                Some(
                    &json!({"channel_id": general().to_string(), "author_id": 43,
                             "content": "and", "reply_to": "5"}),
                ),
            )
            .await;
        assert_eq!(unknown.status, 400);
        assert!(unknown.json()["error"]
            .as_str()
            .unwrap()
            .contains("message 5"));
        let bad = conn
            .request(
                "POST",
                "/control/guild-message",
                false,
                Some(
                    &json!({"channel_id": general().to_string(), "author_id": 43,
                             "mention_bot": "yes"}),
                ),
            )
            .await;
        assert_eq!(bad.status, 400);
        assert!(bad.json()["error"]
            .as_str()
            .unwrap()
            .contains("mention_bot"));
    });
}

#[test]
fn without_send_messages_posting_and_typing_are_403_50013() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        let post = format!("/api/v10/channels/{}/messages", general());
        let typing = format!("/api/v10/channels/{}/typing", general());
        let denied = conn
            .request(
                "POST",
                "/control/channel-permission",
                false,
                Some(&json!({"channel_id": general().to_string(), "send_messages": false})),
            )
            .await;
        assert_eq!(denied.status, 200);
        let refused = conn
            .request("POST", &post, true, Some(&json!({"content": "hi"})))
            .await;
        assert_eq!(refused.status, 403);
        assert_eq!(refused.json()["code"], 50013);
        let typing_refused = conn.request("POST", &typing, true, None).await;
        assert_eq!(typing_refused.status, 403);
        sim.set_send_permission(general(), true).unwrap();
        let ok = conn
            .request("POST", &post, true, Some(&json!({"content": "hi"})))
            .await;
        assert_eq!(ok.status, 200);
        assert_eq!(
            sim.set_send_permission(Snowflake::new(5), false),
            Err(smolcord_sim::SimError::UnknownChannel(Snowflake::new(5)))
        );
    });
}

#[test]
fn without_read_message_history_the_history_is_empty_and_the_channel_names_its_last_message() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        let history = format!("/api/v10/channels/{}/messages?after=1", general());
        let channel = format!("/api/v10/channels/{}", general());
        let before = conn.request("GET", &channel, true, None).await;
        assert_eq!(before.status, 200);
        assert_eq!(before.json()["last_message_id"], Value::Null);
        let asked = sim
            .post_in_channel(&ChannelPost::new(general(), 42, "ann", "anyone?").mentioning())
            .unwrap();
        let read = conn.request("GET", &history, true, None).await;
        assert_eq!(read.json().as_array().map(Vec::len), Some(1));
        let denied = conn
            .request(
                "POST",
                "/control/channel-permission",
                false,
                Some(&json!({"channel_id": general().to_string(), "read_message_history": false})),
            )
            .await;
        assert_eq!(denied.status, 200);
        assert_eq!(denied.json(), json!({"read_message_history": false}));
        // Discord: "no messages will be returned", and no error.
        let withheld = conn.request("GET", &history, true, None).await;
        assert_eq!(withheld.status, 200);
        assert_eq!(withheld.json(), json!([]));
        let latest = format!("/api/v10/channels/{}/messages", general());
        assert_eq!(
            conn.request("GET", &latest, true, None).await.json(),
            json!([])
        );
        // The other routes are as they were: the channel, posting.
        let object = conn.request("GET", &channel, true, None).await;
        assert_eq!(object.status, 200);
        assert_eq!(object.json()["last_message_id"], asked.to_string());
        let post = format!("/api/v10/channels/{}/messages", general());
        let posted = conn
            .request("POST", &post, true, Some(&json!({"content": "hi"})))
            .await;
        assert_eq!(posted.status, 200);
        let after_post = conn.request("GET", &channel, true, None).await;
        assert_eq!(after_post.json()["last_message_id"], posted.json()["id"]);
        sim.set_history_permission(general(), true).unwrap();
        let read = conn.request("GET", &history, true, None).await;
        assert_eq!(read.json().as_array().map(Vec::len), Some(2));
        assert_eq!(
            sim.set_history_permission(Snowflake::new(5), false),
            Err(smolcord_sim::SimError::UnknownChannel(Snowflake::new(5)))
        );
    });
}

#[test]
fn a_thread_starts_once_from_a_message_and_takes_messages() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        let asked = sim
            .post_in_channel(&ChannelPost::new(general(), 42, "ann", "trip?").mentioning())
            .unwrap();
        let path = format!("/api/v10/channels/{}/messages/{asked}/threads", general());
        let started = conn
            .request("POST", &path, true, Some(&json!({"name": "trip?"})))
            .await;
        assert_eq!(started.status, 201, "{:?}", started.json());
        assert_eq!(started.json()["id"], asked.to_string());
        assert_eq!(started.json()["type"], 11);
        assert_eq!(started.json()["parent_id"], general().to_string());
        let again = conn
            .request("POST", &path, true, Some(&json!({"name": "trip?"})))
            .await;
        assert_eq!(again.status, 400);
        assert_eq!(again.json()["code"], 160004);
        let unnamed = conn
            .request(
                "POST",
                &format!("/api/v10/channels/{}/messages/5/threads", general()),
                true,
                Some(&json!({"name": "x"})),
            )
            .await;
        assert_eq!(unnamed.status, 404);
        assert_eq!(unnamed.json()["code"], 10008);
        // The thread is a channel: users and the bot post in it.
        sim.post_in_channel(&ChannelPost::new(asked, 42, "ann", "hotel?"))
            .unwrap();
        let reply = conn
            .request(
                "POST",
                &format!("/api/v10/channels/{asked}/messages"),
                true,
                Some(&json!({"content": "booked"})),
            )
            .await;
        assert_eq!(reply.status, 200);
        assert_eq!(sim.messages_in(asked).len(), 1);
    });
}

#[test]
fn the_bots_reaction_is_put_once_and_refused_where_it_may_not() {
    run(async {
        let sim = sim();
        let mut conn = Http::connect(&sim).await;
        let asked = sim
            .post_in_channel(&ChannelPost::new(general(), 42, "ann", "hi").mentioning())
            .unwrap();
        let path = |emoji: &str| {
            format!(
                "/api/v10/channels/{}/messages/{asked}/reactions/{emoji}/@me",
                general()
            )
        };
        let eyes = "%F0%9F%91%80";
        assert_eq!(
            conn.request("PUT", &path(eyes), true, None).await.status,
            204
        );
        assert_eq!(
            conn.request("PUT", &path(eyes), true, None).await.status,
            204
        );
        assert_eq!(sim.reactions_on(general(), asked), ["👀"]);
        let custom = conn.request("PUT", &path("party:1"), true, None).await;
        assert_eq!(
            (custom.status, custom.json()["code"].clone()),
            (400, json!(10014))
        );
        sim.set_send_permission(general(), false).unwrap();
        let denied = conn.request("PUT", &path("%E2%9C%85"), true, None).await;
        assert_eq!(
            (denied.status, denied.json()["code"].clone()),
            (403, json!(50013))
        );
        let unknown = conn
            .request(
                "PUT",
                &format!(
                    "/api/v10/channels/{}/messages/5/reactions/{eyes}/@me",
                    general()
                ),
                true,
                None,
            )
            .await;
        assert_eq!(unknown.status, 403, "the permission is checked first");
    });
}
