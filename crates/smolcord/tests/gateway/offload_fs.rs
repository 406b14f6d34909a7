//! offload's file operations: atomic JSON writes, backups, reads with clear
//! errors, per-path ordering, and the small helpers.
// Tests may block: they check the files with std::fs directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use smolcord::offload::{self, Error, Fallback};

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
struct State {
    seq: u64,
    name: String,
}

fn state(seq: u64) -> State {
    State {
        seq,
        name: format!("value {seq}"),
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

/// Everything in `dir` by file name, sorted (temp files included).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn atomic_write_round_trips_creates_0600_and_leaves_no_temp_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    smol::block_on(async {
        offload::write_json_atomic(&path, &state(1))
            .await
            .expect("write 1");
        offload::write_json_atomic(&path, &state(2))
            .await
            .expect("write 2");
        let back: Option<State> = offload::read_json(&path, Fallback::None)
            .await
            .expect("read");
        assert_eq!(back, Some(state(2)));
    });
    assert_eq!(mode(&path), 0o600);
    assert_eq!(names(dir.path()), ["state.json"]);
}

#[test]
fn atomic_write_replaces_a_world_readable_file_with_a_0600_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("blob");
    fs::write(&path, b"old").expect("seed");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
    smol::block_on(offload::write_bytes_atomic(&path, b"new".to_vec())).expect("write");
    assert_eq!(fs::read(&path).expect("read"), b"new");
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn read_json_missing_file_is_none_and_bad_json_names_the_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    smol::block_on(async {
        let missing: Option<State> = offload::read_json(&path, Fallback::None)
            .await
            .expect("missing is ok");
        assert_eq!(missing, None);
        let missing: Option<State> = offload::read_json(&path, Fallback::Backup)
            .await
            .expect("missing is ok");
        assert_eq!(missing, None);

        fs::write(&path, "{\n  \"seq\": 1,\n  oops\n}").expect("seed");
        let err = offload::read_json::<State>(&path, Fallback::None)
            .await
            .expect_err("bad JSON");
        assert!(matches!(err, Error::BadJson { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string()),
            "names the file: {msg}"
        );
        assert!(msg.contains("line 3"), "says where: {msg}");

        fs::write(&path, "").expect("truncate");
        let err = offload::read_json::<State>(&path, Fallback::None)
            .await
            .expect_err("empty");
        assert!(matches!(err, Error::BadJson { .. }), "{err:?}");

        // Valid JSON of the wrong shape is just as bad.
        fs::write(&path, "[1, 2]").expect("seed");
        let err = offload::read_json::<State>(&path, Fallback::None)
            .await
            .expect_err("wrong shape");
        assert!(err.to_string().contains("state.json"), "{err}");
    });
}

#[test]
fn backup_keeps_the_previous_good_value_and_reads_fall_back_to_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    let bak = dir.path().join("state.json.bak");
    smol::block_on(async {
        offload::write_json_atomic_with_backup(&path, &state(1))
            .await
            .expect("write 1");
        assert!(!bak.exists(), "nothing to back up on the first write");
        offload::write_json_atomic_with_backup(&path, &state(2))
            .await
            .expect("write 2");
        let b: Option<State> = offload::read_json(&bak, Fallback::None)
            .await
            .expect("read bak");
        assert_eq!(b, Some(state(1)));
        assert_eq!(mode(&bak), 0o600);

        // A torn or corrupt primary: Backup falls back, None reports it.
        for corrupt in ["", "{\"seq\": 2, \"na"] {
            fs::write(&path, corrupt).expect("corrupt");
            let v: Option<State> = offload::read_json(&path, Fallback::Backup)
                .await
                .expect("falls back");
            assert_eq!(v, Some(state(1)), "after corrupting with {corrupt:?}");
            assert!(offload::read_json::<State>(&path, Fallback::None)
                .await
                .is_err());
        }

        // Writing over a corrupt primary must not replace the good backup.
        offload::write_json_atomic_with_backup(&path, &state(3))
            .await
            .expect("write 3");
        let b: Option<State> = offload::read_json(&bak, Fallback::None)
            .await
            .expect("read bak");
        assert_eq!(
            b,
            Some(state(1)),
            "corrupt primary was not copied over the backup"
        );

        // A missing primary falls back too.
        fs::remove_file(&path).expect("rm");
        let v: Option<State> = offload::read_json(&path, Fallback::Backup)
            .await
            .expect("falls back");
        assert_eq!(v, Some(state(1)));

        // Both bad: the error names the primary.
        fs::write(&path, "x").expect("corrupt");
        fs::write(&bak, "y").expect("corrupt");
        let err = offload::read_json::<State>(&path, Fallback::Backup)
            .await
            .expect_err("both bad");
        assert!(err.to_string().contains("state.json:"), "{err}");
    });
}

#[test]
fn a_later_small_write_is_not_overtaken_by_an_earlier_big_one() {
    // Unserialised, the tiny second write would finish first and the big
    // first write would then land on top of it: the later value lost.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    let ex = smol::LocalExecutor::new();
    // A race, so several rounds: unserialised, nearly every round loses.
    for round in 0..6 {
        smol::block_on(ex.run(async {
            let big = State {
                seq: 1,
                name: "x".repeat(8 << 20),
            };
            let first = ex.spawn({
                let path = path.clone();
                async move { offload::write_json_atomic(&path, &big).await }
            });
            let second = ex.spawn({
                let path = path.clone();
                async move { offload::write_json_atomic(&path, &state(2)).await }
            });
            first.await.expect("write 1");
            second.await.expect("write 2");
            let last: Option<State> = offload::read_json(&path, Fallback::None)
                .await
                .expect("read");
            assert_eq!(
                last,
                Some(state(2)),
                "round {round}: the later call's value wins"
            );
        }));
    }
    assert_eq!(names(dir.path()), ["state.json"]);
}

