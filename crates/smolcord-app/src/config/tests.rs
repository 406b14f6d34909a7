use std::collections::HashMap;
use std::path::Path;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(
        text,
        Path::new("/etc/smolcord.json"),
        &env_of(&[("SMOLCORD_STATE_DIR", "/s")]),
    )
}

#[test]
fn type_error_names_the_key_even_on_one_line() {
    let err = parse(r#"{"tofu": true, "intents": "lots", "compress": false}"#).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("config /etc/smolcord.json: key `intents`:"),
        "{text}"
    );
    assert!(text.contains("expected u64"), "{text}");
    assert!(text.contains("line 1 col"), "{text}");
}

#[test]
fn nested_error_names_the_outer_key() {
    let err = parse("{\n  \"shard\": [0, \"x\"],\n  \"tofu\": true\n}").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("key `shard`"), "{text}");
    assert!(text.contains("line 2"), "{text}");
}

#[test]
fn bad_snowflake_is_refused() {
    let err = parse(r#"{"owner_id": "12ab"}"#).unwrap_err();
    assert!(err.to_string().contains("key `owner_id`"), "{err}");
    let err = parse(r#"{"allowed_user_ids": [1, -2]}"#).unwrap_err();
    assert!(err.to_string().contains("key `allowed_user_ids`"), "{err}");
}

#[test]
fn duplicate_key_is_named() {
    let err = parse(r#"{"tofu": true, "tofu": false}"#).unwrap_err();
    assert!(err.to_string().contains("key `tofu`"), "{err}");
}

#[test]
fn syntax_error_and_non_object_are_explained() {
    let err = parse("{\"tofu\": tru").unwrap_err();
    assert!(err.to_string().contains("invalid JSON"), "{err}");
    let err = parse("[1, 2]").unwrap_err();
    assert!(err.to_string().contains("expected a JSON object"), "{err}");
}

#[test]
fn zero_values_and_empty_argv_are_refused() {
    for (text, key) in [
        (r#"{"results_poll_ms": 0}"#, "results_poll_ms"),
        (r#"{"agent_concurrency": 0}"#, "agent_concurrency"),
        (r#"{"max_result_bytes": 0}"#, "max_result_bytes"),
        (r#"{"max_result_bytes": 10485761}"#, "max_result_bytes"),
        (r#"{"agent_cmd": []}"#, "agent_cmd"),
        (r#"{"transcribe_cmd": [""]}"#, "transcribe_cmd"),
        (r#"{"gateway_url": "http://x"}"#, "gateway_url"),
        (r#"{"api_base": "ftp://x"}"#, "api_base"),
        (r#"{"gateway_url": "wss://exa mple.com"}"#, "gateway_url"),
        (r#"{"gateway_url": "wss://"}"#, "gateway_url"),
        (r#"{"gateway_url": "wss://:443/"}"#, "gateway_url"),
        (r#"{"gateway_url": "ws://127.0.0.1:99999"}"#, "gateway_url"),
        (r#"{"gateway_url": "ws://127.0.0.1:"}"#, "gateway_url"),
        (r#"{"gateway_url": "ws://h:x1"}"#, "gateway_url"),
        (r#"{"gateway_url": "ws://h\tx"}"#, "gateway_url"),
        (r#"{"api_base": "https://discord .com/api"}"#, "api_base"),
        (r#"{"api_base": "http://h:0/api"}"#, "api_base"),
        (r#"{"api_base": "https:///api"}"#, "api_base"),
        (
            r#"{"identify_queue_url": "http://q:70000/"}"#,
            "identify_queue_url",
        ),
        (
            r#"{"identify_queue_url": "http://[::1/"}"#,
            "identify_queue_url",
        ),
    ] {
        let err = parse(text).unwrap_err();
        assert!(
            err.to_string().contains(&format!("key `{key}`")),
            "{text}: {err}"
        );
    }
}

#[test]
fn urls_with_a_host_and_a_port_are_taken() {
    for url in [
        "wss://gateway.discord.gg",
        "wss://gateway.discord.gg/?v=10",
        "ws://127.0.0.1:8080/x",
        "ws://[::1]:8080",
        "ws://[::1]",
        "ws://user:pw@my-host_1.local:1",
    ] {
        let text = serde_json::json!({ "gateway_url": url }).to_string();
        parse(&text).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
    parse(r#"{"api_base": "http://127.0.0.1:2/api/v10"}"#).unwrap();
}

#[test]
fn relative_token_file_is_relative_to_the_config_file() {
    let config = parse(r#"{"token_file": "secret/token"}"#).unwrap();
    assert_eq!(
        config.token_file.as_deref(),
        Some(Path::new("/etc/secret/token"))
    );
}

#[test]
fn extra_ca_file_is_relative_to_the_config_file_and_the_variable_wins() {
    let config = parse(r#"{"extra_ca_file": "proxy-ca.pem"}"#).unwrap();
    assert_eq!(
        config.extra_ca_file.as_deref(),
        Some(Path::new("/etc/proxy-ca.pem"))
    );
    let env = env_of(&[
        ("SMOLCORD_STATE_DIR", "/s"),
        ("SMOLCORD_CA_FILE", "/ca.pem"),
    ]);
    let config = Config::parse(
        r#"{"extra_ca_file": "proxy-ca.pem"}"#,
        Path::new("/etc/smolcord.json"),
        &env,
    )
    .unwrap();
    assert_eq!(config.extra_ca_file.as_deref(), Some(Path::new("/ca.pem")));
}

#[test]
fn a_token_file_others_or_the_group_can_read_gets_a_warning() {
    let path = Path::new("/etc/smolcord/token");
    assert_eq!(shared_token_warning(path, 0o100600), None);
    assert_eq!(shared_token_warning(path, 0o100400), None);
    assert_eq!(
        shared_token_warning(path, 0o100644).as_deref(),
        Some("token_file /etc/smolcord/token: readable by others (mode 644); `chmod 600` it")
    );
    assert_eq!(
        shared_token_warning(path, 0o100640).as_deref(),
        Some("token_file /etc/smolcord/token: readable by its group (mode 640); `chmod 600` it")
    );
}

#[test]
fn with_state_dir_has_defaults() {
    let config = Config::with_state_dir("/tmp/x");
    assert_eq!(config.state_dir, Path::new("/tmp/x"));
    assert_eq!(config.api_base, DEFAULT_API_BASE);
    assert_eq!(config.journal_capacity, 32);
}

#[test]
fn every_listed_key_is_a_config_key() {
    let values = [
        "\"ws://x\"",
        "\"http://x\"",
        "\"/x\"",
        "1",
        "[0, 1]",
        // `compress`: false, so the minimal build (no zlib, no zstd) parses it too.
        "false",
        "\"1\"",
        "[]",
        "true",
        "[\"a\"]",
        "1",
        "[\"a\"]",
        "1",
        "[\"a\"]",
        "1",
        "1",
        "1",
        "1",
        "1",
        "\"t\"",
        "1",
        "1",
        "1",
        "65536",
        "[0, 0, 1]",
        "\"http://queue:8000/\"",
        "\"ca.pem\"",
        "[{\"id\": \"5\", \"mention\": false}]",
        "{\"taken\": \"👀\"}",
        "true",
    ];
    assert_eq!(values.len(), parse::KEYS.len());
    // `shard` and `shards` exclude each other: one body each.
    for without in ["shard", "shards"] {
        let body: Vec<String> = parse::KEYS
            .iter()
            .zip(values)
            .filter(|(key, _)| **key != without)
            .map(|(key, value)| format!("\"{key}\": {value}"))
            .collect();
        parse(&format!("{{{}}}", body.join(", "))).unwrap();
    }
}

#[test]
fn shards_come_from_the_file_or_the_environment() {
    use smolcord::shard::ShardRange;
    assert_eq!(
        parse(r#"{"shard": [2, 4]}"#).unwrap().shard_range(),
        ShardRange::new(2, 2, 4).unwrap()
    );
    assert_eq!(
        parse(r#"{"shards": "auto"}"#).unwrap().shard_range(),
        ShardRange::Auto
    );
    let err = parse(r#"{"shards": [0, 9, 8]}"#).unwrap_err().to_string();
    assert!(
        err.contains("key `shards`") && err.contains("does not exist"),
        "{err}"
    );
    let err = parse(r#"{"shard": [0, 1], "shards": "auto"}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("both set"), "{err}");
    let env = env_of(&[("SMOLCORD_STATE_DIR", "/s"), ("SMOLCORD_SHARDS", "0-7/16")]);
    let config = Config::parse(r#"{"shard": [1, 2]}"#, Path::new("/etc/c.json"), &env).unwrap();
    assert_eq!(config.shard_range(), ShardRange::new(0, 7, 16).unwrap());
    let env = env_of(&[("SMOLCORD_STATE_DIR", "/s"), ("SMOLCORD_SHARDS", "8-7/16")]);
    let err = Config::parse("{}", Path::new("/etc/c.json"), &env).unwrap_err();
    assert!(err.to_string().contains("SMOLCORD_SHARDS"), "{err}");
}

#[test]
fn shard_counts_are_bounded_wherever_they_come_from() {
    // The hostile run's figures: shards 0-4294967294 of 4294967295 (an
    // abort allocating 480 GiB), a million shards (1.5 GiB).
    for (body, key, why) in [
        (
            r#"{"shards": [0, 4294967294, 4294967295]}"#,
            "key `shards`",
            "4294967295 is more than 65536",
        ),
        (
            r#"{"shards": [0, 999999, 1000000]}"#,
            "key `shards`",
            "1000000 is more than 65536",
        ),
        (
            r#"{"shards": [0, 1024, 2048]}"#,
            "key `shards`",
            "1025 shards for one process, which runs at most 1024",
        ),
        (
            r#"{"shard": [0, 4294967295]}"#,
            "key `shard`",
            "4294967295 is more than 65536",
        ),
    ] {
        let err = parse(body).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains(why), "{body}: {err}");
    }
    for (value, why) in [
        ("0-4294967294/4294967295", "4294967295 is more than 65536"),
        ("0-1999/2000", "2000 shards for one process"),
    ] {
        let env = env_of(&[("SMOLCORD_STATE_DIR", "/s"), ("SMOLCORD_SHARDS", value)]);
        let err = Config::parse("{}", Path::new("/etc/c.json"), &env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("SMOLCORD_SHARDS") && err.contains(why),
            "{value}: {err}"
        );
    }
    // The largest figures still accepted.
    parse(r#"{"shards": [64512, 65535, 65536]}"#).unwrap();
}

#[test]
fn typo_gets_a_suggestion() {
    let err = parse(r#"{"alowed_user_ids": []}"#).unwrap_err();
    assert!(
        err.to_string()
            .contains("(did you mean `allowed_user_ids`?)"),
        "{err}"
    );
    let err = parse(r#"{"zzzzzzzzzz": 1}"#).unwrap_err();
    assert!(
        err.to_string().contains("the keys are: gateway_url,"),
        "{err}"
    );
}

#[test]
fn a_compression_this_build_lacks_is_refused_naming_the_key() {
    for (value, has_it, feature) in [
        (r#""zstd""#, cfg!(feature = "zstd"), "zstd"),
        ("true", cfg!(feature = "zlib"), "zlib"),
    ] {
        let result = parse(&format!(r#"{{"compress": {value}}}"#));
        if has_it {
            assert!(result.is_ok(), "{value}: {:?}", result.err());
        } else {
            let text = result.unwrap_err().to_string();
            assert!(text.contains("`compress`"), "{value}: {text}");
            assert!(
                text.contains(&format!("feature `{feature}`")),
                "{value}: {text}"
            );
        }
    }
}

#[test]
fn a_channel_entry_with_an_unknown_field_names_the_section() {
    let err = parse(r#"{"channels": [{"id": "5", "mentoin": false}]}"#).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("key `channels`"), "{text}");
    assert!(text.contains("unknown field `mentoin`"), "{text}");
    let err = parse(r#"{"channels": [{"id": "5"}, {"id": 5}]}"#).unwrap_err();
    assert!(err.to_string().contains("listed twice"), "{err}");
}

#[test]
fn channels_add_the_intents_they_need() {
    let config = parse(r#"{"channels": [{"id": "5"}]}"#).unwrap();
    assert_eq!(config.gateway_intents().bits(), (1 << 12) | (1 << 9));
    let config = parse(r#"{"channels": [{"id": "5", "mention": false}]}"#).unwrap();
    assert_eq!(
        config.gateway_intents().bits(),
        (1 << 12) | (1 << 9) | (1 << 15)
    );
}
