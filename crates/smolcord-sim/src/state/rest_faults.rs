//! The REST faults waiting for their requests (`Simulator::rest_fault`,
//! `POST /control/rest-fault`): each answers the next `count` requests it
//! matches, first queued first taken.

use super::faults::{RestFault, RestFaultKind, UploadShape};
use std::collections::VecDeque;

/// What a request is, as a REST fault matches it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FaultTarget<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The upload it carries (only upload refusals look at it).
    pub shape: UploadShape,
    /// Whether a fault without `path_prefix` applies: it does to the REST
    /// routes, not to the identify queue (which takes only faults aimed
    /// at it).
    pub unaimed: bool,
}

/// The queued faults.
#[derive(Debug, Default)]
pub(crate) struct RestFaults {
    queue: VecDeque<RestFault>,
}

impl RestFaults {
    pub(crate) fn push(&mut self, fault: RestFault) {
        self.queue.push_back(fault);
    }

    /// Takes one of the first fault matching `target`: a `Delay` if
    /// `delay`, else any other kind.
    pub(crate) fn take(&mut self, target: FaultTarget<'_>, delay: bool) -> Option<RestFaultKind> {
        let index = self.queue.iter().position(|f| {
            f.count > 0
                && matches!(f.kind, RestFaultKind::Delay(_)) == delay
                && f.kind.applies_to(target.shape)
                && f.path_prefix.as_deref().map_or(target.unaimed, |p| {
                    // "GET /api/…": that method only.
                    match p.split_once(' ') {
                        Some((m, p)) => {
                            m.eq_ignore_ascii_case(target.method) && target.path.starts_with(p)
                        }
                        None => target.path.starts_with(p),
                    }
                })
        })?;
        let fault = &mut self.queue[index];
        fault.count -= 1;
        let kind = fault.kind.clone();
        if fault.count == 0 {
            self.queue.remove(index);
        }
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str, unaimed: bool) -> FaultTarget<'_> {
        FaultTarget {
            method: "POST",
            path,
            shape: UploadShape::default(),
            unaimed,
        }
    }

    #[test]
    fn a_fault_answers_count_requests_then_is_gone() {
        let mut faults = RestFaults::default();
        faults.push(RestFault::rate_limited(2, 1.0));
        let api = target("/api/v10/channels/1/messages", true);
        assert!(faults.take(api, false).is_some());
        assert!(faults.take(api, true).is_none(), "not a delay");
        assert!(faults.take(api, false).is_some());
        assert!(faults.take(api, false).is_none());
    }

    #[test]
    fn an_unaimed_fault_skips_the_identify_queue() {
        let mut faults = RestFaults::default();
        faults.push(RestFault::rate_limited(1, 1.0));
        assert!(faults.take(target("/queue", false), false).is_none());
        assert!(faults
            .take(target("/api/v10/gateway/bot", true), false)
            .is_some());
    }
}
