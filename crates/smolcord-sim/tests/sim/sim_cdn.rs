//! The CDN misbehaving on request (a redirect, a bandwidth), generated
//! attachments, and Discord's upload limits on a message's files.

use crate::support;

use serde_json::json;
use smolcord_sim::{generated_bytes, CdnFault, SimConfig, DEFAULT_UPLOAD_LIMIT};
use std::time::{Duration, Instant};
use support::sim_client::*;

/// The attachment URL's path and query, from a DM made by `/control/dm-file`.
async fn generated_dm(sim: &smolcord_sim::Simulator, size: u64) -> String {
    let body = json!({"author_id": 42, "author_name": "a", "filename": "big.bin", "size": size});
    let reply = http(sim, "POST", "/control/dm-file", false, Some(&body)).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let channel = reply.json()["channel_id"].as_str().unwrap().to_owned();
    let message = reply.json()["message_id"].as_str().unwrap().to_owned();
    let got = http(
        sim,
        "GET",
        &format!("/api/v10/channels/{channel}/messages/{message}"),
        true,
        None,
    )
    .await
    .json();
    let attachment = &got["attachments"][0];
    assert_eq!(attachment["size"], size);
    let url = attachment["url"].as_str().unwrap();
    url.strip_prefix(&format!("http://{}", sim.local_addr()))
        .unwrap()
        .to_owned()
}

#[test]
fn generated_attachments_redirects_and_a_slow_cdn() {
    run(async {
        let sim = sim();
        let path = generated_dm(&sim, 300_000).await;
        let reply = http(&sim, "GET", &path, false, None).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, generated_bytes(300_000));
        assert!(reply
            .body
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8));

        // A redirect, counted down, then the file again.
        let to = "http://192.0.2.1/elsewhere";
        let body = json!({"redirect_to": to, "count": 2});
        let set = http(&sim, "POST", "/control/cdn", false, Some(&body)).await;
        assert_eq!(set.json()["redirects_left"], 2);
        for _ in 0..2 {
            let reply = http(&sim, "GET", &path, false, None).await;
            assert_eq!(reply.status, 302);
            assert_eq!(reply.header("location"), Some(to));
        }
        assert_eq!(http(&sim, "GET", &path, false, None).await.status, 200);

        // 300 kB at 1 MB/s: about 0.3 s, never at once.
        sim.cdn_fault(CdnFault::Bandwidth {
            bytes_per_sec: Some(1_000_000),
        });
        let started = Instant::now();
        let reply = http(&sim, "GET", &path, false, None).await;
        let took = started.elapsed();
        assert_eq!(reply.body.len(), 300_000);
        assert!(took >= Duration::from_millis(250), "{took:?}");
        let off = json!({"bytes_per_sec": null});
        assert_eq!(
            http(&sim, "POST", "/control/cdn", false, Some(&off))
                .await
                .json()["bytes_per_sec"],
            json!(null)
        );

        for bad in [
            json!({}),
            json!({"redirect_to": 7}),
            json!({"bytes_per_sec": -1}),
        ] {
            let reply = http(&sim, "POST", "/control/cdn", false, Some(&bad)).await;
            assert_eq!(reply.status, 400, "{bad}");
        }
        let huge = json!({"author_id": 42, "size": 1u64 << 40});
        let reply = http(&sim, "POST", "/control/dm-file", false, Some(&huge)).await;
        assert_eq!(reply.status, 400);
        assert!(
            String::from_utf8_lossy(&reply.body).contains("at most"),
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    });
}

/// A multipart create with `files` of the given sizes, sent raw.
async fn upload(sim: &smolcord_sim::Simulator, channel: u64, sizes: &[usize]) -> Reply {
    let boundary = "XyZ";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n{{\"content\":\"x\"}}\r\n"
    )
    .into_bytes();
    for (n, size) in sizes.iter().enumerate() {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"files[{n}]\"; filename=\"f{n}.bin\"\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend(std::iter::repeat_n(b'a', *size));
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let mut conn = Http::connect(sim).await;
    let head = format!(
        "POST /api/v10/channels/{channel}/messages HTTP/1.1\r\nAuthorization: Bot {}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\r\n",
        smolcord_sim::DEFAULT_SIM_TOKEN,
        body.len()
    );
    conn.send_raw(head.as_bytes()).await;
    conn.send_raw(&body).await;
    conn.read_reply().await
}

#[test]
fn too_many_files_or_bytes_are_refused_as_discord_refuses_them() {
    run(async {
        let sim = sim_with(SimConfig {
            upload_limit: 1000,
            ..SimConfig::default()
        });
        let channel = sim.dm_channel_of(42).get();
        let reply = upload(&sim, channel, &[1000; 10]).await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        let reply = upload(&sim, channel, &[10; 11]).await;
        assert_eq!(reply.status, 400);
        assert_eq!(reply.json()["code"], 30015);
        let reply = upload(&sim, channel, &[10, 1001]).await;
        assert_eq!(reply.status, 413);
        assert_eq!(reply.json()["code"], 40005);
        assert_eq!(reply.json()["message"], "Request entity too large");
        // Nothing refused was kept.
        assert_eq!(sim.messages_in(sim.dm_channel_of(42)).len(), 1);
    });
    assert_eq!(SimConfig::default().upload_limit, DEFAULT_UPLOAD_LIMIT);
    assert_eq!(DEFAULT_UPLOAD_LIMIT, 20 * 1024 * 1024);
}
