//! SIGINT/SIGTERM (stop) and SIGHUP (reload) as an async stream, and the
//! rule that tells a repeated stop request from a duplicated one.

use async_signal::{Signal, Signals};
use futures_lite::StreamExt;
use std::time::{Duration, Instant};

/// Stop signals this close to the first one are the same request.
///
/// GNU `timeout` (and some supervisors) signal the child and then its whole
/// process group, so one stop arrives twice within microseconds (a few
/// milliseconds on a loaded Pi). Someone who means "exit now" signals again
/// after reading the "draining" line, which takes far longer than 500 ms;
/// and the drain itself lasts at most 2 s, so a longer window would leave
/// little room for a deliberate second signal.
pub const DUPLICATE_STOP_WINDOW: Duration = Duration::from_millis(500);

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

/// What a stop signal means, given the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopAction {
    /// The first: drain and stop.
    Drain,
    /// The same request delivered again (within [`DUPLICATE_STOP_WINDOW`]
    /// of the first): ignore it.
    Duplicate,
    /// A second request: exit at once.
    ExitNow,
}

/// Classifies stop signals as they arrive.
#[derive(Debug, Default)]
pub struct StopRequests {
    first: Option<Instant>,
}

impl StopRequests {
    /// The action for a stop signal received at `now`.
    pub fn on_stop(&mut self, now: Instant) -> StopAction {
        match self.first {
            None => {
                self.first = Some(now);
                StopAction::Drain
            }
            Some(first) if now.saturating_duration_since(first) <= DUPLICATE_STOP_WINDOW => {
                StopAction::Duplicate
            }
            Some(_) => StopAction::ExitNow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_delivered_twice_is_one_request_and_a_later_one_exits() {
        let t0 = Instant::now();
        let mut stops = StopRequests::default();
        assert_eq!(stops.on_stop(t0), StopAction::Drain);
        // `timeout` → child, then → process group: microseconds apart.
        assert_eq!(
            stops.on_stop(t0 + Duration::from_micros(30)),
            StopAction::Duplicate
        );
        assert_eq!(
            stops.on_stop(t0 + DUPLICATE_STOP_WINDOW),
            StopAction::Duplicate
        );
        assert_eq!(
            stops.on_stop(t0 + DUPLICATE_STOP_WINDOW + Duration::from_millis(1)),
            StopAction::ExitNow
        );
    }
}
