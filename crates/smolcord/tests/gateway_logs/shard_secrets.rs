//! The token never appears in log output, errors or Debug output, through
//! identify, resume, zombie, reconnect and a fatal close.

use crate::support;

use smolcord::shard::ShardEvent;
use smolcord::token::Token;
use smolcord_sim::{Fault, SimConfig, Simulator};
use std::time::Duration;
use support::logs::captured;
use support::shard::*;
use support::wait::*;

const SECRET: &str = "MTEwMDAw.secret-token.DoNotLogMe";

#[test]
fn the_token_never_reaches_the_log() {
    let token = Token::new(SECRET).unwrap();
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(300),
        heartbeat_grace: 10.0,
        token: token.clone(),
        ..SimConfig::default()
    })
    .unwrap();
    let mut config = shard_config(&sim);
    config.token = token;
    let config_debug = format!("{config:?}");
    let errors = run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        sim.fault(Fault::Reconnect);
        wait_dispatch(&handle, "RESUMED").await;
        sim.fault(Fault::DropAcks(1));
        wait_dispatch(&handle, "RESUMED").await;
        sim.fault(Fault::Close(4004));
        let error = wait_shard(&handle, SOON, |e| e.is_err()).await.unwrap_err();
        let status = handle.status();
        assert!(matches!(
            wait_shard(&handle, SOON, |_| true).await,
            Err(_) | Ok(ShardEvent::Disconnected { .. })
        ));
        format!(
            "{error} {error:?} {status:?} {}",
            serde_json::to_string(&status).unwrap()
        )
    });
    assert!(!config_debug.contains(SECRET), "{config_debug}");
    assert!(!errors.contains(SECRET), "{errors}");
    let logs = captured();
    assert!(
        logs.len() > 10,
        "too few log lines to prove anything: {logs:?}"
    );
    let leaks: Vec<&String> = logs.iter().filter(|line| line.contains(SECRET)).collect();
    assert!(leaks.is_empty(), "token in the log: {leaks:#?}");
}
