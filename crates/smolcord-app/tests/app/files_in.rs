//! Files in: a message's attachments downloaded into the task's own
//! directory before the agent runs, named in the task (`path`, the URL
//! kept), bounded per file, per message and on disk (left out with the
//! reason in the task, the user told once), and removed when the task is
//! done: after the reply for `agent_cmd`, after the result for the spool.
#![allow(clippy::disallowed_methods)] // tests may block (std::fs)

use crate::support;

use serde_json::Value;
use smolcord::protocol::Snowflake;
use smolcord_sim::SimFile;
use std::path::Path;
use std::time::Duration;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(15);

/// A PNG's first bytes and some more: binary, with NULs and high bytes.
fn png() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    bytes.extend((0..3000u32).map(|i| (i * 7 % 256) as u8));
    bytes
}

/// An agent that keeps its task and a copy of its input files in `save`,
/// then answers "got N".
fn saving_agent(save: &Path) -> Vec<String> {
    sh(&format!(
        "cat > '{0}/task.json'; n=0; if [ -n \"$SMOLCORD_INPUT_DIR\" ]; then for f in \"$SMOLCORD_INPUT_DIR\"/*; do cp \"$f\" '{0}/'; n=$((n+1)); done; fi; echo got $n",
        save.display()
    ))
}

fn task(save: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(save.join("task.json")).unwrap()).unwrap()
}

#[test]
fn an_image_and_a_text_file_reach_the_agent_on_disk_and_go_after_the_reply() {
    let rig = Rig::new();
    let save = tempfile::tempdir().unwrap();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(saving_agent(save.path()));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let files = vec![
            SimFile::new("chart.png", "image/png", png()),
            SimFile::new(
                "notes.txt",
                "text/plain; charset=utf-8",
                "line one\nline two\n",
            ),
        ];
        let (message, channel) = rig
            .sim
            .send_dm_with_files(ALICE, "alice", "what is this?", files);
        let reply = rig.message_containing(channel, "got ", T).await;
        assert_eq!(reply.content.trim(), "got 2");
        assert_eq!(std::fs::read(save.path().join("chart.png")).unwrap(), png());
        assert_eq!(
            std::fs::read_to_string(save.path().join("notes.txt")).unwrap(),
            "line one\nline two\n"
        );
        let task = task(save.path());
        let in_dir = rig.path(&format!("files/{message}/in"));
        let attachments = task["attachments"].as_array().unwrap();
        assert_eq!(attachments.len(), 2);
        for (a, name) in attachments.iter().zip(["chart.png", "notes.txt"]) {
            assert_eq!(
                a["path"],
                in_dir.join(name).to_string_lossy().as_ref(),
                "{a}"
            );
            assert!(a["url"].as_str().unwrap().contains(name), "{a}");
            assert!(a.get("left_out").is_none(), "{a}");
        }
        assert_eq!(attachments[1]["content_type"], "text/plain; charset=utf-8");
        // Nothing left out, nothing said about it.
        assert_eq!(rig.sim.messages_in(channel).len(), 1);
        // The task is done: its files go.
        let dir = rig.path(&format!("files/{message}"));
        wait_until("the task's files removed", T, || {
            (!dir.exists()).then_some(())
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn an_eleventh_attachment_a_file_over_the_limit_and_a_full_budget_are_left_out_and_said_once() {
    let rig = Rig::new();
    let save = tempfile::tempdir().unwrap();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(saving_agent(save.path()));
        config.max_attachment_bytes = 1000;
        let mut tunables = tunables();
        // Room for three files of 300 bytes, not four.
        tunables.files_budget = 1000;
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(T).await;
        let mut files = vec![SimFile::new(
            "big.bin",
            "application/octet-stream",
            vec![1u8; 1001],
        )];
        for n in 0..10 {
            files.push(SimFile::new(
                &format!("f{n}.txt"),
                "text/plain",
                vec![b'a' + n; 300],
            ));
        }
        let (_, channel) = rig.sim.send_dm_with_files(ALICE, "alice", "", files);
        let reply = rig.message_containing(channel, "got ", T).await;
        assert_eq!(reply.content.trim(), "got 3");
        let notices: Vec<String> = rig
            .sim
            .messages_in(channel)
            .into_iter()
            .map(|m| m.content)
            .filter(|c| c.contains("not passed on"))
            .collect();
        assert_eq!(notices.len(), 1, "{notices:?}");
        let notice = &notices[0];
        assert!(notice.starts_with("8 of your attachments were not passed on to the agent: big.bin (larger than the 1000 bytes limit), f3.txt (the bridge's room for files (1000 bytes) is full)"), "{notice}");
        assert!(
            notice.contains("f9.txt (more than 10 attachments)"),
            "{notice}"
        );
        let task = task(save.path());
        let attachments = task["attachments"].as_array().unwrap();
        assert_eq!(attachments.len(), 11);
        let left: Vec<&str> = attachments
            .iter()
            .map(|a| a["left_out"].as_str().unwrap_or("-"))
            .collect();
        assert_eq!(left[0], "larger than the 1000 bytes limit");
        assert_eq!(&left[1..4], ["-", "-", "-"]);
        assert!(left[4].contains("room for files"), "{left:?}");
        assert_eq!(left[10], "more than 10 attachments");
        for a in attachments {
            assert!(a["path"].is_string() != a["left_out"].is_string(), "{a}");
        }
        let errors = support::schema::validate(&support::schema::load("task.schema.json"), &task);
        assert!(errors.is_empty(), "{errors:?}");
        // The budget is back once the task is done: the next message fits.
        let (_, channel) = rig.sim.send_dm_with_files(
            ALICE,
            "alice",
            "",
            vec![SimFile::new("again.txt", "text/plain", vec![b'x'; 900])],
        );
        let reply = rig.message_containing(channel, "got 1", T).await;
        assert_eq!(reply.content.trim(), "got 1");
        bridge.stop().await;
    });
}

#[test]
fn a_spool_task_keeps_its_files_until_its_result_is_delivered() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        let files = vec![SimFile::new("scan.png", "image/png", png())];
        let (message, channel) = rig
            .sim
            .send_dm_with_files(OWNER, "owner", "file this", files);
        let task_file = rig.path(&format!("spool/tasks/{message}.json"));
        let text = wait_until("the spooled task", T, || {
            std::fs::read_to_string(&task_file).ok()
        })
        .await;
        let task: Value = serde_json::from_str(&text).unwrap();
        let path = task["attachments"][0]["path"].as_str().unwrap().to_owned();
        assert_eq!(std::fs::read(&path).unwrap(), png());
        // The agent answers; once the result is delivered the files go.
        let result = serde_json::json!({"channel_id": channel.to_string(), "content": "filed"});
        rig.write_atomic(
            &format!("spool/results/{message}.json"),
            &result.to_string(),
        );
        rig.message_containing(channel, "filed", T).await;
        let dir = rig.path(&format!("files/{message}"));
        wait_until("the task's files removed", T, || {
            (!dir.exists()).then_some(())
        })
        .await;
        bridge.stop().await;
        let _ = Snowflake::new(0);
    });
}

