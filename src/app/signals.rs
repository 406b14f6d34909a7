//! SIGINT/SIGTERM (stop) and SIGHUP (reload) as an async stream.

use async_signal::{Signal, Signals};
use futures_lite::StreamExt;

/// What a signal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalRequest {
    /// SIGINT or SIGTERM: drain and exit.
    Stop,
    /// SIGHUP: reload access and config where safe.
    Reload,
}

/// Listens for SIGINT, SIGTERM and SIGHUP.
pub fn shutdown_signals() -> std::io::Result<SignalStream> {
    Ok(SignalStream {
        signals: Signals::new([Signal::Int, Signal::Term, Signal::Hup])?,
    })
}

/// The signals, as requests.
pub struct SignalStream {
    signals: Signals,
}

impl SignalStream {
    /// The next request (pending forever if signals stop arriving).
    pub async fn next(&mut self) -> SignalRequest {
        loop {
            match self.signals.next().await {
                Some(Ok(Signal::Hup)) => return SignalRequest::Reload,
                Some(Ok(_)) => return SignalRequest::Stop,
                Some(Err(err)) => log::warn!("signal stream error: {err}"),
                None => futures_lite::future::pending::<()>().await,
            }
        }
    }
}
