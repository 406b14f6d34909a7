//! The simulator's thread: its own smol executor, one listener, and one
//! task per TCP connection that reads HTTP requests and hands each to the
//! gateway, REST, control or attachment side.

use crate::control::api as control;
use crate::gateway::connection as gateway;
use crate::gateway::queue;
use crate::model::objects;
use crate::rest::cdn;
use crate::rest::ratelimit_headers;
use crate::rest::routes as rest;
use crate::state::shared::Shared;
use crate::wire::http::{HttpConn, Response};
use crate::wire::tls::SimStream;
use async_net::{TcpListener, TcpStream};
use futures_lite::future::or;
use serde_json::json;
use smol::LocalExecutor;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// An idle keep-alive connection is closed after this.
const IDLE: Duration = Duration::from_secs(120);
/// A TLS handshake that takes longer is dropped.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// Runs the simulator on a new thread until `stop` closes.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    listener: TcpListener,
    stop: async_channel::Receiver<()>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("smolcord-sim".to_owned())
        .spawn(move || {
            let executor = LocalExecutor::new();
            let serve = accept_loop(&executor, shared, listener);
            let stopped = async {
                let _ = stop.recv().await;
            };
            async_io::block_on(executor.run(or(stopped, serve)));
            // Dropping the executor drops every connection task, closing
            // their sockets.
            log::info!("sim: stopped");
        })
}

async fn accept_loop(
    executor: &LocalExecutor<'static>,
    shared: Arc<Shared>,
    listener: TcpListener,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                log::debug!("sim: TCP connection from {peer}");
                let shared = shared.clone();
                executor.spawn(serve_tcp(shared, stream)).detach();
            }
            Err(err) => {
                // Out of file descriptors and the like: back off instead of
                // spinning.
                log::warn!("sim: accept failed: {err}");
                async_io::Timer::after(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve_tcp(shared: Arc<Shared>, tcp: TcpStream) {
    let _ = tcp.set_nodelay(true);
    let stream = match &shared.config.tls {
        None => SimStream::Plain(tcp.clone()),
        Some(tls) => {
            let handshake = or(async { Some(tls.accept(tcp.clone()).await) }, async {
                async_io::Timer::after(HANDSHAKE).await;
                None
            });
            match handshake.await {
                Some(Ok(stream)) => stream,
                Some(Err(err)) => {
                    log::debug!("sim: TLS handshake failed: {err}");
                    return;
                }
                None => {
                    log::debug!("sim: TLS handshake took longer than {HANDSHAKE:?}");
                    return;
                }
            }
        }
    };
    let mut conn = HttpConn::new(stream, tcp);
    loop {
        let next = or(conn.read_request(), async {
            async_io::Timer::after(IDLE).await;
            Ok(None)
        })
        .await;
        let request = match next {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(err) => {
                log::debug!("sim: bad HTTP request: {err}");
                if let Some(status) = err.status {
                    // A body over the cap is Discord's 413 40005.
                    let response = match status {
                        413 => crate::rest::upload_limits::too_large(),
                        _ => Response::json(status, &json!({"message": err.message, "code": 0})),
                    };
                    let _ = conn.write_response(&response, false).await;
                }
                return;
            }
        };
        if request.is_websocket() {
            gateway::serve(shared, conn, request).await;
            return;
        }
        let keep_alive = request.keep_alive();
        let path = request.path.as_str();
        let response = if path.starts_with("/api/") {
            let delay = rest::take_delay(&shared, &request);
            let (name, value) = ratelimit_headers::VIA;
            // Discord's clock, as every HTTP server states it.
            let now = objects::unix_ms().saturating_add(
                u64::try_from(shared.config.clock_ahead.as_millis()).unwrap_or(u64::MAX),
            );
            let response = rest::handle(&shared, &request)
                .with_header(name, value)
                .with_header("Date", objects::http_date(now));
            if let Some(delay) = delay {
                // Taken effect already: a late (or, if the client gives up
                // first, a lost) answer.
                log::info!(
                    "sim: REST answer to {} {path} held {delay:?}",
                    request.method
                );
                async_io::Timer::after(delay).await;
            }
            response
        } else if path == "/control" || path.starts_with("/control/") {
            control::handle(&shared, &request)
        } else if path.starts_with("/attachments/") {
            let (response, pace) = cdn::attachment(&shared, &request);
            if let Some(bytes_per_sec) = pace {
                let paced = conn.write_response_paced(&response, keep_alive, bytes_per_sec);
                if paced.await.is_err() || !keep_alive {
                    return;
                }
                continue;
            }
            response
        } else if path == queue::PATH {
            queue::handle(&shared, &request).await
        } else if path == "/" || path == "/resume" {
            Response::json(
                426,
                &json!({"message": "this is the gateway: connect with a websocket", "code": 0}),
            )
        } else {
            Response::json(404, &json!({"message": "404: Not Found", "code": 0}))
        };
        if conn.write_response(&response, keep_alive).await.is_err() || !keep_alive {
            return;
        }
    }
}