#[test]
fn an_attachment_url_off_discords_cdn_is_not_fetched() {
    let rig = Rig::new();
    let save = tempfile::tempdir().unwrap();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(saving_agent(save.path()));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        // A message whose attachment points somewhere else (a cloud's
        // metadata service): data a message carries, not a place to go.
        let channel = rig.sim.dm_channel_of(ALICE);
        rig.sim.dispatch(
            "MESSAGE_CREATE",
            serde_json::json!({
                "id": "1300000000000000777",
                "channel_id": channel.to_string(),
                "author": {"id": ALICE.to_string(), "username": "alice"},
                "content": "look",
                "attachments": [{
                    "id": "1300000000000000778",
                    "filename": "meta.txt",
                    "content_type": "text/plain",
                    "size": 10,
                    "url": "http://169.254.169.254/latest/meta-data",
                }],
            }),
        );
        let reply = rig.message_containing(channel, "got ", T).await;
        assert_eq!(reply.content.trim(), "got 0");
        let task = task(save.path());
        assert_eq!(
            task["attachments"][0]["left_out"],
            "it is not on Discord's CDN"
        );
        rig.message_containing(channel, "meta.txt (it is not on Discord's CDN)", T)
            .await;
        bridge.stop().await;
    });
}

/// A plain HTTP server on another port of 127.0.0.1 (another origin) that
/// answers every request with a file and counts the connections it got.
fn foreign_host() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nstolen",
            );
        }
    });
    (origin, asked)
}

