//! The CDN misbehaving, as the control API or a test asks: a redirect to
//! another host (a download client must check where a redirect leads
//! before it follows it) and a bandwidth (a slow CDN, for memory and
//! heartbeat measurements while a download streams). Served by
//! `rest/cdn.rs`; set with [`Simulator::cdn_fault`](crate::Simulator::cdn_fault)
//! or `POST /control/cdn` (`control/cdn.rs`).

/// How the simulator's CDN (`/attachments/`) misbehaves.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CdnFault {
    /// The next `count` attachment requests are answered `302 Found` with
    /// `Location: to` (Discord's CDN could send a client anywhere).
    Redirect {
        /// Where to: any URL (the client decides whether to follow it).
        to: String,
        /// How many requests get it.
        count: u32,
    },
    /// Attachment bodies go out at most this fast (`None`: at full speed),
    /// in tenths of a second's share.
    Bandwidth {
        /// Bytes a second.
        bytes_per_sec: Option<u64>,
    },
}

/// The CDN's settings, one part of the simulator's state.
#[derive(Debug, Default)]
pub(crate) struct Cdn {
    redirect: Option<(String, u32)>,
    bytes_per_sec: Option<u64>,
}

impl Cdn {
    pub(crate) fn apply(&mut self, fault: CdnFault) {
        match fault {
            CdnFault::Redirect { to, count } => {
                self.redirect = (count > 0).then_some((to, count));
            }
            CdnFault::Bandwidth { bytes_per_sec } => {
                self.bytes_per_sec = bytes_per_sec.filter(|&b| b > 0);
            }
        }
    }

    /// The redirect this request gets, if one is pending (counted down).
    pub(crate) fn take_redirect(&mut self) -> Option<String> {
        let (to, left) = self.redirect.as_mut()?;
        let to = to.clone();
        *left -= 1;
        if *left == 0 {
            self.redirect = None;
        }
        Some(to)
    }

    /// The pending redirect and how many requests it has left.
    pub(crate) fn redirect(&self) -> Option<(&str, u32)> {
        self.redirect.as_ref().map(|(to, n)| (to.as_str(), *n))
    }

    /// The bandwidth attachments go out at, if limited.
    pub(crate) fn bytes_per_sec(&self) -> Option<u64> {
        self.bytes_per_sec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_counts_down_and_a_zero_bandwidth_is_full_speed() {
        let mut cdn = Cdn::default();
        cdn.apply(CdnFault::Redirect {
            to: "http://x/".into(),
            count: 2,
        });
        assert_eq!(cdn.take_redirect().as_deref(), Some("http://x/"));
        assert_eq!(cdn.redirect(), Some(("http://x/", 1)));
        assert!(cdn.take_redirect().is_some());
        assert_eq!(cdn.take_redirect(), None);
        cdn.apply(CdnFault::Bandwidth {
            bytes_per_sec: Some(0),
        });
        assert_eq!(cdn.bytes_per_sec(), None);
    }
}
