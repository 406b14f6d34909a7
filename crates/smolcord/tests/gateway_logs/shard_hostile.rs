//! What a broken or hostile gateway tells us is checked before it is
//! obeyed: a Hello interval outside the sane range, a sequence number that
//! jumps to the moon. Each is refused with a clear error and the connection
//! made again. And the handshake says who we are (User-Agent).

use crate::support;

use smolcord_sim::{Fault, SimConfig, SimEvent, Simulator};
use std::time::Duration;
use support::logs::captured;
use support::shard::*;
use support::wait::*;

#[test]
fn a_hello_interval_of_5_ms_is_refused_not_obeyed() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(5),
        command_limit: 100_000,
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |_handle, _| async move {
        // Refused and reconnected (with backoff), again and again.
        for conn in 2..=3 {
            next_sim_event(
                &rx,
                "another connection",
                |e| matches!(e, SimEvent::Connected { conn: c, .. } if *c == conn),
            )
            .await;
        }
        let stats = sim.stats();
        let beats: u64 = stats.connections.iter().map(|c| c.heartbeats).sum();
        let identifies: u32 = stats.connections.iter().map(|c| c.identifies).sum();
        assert_eq!(beats, 0, "obeyed a 5 ms interval");
        assert_eq!(identifies, 0, "identified on a connection it refused");
        assert!(
            captured()
                .iter()
                .any(|l| l.contains("heartbeat every 5 ms; refusing it")),
            "no clear error in the log"
        );
    });
}

#[test]
fn an_absurd_sequence_number_is_refused_and_later_dispatches_still_arrive() {
    let sim = support::shard::sim(1000);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        sim.fault(Fault::Raw(format!(
            "{{\"op\":0,\"s\":{},\"t\":\"MESSAGE_CREATE\",\"d\":{{}}}}",
            u64::MAX
        )));
        // The connection is made again and the session resumed.
        next_sim_event(&rx, "a resume", |e| matches!(e, SimEvent::Resumed { .. })).await;
        wait_dispatch(&handle, "RESUMED").await;
        // Obeyed, u64::MAX would make this look like a replay and drop it.
        sim.send_dm(42, "someone", "still here?");
        let dm = wait_dispatch(&handle, "MESSAGE_CREATE").await;
        let message: smolcord::protocol::Message = dm.data().unwrap();
        assert_eq!(message.content, "still here?");
        assert!(captured()
            .iter()
            .any(|l| l.contains("refusing a jump of more than")));
    });
}

#[test]
fn the_gateway_handshake_names_us() {
    let sim = support::shard::sim(1000);
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let agent = sim.stats().connections[0].user_agent.clone();
        assert!(
            agent
                .as_deref()
                .is_some_and(|a| a.starts_with("DiscordBot (")),
            "User-Agent {agent:?}"
        );
    });
}
