//! Message uploads (`multipart/form-data`: `payload_json` + `files[0]`)
//! against the simulator, which checks them like Discord (20 MiB a file,
//! 25 MiB a request) and serves the files back; and the simulator's rate
//! limits, which the REST client must ride out.
#![allow(clippy::disallowed_methods)] // tests may block

use smolcord::rest::{MessageDraft, RestClient, RestError, Upload, MAX_FILE_BYTES};
use smolcord::token::Token;
use smolcord_sim::{RestRateLimit, SimConfig, Simulator, DEFAULT_SIM_TOKEN};
use std::time::{Duration, Instant};

const USER: u64 = 1_200_000_000_000_000_011;

fn client(sim: &Simulator) -> RestClient {
    RestClient::new(&sim.api_base(), Token::new(DEFAULT_SIM_TOKEN).unwrap())
}

fn run<T>(fut: impl std::future::Future<Output = T>) -> T {
    smol::block_on(futures_lite::future::or(fut, async {
        async_io::Timer::after(Duration::from_secs(30)).await;
        panic!("test did not finish within 30 s");
    }))
}

fn download(url: &str) -> Vec<u8> {
    ureq::get(url)
        .call()
        .unwrap()
        .body_mut()
        .with_config()
        .limit(32 << 20)
        .read_to_vec()
        .unwrap()
}

fn text_file(bytes: &[u8]) -> Upload<'_> {
    Upload::bytes("reply.txt", "text/plain; charset=utf-8", bytes)
}

#[test]
fn a_message_with_a_file_is_stored_and_served_like_discord() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let rest = client(&sim);
    let channel_id = sim.dm_channel_of(USER);
    let channel = channel_id;
    // Bytes that look like multipart framing must not confuse the body.
    let text = "line one\r\n--boundary?\r\n\r\nünïcødé\n".repeat(1000);
    run(async {
        let message = rest
            .create_message(
                channel,
                &MessageDraft::text("see the file").file(text_file(text.as_bytes())),
            )
            .await
            .unwrap();
        assert_eq!(message.content, "see the file");
        assert_eq!(message.attachments.len(), 1);
        let attachment = &message.attachments[0];
        assert_eq!(attachment.filename, "reply.txt");
        assert_eq!(attachment.size, text.len() as u64);
        assert_eq!(download(&attachment.url), text.as_bytes());

        // Editing adds a file to a message (a placeholder becoming a reply).
        let placeholder = rest
            .create_message(channel, &MessageDraft::text("working…"))
            .await
            .unwrap();
        let edited = rest
            .edit_message(
                channel,
                placeholder.id,
                &MessageDraft::text("done").file(text_file(b"the reply")),
            )
            .await
            .unwrap();
        assert_eq!(edited.content, "done");
        assert_eq!(download(&edited.attachments[0].url), b"the reply");
    });
    let uploads: Vec<_> = sim
        .rest_requests()
        .into_iter()
        .filter(|r| !r.files.is_empty())
        .collect();
    assert_eq!(uploads.len(), 2);
    assert_eq!(uploads[0].files, ["reply.txt"]);
    assert_eq!(uploads[0].body["content"], "see the file");
    assert_eq!(uploads[0].body["attachments"][0]["filename"], "reply.txt");
    assert_eq!(
        uploads[0].body["allowed_mentions"]["parse"],
        serde_json::json!([])
    );
    let stored = sim.messages_in(channel_id);
    assert_eq!(stored[1].content, "done");
    assert_eq!(stored[1].edits, 1);
}

#[test]
fn a_file_of_discords_documented_20_mib_goes_through_client_and_simulator() {
    // The library's limit is Discord's documented default, the one the
    // simulator enforces: a file at it is taken by both.
    assert_eq!(MAX_FILE_BYTES, smolcord_sim::DEFAULT_UPLOAD_LIMIT);
    assert_eq!(MAX_FILE_BYTES, 20 * 1024 * 1024);
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let rest = client(&sim);
    let channel = sim.dm_channel_of(USER);
    let big = vec![b'a'; MAX_FILE_BYTES];
    let sent = run(rest.create_message(channel, &MessageDraft::text("").file(text_file(&big))))
        .expect("a file at the limit is sent");
    assert_eq!(sent.attachments.len(), 1);
    assert_eq!(sent.attachments[0].size, MAX_FILE_BYTES as u64);
}