#[test]
fn a_cdn_redirect_off_discords_cdn_is_not_followed_and_said_once() {
    let rig = Rig::new();
    let save = tempfile::tempdir().unwrap();
    let (foreign, asked) = foreign_host();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(saving_agent(save.path()));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        // The attachment is on the CDN (the simulator's host); the CDN
        // sends the download elsewhere.
        rig.sim.cdn_fault(smolcord_sim::CdnFault::Redirect {
            to: format!("{foreign}/latest/meta-data"),
            count: 1,
        });
        let files = vec![SimFile::new("notes.txt", "text/plain", "mine")];
        let (message, channel) = rig.sim.send_dm_with_files(ALICE, "alice", "look", files);
        let reply = rig.message_containing(channel, "got ", T).await;
        assert_eq!(reply.content.trim(), "got 0", "the agent still runs");
        let why = format!("the CDN redirected it off Discord's CDN (to {foreign})");
        let task = task(save.path());
        assert_eq!(task["attachments"][0]["left_out"], why.as_str());
        assert!(task["attachments"][0].get("path").is_none());
        rig.message_containing(channel, &format!("notes.txt ({why})"), T)
            .await;
        let notices = rig
            .sim
            .messages_in(channel)
            .into_iter()
            .filter(|m| m.content.contains("not passed on"))
            .count();
        assert_eq!(notices, 1, "the user is told once");
        assert_eq!(
            asked.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "the foreign host was asked"
        );
        let dir = rig.path(&format!("files/{message}"));
        wait_until("the task's files removed", T, || {
            (!dir.exists()).then_some(())
        })
        .await;
        bridge.stop().await;
    });
}

/// A small tmpfs mounted on a directory (root only: `mount` needs it),
/// unmounted when dropped; `None`, with the reason printed, where it cannot be.
struct SmallDisk {
    dir: std::path::PathBuf,
}

impl SmallDisk {
    fn mount(dir: std::path::PathBuf, size: &str) -> Option<SmallDisk> {
        if !rustix::process::geteuid().is_root() {
            println!("skipped: not root, so no tmpfs can be mounted for a real full disk");
            return None;
        }
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&dir)
            .status();
        if !matches!(mounted, Ok(status) if status.success()) {
            println!("skipped: running as root, but a tmpfs cannot be mounted here ({mounted:?})");
            return None;
        }
        Some(SmallDisk { dir })
    }

    /// Every file on it (not the directories), by path relative to it.
    fn files(&self) -> Vec<String> {
        fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else {
                    out.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.dir, &self.dir, &mut out);
        out.sort();
        out
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.dir).status();
    }
}

#[test]
fn a_download_that_fills_the_disk_is_left_out_and_removed_and_the_bridge_goes_on() {
    let rig = Rig::new();
    // The state dir's files directory on a 256 KiB disk; the attachment
    // is 1 MiB: within every bound the bridge counts (25 MiB a file, the
    // 512 MiB budget), so only the disk can stop it.
    let Some(disk) = SmallDisk::mount(rig.path("files"), "256k") else {
        return;
    };
    let save = tempfile::tempdir().unwrap();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        // It waits a moment first: the test looks at the disk while it runs.
        let mut agent = saving_agent(save.path());
        agent[2] = format!("sleep 1; {}", agent[2]);
        config.agent_cmd = Some(agent);
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let big = smolcord_sim::generated_bytes(1 << 20);
        let files = vec![SimFile::new("big.bin", "application/octet-stream", big)];
        let (message, channel) = rig
            .sim
            .send_dm_with_files(ALICE, "alice", "keep this", files);
        let why = "it could not be written to disk (full?)";
        // Told before the agent runs; the partial file is gone by then.
        rig.message_containing(channel, &format!("big.bin ({why})"), T)
            .await;
        assert_eq!(disk.files(), Vec::<String>::new(), "a partial file is left");
        let reply = rig.message_containing(channel, "got ", T).await;
        assert_eq!(reply.content.trim(), "got 0", "the agent still runs");
        let task = task(save.path());
        assert_eq!(task["attachments"][0]["left_out"], why);
        assert!(task["attachments"][0].get("path").is_none());
        let notices = rig
            .sim
            .messages_in(channel)
            .into_iter()
            .filter(|m| m.content.contains("not passed on"))
            .count();
        assert_eq!(notices, 1, "the user is told once");
        // Nothing left behind: no partial file, the task's directory gone.
        let dir = rig.path(&format!("files/{message}"));
        wait_until("the task's files removed", T, || {
            (!dir.exists()).then_some(())
        })
        .await;
        assert_eq!(std::fs::read_dir(&disk.dir).unwrap().count(), 0);

        // The bridge goes on: the next file fits and reaches the agent.
        let small = smolcord_sim::generated_bytes(20_000);
        let files = vec![SimFile::new(
            "small.bin",
            "application/octet-stream",
            small.clone(),
        )];
        let (message, _) = rig
            .sim
            .send_dm_with_files(ALICE, "alice", "and this", files);
        rig.message_containing(channel, "got 1", T).await;
        assert_eq!(std::fs::read(save.path().join("small.bin")).unwrap(), small);
        let dir = rig.path(&format!("files/{message}"));
        wait_until("the second task's files removed", T, || {
            (!dir.exists()).then_some(())
        })
        .await;
        bridge.stop().await;
        drop(disk);
    });
}
