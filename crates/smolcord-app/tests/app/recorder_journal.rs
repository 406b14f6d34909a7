//! The journal on disk: its line format and mode, a torn last line after a
//! crash (skipped with a notice, and not glued to the next line), and
//! rotation by size keeping N files.
// Tests may block: they write and inspect the files with std::fs directly.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use smolcord_app::recorder::{read_journal, Admission, FailureKind, Recorder, RecorderConfig};
use support::recorder::{failure, place};

fn record_and_settle(recorder: &Recorder, kind: FailureKind, n: usize) {
    assert_eq!(recorder.record(failure(kind, n)), Admission::Admitted);
    let left = smol::block_on(recorder.wait_idle(Duration::from_secs(10)));
    assert_eq!(left, 0, "record {n} still in flight");
}

#[test]
fn a_line_is_one_json_object_with_time_kind_place_status_message_in_a_0600_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let recorder = Recorder::new(RecorderConfig::in_state_dir(&state));
    record_and_settle(&recorder, FailureKind::AccessRefused, 7);

    let path = state.join("failures.jsonl");
    let text = fs::read_to_string(&path).expect("journal");
    assert!(
        text.ends_with('\n') && text.lines().count() == 1,
        "{text:?}"
    );
    let line: serde_json::Value = serde_json::from_str(text.trim_end()).expect("json");
    let keys: Vec<&String> = line.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["kind", "message", "place", "status", "time"]);
    assert_eq!(line["kind"], "access_refused");
    assert_eq!(line["place"], place(7));
    assert_eq!(line["status"], 507);
    let time = line["time"].as_str().expect("time");
    assert!(
        time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
        "{time}"
    );
    assert_eq!(
        fs::metadata(&path).expect("stat").permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn a_torn_last_line_is_skipped_with_a_notice_and_the_next_record_starts_a_fresh_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let recorder = Recorder::new(RecorderConfig::new(&path));
    record_and_settle(&recorder, FailureKind::Rest, 1);
    record_and_settle(&recorder, FailureKind::Rest, 2);
    drop(recorder);
    // A crash cut the third append short.
    let mut bytes = fs::read(&path).expect("journal");
    bytes.extend_from_slice(br#"{"time":"2024-05-01T10:00:00.000Z","kind":"ag"#);
    fs::write(&path, &bytes).expect("tear");

    let read = smol::block_on(read_journal(&path)).expect("read");
    assert_eq!(read.entries.len(), 2);
    assert_eq!(read.notices.len(), 1, "{:?}", read.notices);
    assert!(
        read.notices[0].starts_with("failures.jsonl: skipped a torn last line (line 3"),
        "{:?}",
        read.notices
    );

    // The next process appends after the fragment, on a line of its own.
    let recorder = Recorder::new(RecorderConfig::new(&path));
    record_and_settle(&recorder, FailureKind::Agent, 3);
    let read = smol::block_on(read_journal(&path)).expect("read");
    let places: Vec<String> = read.entries.iter().map(|e| e.place.clone()).collect();
    assert_eq!(places, [place(1), place(2), place(3)]);
    assert_eq!(read.notices.len(), 1, "{:?}", read.notices);
    assert!(
        read.notices[0].contains("skipped line 3"),
        "{:?}",
        read.notices
    );
}

fn size(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

#[test]
fn the_journal_rotates_by_size_and_keeps_n_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let mut config = RecorderConfig::new(&path);
    config.max_bytes = 1000;
    config.keep = 2;
    let recorder = Recorder::new(config);
    let line_len = {
        record_and_settle(&recorder, FailureKind::Fallback, 0);
        size(&path)
    };
    assert!(
        line_len > 100 && line_len < 500,
        "one line is {line_len} bytes"
    );
    for n in 1..30 {
        record_and_settle(&recorder, FailureKind::Fallback, n);
    }

    let mut names: Vec<String> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["failures.jsonl", "failures.jsonl.1", "failures.jsonl.2"]
    );
    for name in &names {
        let bytes = size(&dir.path().join(name));
        assert!(bytes > 0 && bytes <= 1000, "{name} holds {bytes} bytes");
    }

    // Oldest first, the newest 30 - k of them, in order, ending with the last.
    let read = smol::block_on(read_journal(&path)).expect("read");
    assert!(read.notices.is_empty(), "{:?}", read.notices);
    let kept = read.entries.len();
    let per_file = (1000 / line_len) as usize;
    assert!(kept > per_file * 2 && kept <= per_file * 3, "kept {kept}");
    let places: Vec<String> = read.entries.iter().map(|e| e.place.clone()).collect();
    let expected: Vec<String> = (30 - kept..30).map(place).collect();
    assert_eq!(places, expected);
}

#[test]
fn a_missing_journal_reads_as_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let read = smol::block_on(read_journal(&dir.path().join("failures.jsonl"))).expect("read");
    assert!(read.entries.is_empty() && read.notices.is_empty());
}
