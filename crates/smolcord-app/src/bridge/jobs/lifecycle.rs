//! Where the run is: in safe mode or not, a turn done yet, stopping. Safe
//! mode is mirrored in the counters (the status file shows it), so it is
//! changed only here.

use crate::bridge::report::counters::BridgeCounters;
use std::cell::Cell;

/// The run's lifecycle flags.
pub(crate) struct Lifecycle {
    /// Only the owner is answered (lifted by the first successful turn).
    safe_mode: Cell<bool>,
    /// A turn succeeded in this run (the failure counter was cleared).
    turn_done: Cell<bool>,
    /// No new work is taken (shutting down).
    stopping: Cell<bool>,
    counters: BridgeCounters,
}

impl Lifecycle {
    /// A run starting in safe mode or not (the counters say so already).
    pub fn new(safe_mode: bool, counters: BridgeCounters) -> Lifecycle {
        Lifecycle {
            safe_mode: Cell::new(safe_mode),
            turn_done: Cell::new(false),
            stopping: Cell::new(false),
            counters,
        }
    }

    /// Only the owner is answered.
    pub fn safe_mode(&self) -> bool {
        self.safe_mode.get()
    }

    /// No new work is taken.
    pub fn stopping(&self) -> bool {
        self.stopping.get()
    }

    /// The bridge is shutting down: no new work from here on.
    pub fn stop(&self) {
        self.stopping.set(true);
    }

    /// A turn succeeded: true the first time in this run, which lifts
    /// safe mode.
    pub fn first_turn(&self) -> bool {
        if self.turn_done.replace(true) {
            return false;
        }
        true
    }

    /// Safe mode lifted (the first successful turn).
    pub fn lift_safe_mode(&self) {
        if self.safe_mode.replace(false) {
            log::info!("safe mode lifted: allowed users are answered again");
            self.counters.set_safe_mode(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_turn_lifts_safe_mode_and_its_counter_flag() {
        let counters = BridgeCounters::default();
        counters.set_safe_mode(true);
        let life = Lifecycle::new(true, counters.clone());
        assert!(life.safe_mode() && !life.stopping());
        assert!(life.first_turn());
        assert!(!life.first_turn());
        life.lift_safe_mode();
        assert!(!life.safe_mode());
        assert!(!counters.snapshot().safe_mode);
        life.stop();
        assert!(life.stopping());
    }
}
