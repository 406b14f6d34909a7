//! A stand-in for twilight-rs/gateway-queue, the identify queue service a
//! fleet of processes shares: `GET /queue?shard=N` is answered when shard N
//! may identify — one per `max_concurrency` bucket (`N % max_concurrency`)
//! per `identify_window`, in the order asked — with gateway-queue's body.
//! A REST fault on the prefix `/queue` (e.g. `RestFault::server_error(503,
//! 2).on("/queue")`) makes it fail like a service that is down.

use crate::rest::routes::{fault_response, take_aimed_fault};
use crate::state::shared::Shared;
use crate::wire::http::{Request, Response};
use serde_json::json;
use std::time::Instant;

/// The queue's path.
pub(crate) const PATH: &str = "/queue";

pub(crate) async fn handle(shared: &Shared, request: &Request) -> Response {
    let Some(shard) = request
        .query_param("shard")
        .and_then(|s| s.parse::<u32>().ok())
    else {
        return Response::json(
            400,
            &json!({"message": "the query must name the shard: ?shard=N"}),
        );
    };
    let slot = {
        let mut state = shared.lock();
        if let Some(fault) = take_aimed_fault(&mut state, PATH) {
            return fault_response(fault);
        }
        state
            .limits
            .queue_turn(shard, Instant::now(), shared.config.identify_window)
    };
    if slot > Instant::now() {
        async_io::Timer::at(slot).await;
    }
    Response::json(200, &json!({"message": "You're free to connect now! :)"}))
}
