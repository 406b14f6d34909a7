//! The config file: any text gives a config or an error naming the file,
//! never a panic (the key-locating code does offset arithmetic).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smolcord::config::Config;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let env = |name: &str| (name == "SMOLCORD_STATE_DIR").then(|| "/state".to_owned());
    let origin = Path::new("/etc/smolcord/config.json");
    if let Err(e) = Config::parse(text, origin, &env) {
        let message = e.to_string();
        assert!(message.contains("/etc/smolcord/config.json"), "{message}");
    }
});
