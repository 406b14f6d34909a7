//! The remote identify queue (twilight-rs/gateway-queue's protocol) against
//! a stand-in service whose answers each test decides: a long wait is
//! reported at warn level, naming shard, bucket and queue (never the
//! query, which may carry a secret); retries after errors are spread out,
//! not in step; and a queue that says "go" at once still gets one identify
//! per bucket per window out of this process.

use crate::support;

use futures_lite::future;
use smolcord::shard::{IdentifyQueue, RemoteIdentifyQueue};
use std::time::{Duration, Instant};
use support::logs::captured;
use support::queue_server::{Answer, QueueServer};
use support::wait::*;

#[test]
fn a_long_wait_is_reported_naming_shard_bucket_and_queue() {
    let _serial = support::logs::serial();
    let server = QueueServer::start(|_| Answer::Hold);
    let queue = RemoteIdentifyQueue::new(format!("{}?token=secret-of-the-queue", server.url))
        .with_patience(Duration::from_millis(300), Duration::from_millis(300));
    queue.set_max_concurrency(4);
    let reports = block_within(SOON * 2, async {
        let waiting = async {
            queue.permit(6).await;
            panic!("the queue never says go here");
        };
        let reported = wait_until("two reports of the wait", SOON, || {
            let reports: Vec<String> = captured()
                .into_iter()
                .filter(|line| line.starts_with("WARN") && line.contains("waited"))
                .collect();
            (reports.len() >= 2).then_some(reports)
        });
        future::or(waiting, reported).await
    });
    let first = &reports[0];
    let base = server.url.as_str();
    assert!(
        first.contains("shard 6 (bucket 2 of max_concurrency 4)") && first.contains(base),
        "{first}"
    );
    assert!(
        captured()
            .iter()
            .all(|line| !line.contains("secret-of-the-queue")),
        "{:#?}",
        captured()
    );
}

#[test]
fn retries_after_errors_are_spread_out_not_in_step() {
    const SHARDS: u32 = 16;
    let server = QueueServer::start(|_| Answer::Status(503));
    let queue = RemoteIdentifyQueue::new(server.url.clone());
    let ex = smol::LocalExecutor::new();
    let asking: Vec<_> = (0..SHARDS).map(|id| ex.spawn(queue.permit(id))).collect();
    let requests = block_within(
        SOON * 2,
        ex.run(wait_until("a retry from every shard", SOON, || {
            let requests = server.requests();
            (0..SHARDS)
                .all(|id| requests.iter().filter(|r| r.shard == Some(id)).count() >= 2)
                .then_some(requests)
        })),
    );
    drop(asking);
    // Each shard's wait between its first request and its retry.
    let gaps: Vec<Duration> = (0..SHARDS)
        .map(|id| {
            let mut times = requests
                .iter()
                .filter(|r| r.shard == Some(id))
                .map(|r| r.at);
            let first = times.next().unwrap();
            times.next().unwrap() - first
        })
        .collect();
    let spread = *gaps.iter().max().unwrap() - *gaps.iter().min().unwrap();
    // In step, every gap is the backoff's 1 s plus noise; jittered, they
    // spread over ½–1 s (16 of them within 150 ms: odds below 1 in 10^6).
    assert!(
        spread >= Duration::from_millis(150),
        "retries {spread:?} apart at most: {gaps:?}"
    );
}

#[test]
fn a_queue_that_always_says_go_still_gets_one_identify_per_bucket_per_window() {
    const WINDOW: Duration = Duration::from_millis(1000);
    let server = QueueServer::start(|_| Answer::Status(200));
    let queue = RemoteIdentifyQueue::new(server.url.clone()).with_window(WINDOW);
    queue.set_max_concurrency(2);
    block_within(SOON, async {
        drop(queue.permit(0).await); // shard 0's Identify is sent
        let sent = Instant::now();
        drop(queue.permit(1).await); // bucket 1: not held back
        assert!(sent.elapsed() < WINDOW * 9 / 10, "{:?}", sent.elapsed());
        drop(queue.permit(2).await); // bucket 0 again
        assert!(sent.elapsed() >= WINDOW * 9 / 10, "{:?}", sent.elapsed());
    });
    assert_eq!(server.requests().len(), 3, "every shard asked the queue");
}