#[test]
fn many_concurrent_writes_to_one_path_end_with_the_last_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    let ex = smol::LocalExecutor::new();
    const WRITERS: u64 = 24;
    smol::block_on(ex.run(async {
        // Sizes vary so that unserialised writes would finish out of order.
        let tasks: Vec<_> = (0..WRITERS)
            .map(|seq| {
                let path = path.clone();
                ex.spawn(async move {
                    let value = State {
                        seq,
                        name: "y".repeat(((WRITERS - seq) as usize) << 16),
                    };
                    offload::write_json_atomic(&path, &value).await
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("write");
        }
        let last: Option<State> = offload::read_json(&path, Fallback::None)
            .await
            .expect("read");
        assert_eq!(
            last.map(|s| s.seq),
            Some(WRITERS - 1),
            "the last call's value wins"
        );
    }));
    assert_eq!(names(dir.path()), ["state.json"]);
}

#[test]
fn a_value_that_cannot_be_serialised_leaves_the_file_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    fs::write(&path, "{}").expect("seed");
    let bad: HashMap<(u8, u8), u8> = HashMap::from([((1, 2), 3)]);
    let err = smol::block_on(offload::write_json_atomic(&path, &bad)).expect_err("tuple keys");
    assert!(matches!(err, Error::Serialize { .. }), "{err:?}");
    assert!(err.to_string().contains("state.json"), "{err}");
    assert_eq!(fs::read_to_string(&path).expect("read"), "{}");
}

#[test]
fn writing_into_a_missing_directory_names_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("no-such-dir").join("state.json");
    let err =
        smol::block_on(offload::write_bytes_atomic(&path, b"x".to_vec())).expect_err("no dir");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::NotFound));
    let err =
        smol::block_on(offload::write_bytes_atomic(Path::new("/"), vec![])).expect_err("no name");
    assert!(matches!(err, Error::InvalidPath { .. }), "{err:?}");
}

#[test]
fn small_helpers_behave_on_missing_and_present_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spool = dir.path().join("a").join("spool");
    smol::block_on(async {
        assert_eq!(
            offload::list_dir(&spool).await.expect("missing dir"),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            offload::read_bytes(&spool.join("x"))
                .await
                .expect("missing"),
            None
        );
        offload::remove_file(&spool.join("x"))
            .await
            .expect("removing a missing file is ok");

        offload::create_dir_all(&spool).await.expect("mkdir -p");
        assert_eq!(mode(&spool), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);

        for name in ["c", "a", "b"] {
            offload::write_bytes_atomic(&spool.join(name), name.as_bytes().to_vec())
                .await
                .expect("write");
        }
        let listed = offload::list_dir(&spool).await.expect("list");
        assert_eq!(listed, ["a", "b", "c"].map(|n| spool.join(n)));

        let moved = dir.path().join("moved");
        offload::rename_durable(&spool.join("a"), &moved)
            .await
            .expect("rename");
        assert_eq!(
            offload::read_bytes(&moved).await.expect("read"),
            Some(b"a".to_vec())
        );
        assert_eq!(
            offload::read_bytes(&spool.join("a")).await.expect("read"),
            None
        );

        offload::remove_file(&moved).await.expect("rm");
        assert!(!moved.exists());

        let journal = dir.path().join("journal.log");
        offload::append_line_synced(&journal, b"one".to_vec())
            .await
            .expect("append");
        offload::append_line_synced(&journal, b"two\n".to_vec())
            .await
            .expect("append");
        assert_eq!(fs::read_to_string(&journal).expect("read"), "one\ntwo\n");
        assert_eq!(mode(&journal), 0o600);

        let err = offload::rename_durable(&spool.join("nope"), &moved)
            .await
            .expect_err("missing source");
        assert!(err.to_string().contains("moved"), "{err}");
    });
}

/// Runs `f` on its own thread; panics if it takes over 10 s (a FIFO read
/// waits for a writer forever, `/dev/zero` never ends).
fn quickly<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("not refused within 10 s (blocked on a FIFO, or read /dev/zero whole?)")
}

#[test]
fn state_files_and_the_journal_are_regular_files_or_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("session.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let zero = dir.path().join("failures.jsonl");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();

    let path = fifo.clone();
    let err = quickly(move || smol::block_on(offload::read_json::<State>(&path, Fallback::Backup)));
    assert!(
        matches!(err, Err(Error::NotRegular { what: "a FIFO", .. })),
        "{err:?}"
    );
    for path in [fifo, zero] {
        let (read, tail, append) = quickly(move || {
            smol::block_on(async {
                (
                    offload::read_bytes(&path).await,
                    offload::size_and_last_byte(&path).await,
                    offload::append_line_synced(&path, b"{}".to_vec()).await,
                )
            })
        });
        assert!(matches!(read, Err(Error::NotRegular { .. })), "{read:?}");
        assert!(matches!(tail, Err(Error::NotRegular { .. })), "{tail:?}");
        assert!(
            matches!(append, Err(Error::NotRegular { .. })),
            "{append:?}"
        );
    }
}