#[test]
fn files_over_discords_limit_are_refused_by_the_client_and_the_simulator() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let rest = client(&sim);
    let channel = sim.dm_channel_of(USER);
    let big = vec![b'a'; MAX_FILE_BYTES + 1];
    let err = run(rest.create_message(channel, &MessageDraft::text("").file(text_file(&big))))
        .unwrap_err();
    assert!(matches!(err, RestError::InvalidInput { .. }), "{err}");
    assert!(sim.rest_requests().is_empty(), "refused before sending");

    // Sent anyway (by another client), over Discord's documented 20 MiB a
    // file, the simulator answers like Discord.
    let big = vec![b'a'; smolcord_sim::DEFAULT_UPLOAD_LIMIT + 1];
    let boundary = "XyZ";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n{{}}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"a.txt\"\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&big);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let response = ureq::post(format!("{}/channels/{channel}/messages", sim.api_base()))
        .config()
        .http_status_as_error(false)
        .build()
        .header("Authorization", format!("Bot {DEFAULT_SIM_TOKEN}"))
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .send(&body[..])
        .unwrap();
    assert_eq!(response.status(), 413);
    let answer: serde_json::Value =
        serde_json::from_str(&response.into_body().read_to_string().unwrap()).unwrap();
    assert_eq!(answer["code"], 40005);
}

#[test]
fn the_simulator_enforces_rate_limits_and_the_client_rides_them_out() {
    let sim = Simulator::start(SimConfig {
        rest_rate_limit: Some(RestRateLimit {
            per_route: 2,
            window: Duration::from_millis(500),
            global_per_second: 100,
        }),
        ..SimConfig::default()
    })
    .unwrap();
    let channel_id = sim.dm_channel_of(USER);
    let channel = channel_id;
    // A client that ignores the headers gets 429 on the third message.
    let post = |n: u32| {
        ureq::post(format!("{}/channels/{channel}/messages", sim.api_base()))
            .config()
            .http_status_as_error(false)
            .build()
            .header("Authorization", format!("Bot {DEFAULT_SIM_TOKEN}"))
            .header("Content-Type", "application/json")
            .send(serde_json::json!({"content": format!("raw {n}")}).to_string())
            .unwrap()
    };
    assert_eq!(post(1).status(), 200);
    let second = post(2);
    assert_eq!(second.headers()["x-ratelimit-remaining"], "0");
    let third = post(3);
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));

    // Ours learns the bucket and waits: six messages, all sent.
    let rest = client(&sim);
    let started = Instant::now();
    run(async {
        for n in 0..6 {
            rest.create_message(channel, &MessageDraft::text(&format!("paced {n}")))
                .await
                .unwrap();
        }
    });
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "six at two per 500 ms take at least two more windows: {:?}",
        started.elapsed()
    );
    let paced = sim
        .messages_in(channel_id)
        .into_iter()
        .filter(|m| m.content.starts_with("paced"))
        .count();
    assert_eq!(paced, 6);
}

#[test]
fn files_on_disk_are_streamed_into_the_form_and_a_changed_one_fails_cleanly() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let rest = client(&sim);
    let channel = sim.dm_channel_of(USER);
    let dir = tempfile::tempdir().unwrap();
    let (chart, log) = (dir.path().join("chart.png"), dir.path().join("run.log"));
    let png: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&chart, &png).unwrap();
    std::fs::write(&log, b"step 1\nstep 2\n").unwrap();
    run(async {
        let draft = MessageDraft::text("two files from disk")
            .file(Upload::disk(
                "chart.png",
                "image/png",
                &chart,
                png.len() as u64,
            ))
            .file(Upload::disk("run.log", "text/plain", &log, 14))
            .file(text_file(b"and one from memory"));
        let message = rest.create_message(channel, &draft).await.unwrap();
        let names: Vec<&str> = message
            .attachments
            .iter()
            .map(|a| a.filename.as_str())
            .collect();
        assert_eq!(names, ["chart.png", "run.log", "reply.txt"]);
        assert_eq!(download(&message.attachments[0].url), png);
        assert_eq!(download(&message.attachments[1].url), b"step 1\nstep 2\n");
        assert_eq!(
            download(&message.attachments[2].url),
            b"and one from memory"
        );

        // Listed at one size, shorter when sent: the request fails (it
        // declared the listed length) instead of posting a cut file.
        std::fs::write(&log, b"step").unwrap();
        let shrunk = MessageDraft::text("x").file(Upload::disk("run.log", "text/plain", &log, 14));
        let err = rest.create_message(channel, &shrunk).await.unwrap_err();
        assert!(!matches!(err, RestError::Http { .. }), "{err:?}");
        // A link is not followed.
        let link = dir.path().join("link.png");
        std::os::unix::fs::symlink(&chart, &link).unwrap();
        let linked = MessageDraft::text("x").file(Upload::disk("l.png", "image/png", &link, 1));
        let err = rest.create_message(channel, &linked).await.unwrap_err();
        assert!(matches!(err, RestError::LocalIo { .. }), "{err:?}");
    });
    let posted = sim.messages_in(channel);
    assert_eq!(
        posted.len(),
        1,
        "only the whole form was posted: {posted:?}"
    );
}
