//! A spool result file (written by the agent, or anyone who can write the
//! spool): a result or a clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smolcord::bridge::spool::parse_result;

fuzz_target!(|data: &[u8]| {
    if let Ok(result) = parse_result(data) {
        assert!(!result.content.trim().is_empty());
    }
});
