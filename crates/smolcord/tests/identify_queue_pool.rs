//! A shard waiting for its turn from a remote identify queue holds no
//! `blocking` pool thread: with the pool capped at one thread, pool work
//! still gets done while the queue holds the request (for minutes, for the
//! last of many shards). Its own binary: the cap is read once per process.

use smolcord_testkit as support;

use futures_lite::future;
use smolcord::shard::{IdentifyQueue, RemoteIdentifyQueue};
use support::queue_server::{Answer, QueueServer};
use support::wait::*;

#[test]
fn a_shard_waiting_for_its_turn_holds_no_pool_thread() {
    // Before anything starts the pool.
    std::env::set_var("BLOCKING_MAX_THREADS", "1");
    let server = QueueServer::start(|_| Answer::Hold);
    let queue = RemoteIdentifyQueue::new(server.url.clone());
    let answer = block_within(SOON * 3, async {
        let waiting = async {
            queue.permit(0).await;
            panic!("the queue never says go here");
        };
        let pool_work = async {
            wait_until("the request at the queue", SOON, || {
                (!server.requests().is_empty()).then_some(())
            })
            .await;
            within(
                "work on the pool's one thread while the shard waits",
                SOON,
                blocking::unblock(|| 7),
            )
            .await
        };
        future::or(waiting, pool_work).await
    });
    assert_eq!(answer, 7);
}
