//! Many shards on one thread.
//!
//! A [`ShardSet`] runs shards `first..=last` of `count` on the executor it
//! is polled on, each with its own connection, heartbeat and account, and
//! all of them sharing what Discord limits per bot: one identify queue (one
//! fresh session per `max_concurrency` bucket per 5 s; resumes never wait),
//! one daily identify budget, and one bounded event queue, so that the
//! memory waiting for the consumer does not grow with the shard count.
//! Events reach the consumer tagged with their shard.
//!
//! ```no_run
//! # use smolcord::{shard::{ShardConfig, ShardEvent, ShardRange, ShardSet}, token::Token, protocol::Intents};
//! # smol::block_on(async {
//! let config = ShardConfig::new(Token::new("…").unwrap(), Intents::GUILD_MESSAGES);
//! let (set, handle) = ShardSet::new(config, 0..=3, 4, |_| Default::default()).unwrap();
//! // One thread: the set runs beside its consumer on a local executor.
//! let ex = smol::LocalExecutor::new();
//! ex.spawn(set.run()).detach();
//! ex.run(async {
//!     while let Ok((shard, event)) = handle.next_event().await {
//!         if let ShardEvent::Dispatch(dispatch) = event {
//!             println!("shard {shard}: {} #{}", dispatch.name, dispatch.seq);
//!         }
//!     }
//! })
//! .await;
//! # });
//! ```

use super::counts::CountError;
use super::{
    counts, local_queue, lock, queue, IdentifyBudget, IdentifyQueue, SessionState, Shard,
    ShardConfig, ShardError, ShardEvent, ShardHandle, ShardStatus,
};
use crate::protocol::{CloseCode, Command};
use event_listener::Event;
use futures_lite::future;
use smol::channel::TrySendError;
use smol::LocalExecutor;
use std::fmt;
use std::future::Future;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::task::Poll;

/// Which shards a process runs: config `shards` (`"auto"` or `[first,
/// last, count]`), environment `SMOLCORD_SHARDS` (`auto` or
/// `FIRST-LAST/COUNT`, e.g. `0-7/16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardRange {
    /// Every shard of the count `GET /gateway/bot` recommends.
    Auto,
    /// Shards `first..=last` of `count`.
    Range {
        /// The first shard id.
        first: u32,
        /// The last shard id (inclusive).
        last: u32,
        /// The total shard count of the bot (all processes).
        count: u32,
    },
}

impl ShardRange {
    /// Shards `first..=last` of `count`, checked: ids that exist, a count
    /// and a number of shards within [`super::counts`]' caps.
    pub fn new(first: u32, last: u32, count: u32) -> Result<ShardRange, CountError> {
        counts::check_shard_count(count)?;
        if last < first {
            return Err(CountError::Backwards { first, last });
        }
        if last >= count {
            return Err(CountError::NoSuchShard { id: last, count });
        }
        counts::check_shards_per_process(first, last)?;
        Ok(ShardRange::Range { first, last, count })
    }

    /// `auto` or `FIRST-LAST/COUNT` (`0-7/16`; `3/16` is shard 3 alone).
    pub fn parse(text: &str) -> Result<ShardRange, CountError> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("auto") {
            return Ok(ShardRange::Auto);
        }
        let bad = || CountError::Unparsable {
            text: text.chars().take(40).collect(),
        };
        let (ids, count) = text.split_once('/').ok_or_else(bad)?;
        let number = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
        let (first, last) = match ids.split_once('-') {
            Some((first, last)) => (number(first)?, number(last)?),
            None => (number(ids)?, number(ids)?),
        };
        ShardRange::new(first, last, number(count)?)
    }

    /// The ids and count, with every shard of `recommended` (`GET
    /// /gateway/bot`'s `shards`) standing in for `Auto`; a recommendation
    /// past the caps of [`super::counts`] is refused, saying so.
    pub fn resolve(self, recommended: u32) -> Result<(RangeInclusive<u32>, u32), CountError> {
        match self {
            ShardRange::Auto => {
                let count = recommended.max(1);
                ShardRange::new(0, count - 1, count).map_err(|why| CountError::Recommended {
                    recommended,
                    why: Box::new(why),
                })?;
                Ok((0..=count - 1, count))
            }
            ShardRange::Range { first, last, count } => Ok((first..=last, count)),
        }
    }
}

impl<'de> serde::Deserialize<'de> for ShardRange {
    /// `"auto"` or `[first, last, count]`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ShardRange;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"auto\" or [first, last, count]")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<ShardRange, E> {
                if text == "auto" {
                    Ok(ShardRange::Auto)
                } else {
                    Err(E::custom(format!(
                        "`{text}` is not \"auto\" or [first, last, count]"
                    )))
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ShardRange, A::Error> {
                use serde::de::Error;
                let mut next = |what: &str| {
                    seq.next_element::<u32>()?.ok_or_else(|| {
                        A::Error::custom(format!("[first, last, count]: {what} is missing"))
                    })
                };
                let (first, last, count) = (next("first")?, next("last")?, next("count")?);
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::custom("[first, last, count] has three numbers"));
                }
                ShardRange::new(first, last, count).map_err(A::Error::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl fmt::Display for ShardRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardRange::Auto => f.write_str("auto"),
            ShardRange::Range { first, last, count } => write!(f, "{first}-{last}/{count}"),
        }
    }
}

/// Makes a set's first connections one after the other, in shard order (each
/// waits for the previous shard's Hello), so that the shards ask the
/// identify queue in order and the buckets start in order.
pub(crate) struct StartOrder {
    next: Mutex<usize>,
    advanced: Event,
}

impl StartOrder {
    fn new() -> StartOrder {
        StartOrder {
            next: Mutex::new(0),
            advanced: Event::new(),
        }
    }

    /// Waits until the shards before position `index` have connected.
    pub(crate) async fn wait_turn(&self, index: usize) {
        loop {
            let listener = self.advanced.listen();
            if *lock(&self.next) >= index {
                return;
            }
            listener.await;
        }
    }

    /// The shard at `index` has connected (or failed to): the next may go.
    pub(crate) fn pass(&self, index: usize) {
        let mut next = lock(&self.next);
        if *next <= index {
            *next = index + 1;
            self.advanced.notify(usize::MAX);
        }
    }
}

/// The drivers of a set of shards. Run them with [`ShardSet::run`].
pub struct ShardSet {
    shards: Vec<Shard>,
}

impl fmt::Debug for ShardSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardSet")
            .field("shards", &self.shards)
            .finish()
    }
}

/// The consumer's side of a [`ShardSet`] (or of one shard: `From<ShardHandle>`).
#[derive(Clone)]
pub struct ShardSetHandle {
    events: queue::Consumer,
    shards: Vec<ShardHandle>,
}

impl ShardSet {
    /// Shards `ids` of `count`, configured like `base` (its `shard` and
    /// `state` are replaced per shard; `state_of(id)` gives each shard's
    /// saved state). The identify budget is the union of the saved ones.
    ///
    /// Refuses (naming the id and the count) ids that do not exist — `ids`
    /// empty, `count` 0, or an id not below `count` — as [`ShardRange::new`]
    /// does: Discord would close every such shard with 4010, and the set
    /// with it.
    pub fn new(
        base: ShardConfig,
        ids: RangeInclusive<u32>,
        count: u32,
        mut state_of: impl FnMut(u32) -> SessionState,
    ) -> Result<(ShardSet, ShardSetHandle), CountError> {
        if ids.is_empty() {
            return Err(CountError::EmptyRange {
                first: *ids.start(),
                last: *ids.end(),
            });
        }
        ShardRange::new(*ids.start(), *ids.end(), count)?;
        let states: Vec<(u32, SessionState)> = ids.map(|id| (id, state_of(id))).collect();
        let mut history = IdentifyBudget::default();
        for (_, state) in &states {
            history.merge(&state.identifies);
        }
        let identify_queue: Arc<dyn IdentifyQueue> = match &base.identify_queue {
            Some(queue) => queue.clone(),
            None => Arc::new(local_queue(&base, &history)),
        };
        let budget = Arc::new(Mutex::new(history.clone()));
        let first = states.first().map_or(0, |(id, _)| *id);
        let (producer, consumer) = queue::queue(base.queue, first);
        let start_order = Arc::new(StartOrder::new());
        let mut shards = Vec::with_capacity(states.len());
        let mut handles = Vec::with_capacity(states.len());
        for (index, (id, mut state)) in states.into_iter().enumerate() {
            let mut config = base.clone();
            config.shard = [id, count];
            state.identifies = history.clone();
            config.state = state;
            let (mut shard, handle) = Shard::with_parts(
                config,
                budget.clone(),
                identify_queue.clone(),
                producer.for_shard(id),
                consumer.clone(),
            );
            shard.start = Some((start_order.clone(), index));
            shards.push(shard);
            handles.push(handle);
        }
        drop(producer);
        Ok((
            ShardSet { shards },
            ShardSetHandle {
                events: consumer,
                shards: handles,
            },
        ))
    }

    /// Runs every shard until all are shut down (`Ok`), or until one is
    /// refused for good (a bad token, intents or shard count concern them
    /// all): then the others are shut down too and the error returned.
    pub async fn run(self) -> Result<(), ShardError> {
        let handles: Vec<_> = self
            .shards
            .iter()
            .map(|shard| shard.shutdown_sender())
            .collect();
        let ex = LocalExecutor::new();
        let (done_tx, done_rx) = smol::channel::bounded(self.shards.len().max(1));
        for shard in self.shards {
            let done = done_tx.clone();
            ex.spawn(async move {
                let _ = done.send(shard.run().await).await;
            })
            .detach();
        }
        drop(done_tx);
        ex.run(async {
            let mut fatal = None;
            while let Ok(result) = done_rx.recv().await {
                if let Err(error) = result {
                    if fatal.is_none() {
                        for shutdown in &handles {
                            let _ = shutdown.try_send(());
                        }
                    }
                    fatal.get_or_insert(error);
                }
            }
            fatal.map_or(Ok(()), Err)
        })
        .await
    }
}

impl ShardSetHandle {
    /// The next event of any shard, with its shard id, in each shard's
    /// order. `Err(ShardError::Fatal)` once if a shard was refused for good;
    /// `Err(ShardError::Stopped)` after every driver ended.
    pub async fn next_event(&self) -> Result<(u32, ShardEvent), ShardError> {
        match self.events.recv().await {
            Some((shard, Ok(event))) => {
                if let (ShardEvent::Dispatch(dispatch), Some(handle)) = (&event, self.shard(shard))
                {
                    handle.took(dispatch);
                }
                Ok((shard, event))
            }
            Some((_, Err(error))) => Err(error),
            None => Err(ShardError::Stopped),
        }
    }

    /// Dispatches waiting for [`ShardSetHandle::next_event`] (all shards).
    pub fn queued_events(&self) -> usize {
        self.events.queued()
    }

    /// The handle of shard `id`, if it is in the set (to send it commands).
    pub fn shard(&self, id: u32) -> Option<&ShardHandle> {
        self.shards.iter().find(|handle| handle.id == id)
    }

    /// Every shard's handle, in id order.
    pub fn shards(&self) -> &[ShardHandle] {
        &self.shards
    }

    /// Every shard's status, in id order.
    pub fn statuses(&self) -> Vec<ShardStatus> {
        self.shards.iter().map(ShardHandle::status).collect()
    }

    /// Sends `command` to every shard (a presence update, say). A shard
    /// whose command queue is full (it is not connected, or sends at the
    /// 120-per-60 s limit) holds up only its own copy: every other shard
    /// gets it at once. Returns once every shard has it queued (bound the
    /// call with a timeout if a shard may stay away long);
    /// `Err(ShardError::Stopped)` if a shard had stopped, after the others
    /// got it.
    pub async fn send_all(&self, command: Command) -> Result<(), ShardError> {
        let json = command.to_json().map_err(ShardError::Command)?;
        let mut stopped = false;
        let mut full = Vec::new();
        for handle in &self.shards {
            match handle.commands.try_send(json.clone()) {
                Ok(()) => {}
                Err(TrySendError::Full(json)) => full.push(Box::pin(handle.commands.send(json))),
                Err(TrySendError::Closed(_)) => stopped = true,
            }
        }
        // The full queues are waited on side by side, none behind another.
        future::poll_fn(|cx| {
            full.retain_mut(|send| match send.as_mut().poll(cx) {
                Poll::Ready(sent) => {
                    stopped |= sent.is_err();
                    false
                }
                Poll::Pending => true,
            });
            if full.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        if stopped {
            Err(ShardError::Stopped)
        } else {
            Ok(())
        }
    }

    /// Asks every shard to close (resumably) and stop.
    pub fn shutdown(&self) {
        self.close(CloseCode::RESUME);
    }

    /// Asks every shard to close with `code` and stop
    /// ([`ShardHandle::close`]: 1000 ends the sessions).
    pub fn close(&self, code: CloseCode) {
        for handle in &self.shards {
            handle.close(code);
        }
    }
}

impl From<ShardHandle> for ShardSetHandle {
    /// A set of one.
    fn from(handle: ShardHandle) -> ShardSetHandle {
        ShardSetHandle {
            events: handle.events.clone(),
            shards: vec![handle],
        }
    }
}

impl fmt::Debug for ShardSetHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u32> = self.shards.iter().map(|h| h.id).collect();
        f.debug_struct("ShardSetHandle")
            .field("shards", &ids)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Intents;
    use crate::token::Token;

    #[test]
    fn a_set_refuses_shards_that_do_not_exist() {
        let config = ShardConfig::new(Token::new("t").unwrap(), Intents::GUILD_MESSAGES);
        let set = |ids: RangeInclusive<u32>, count| {
            ShardSet::new(config.clone(), ids, count, |_| SessionState::default())
        };
        for (ids, count, why) in [
            (
                0..=4,
                4,
                "shard 4 does not exist when there are 4 (ids are 0..=3)",
            ),
            (6..=9, 8, "shard 9 does not exist when there are 8"),
            (0..=0, 0, "the shard count must be at least 1"),
            (
                RangeInclusive::new(5, 4),
                8,
                "the shard range 5..=4 is empty",
            ),
        ] {
            match set(ids.clone(), count) {
                Ok(_) => panic!("{ids:?} of {count} accepted"),
                Err(err) => assert!(err.to_string().contains(why), "{ids:?} of {count}: {err}"),
            }
        }
        // Counts past the caps are refused before anything is allocated
        // (a million shards took 1.5 GiB; 0..=u32::MAX - 1 aborted).
        for (ids, count, why) in [
            (0..=999_999, 1_000_000, "1000000 is more than 65536"),
            (0..=u32::MAX - 1, u32::MAX, "4294967295 is more than 65536"),
            (0..=1024, 65_536, "1025 shards for one process"),
        ] {
            match set(ids.clone(), count) {
                Ok(_) => panic!("{ids:?} of {count} accepted"),
                Err(err) => assert!(err.to_string().contains(why), "{ids:?} of {count}: {err}"),
            }
        }
        let (_, handle) = set(4..=7, 8).expect("shards 4-7 of 8 exist");
        let ids: Vec<[u32; 2]> = handle.statuses().iter().map(|s| s.shard).collect();
        assert_eq!(ids, [[4, 8], [5, 8], [6, 8], [7, 8]]);
        // The per-event lookup by id (a field, not a copy of the status).
        for id in 4..=7 {
            let found = handle.shard(id).map(|h| h.status().shard);
            assert_eq!(found, Some([id, 8]));
        }
        assert!(handle.shard(3).is_none() && handle.shard(8).is_none());
        assert_eq!(
            format!("{handle:?}"),
            "ShardSetHandle { shards: [4, 5, 6, 7] }"
        );
    }

    #[test]
    fn ranges_parse_and_are_checked() {
        assert_eq!(ShardRange::parse("auto"), Ok(ShardRange::Auto));
        assert_eq!(
            ShardRange::parse("0-7/16"),
            Ok(ShardRange::Range {
                first: 0,
                last: 7,
                count: 16
            })
        );
        assert_eq!(
            ShardRange::parse(" 3/4 "),
            Ok(ShardRange::Range {
                first: 3,
                last: 3,
                count: 4
            })
        );
        for (text, why) in [
            ("7-0/16", "comes before"),
            ("0-16/16", "does not exist"),
            ("0-0/0", "at least 1"),
            ("0-7", "not `auto`"),
            ("a-b/c", "not `auto`"),
        ] {
            let err = ShardRange::parse(text).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
        assert_eq!(ShardRange::Auto.resolve(3), Ok((0..=2, 3)));
        // GET /gateway/bot recommending 100 000 shards (1.5 GiB at once).
        let err = ShardRange::Auto.resolve(100_000).unwrap_err().to_string();
        assert!(
            err.contains("GET /gateway/bot recommends 100000 shards")
                && err.contains("more than 65536"),
            "{err}"
        );
        let err = ShardRange::Auto.resolve(2000).unwrap_err();
        assert!(err.to_string().contains("runs at most 1024"), "{err}");
        let json = |text: &str| serde_json::from_str::<ShardRange>(text);
        assert_eq!(json("\"auto\"").unwrap(), ShardRange::Auto);
        assert_eq!(
            json("[0, 3, 8]").unwrap(),
            ShardRange::new(0, 3, 8).unwrap()
        );
        for (text, why) in [
            ("[3, 0, 8]", "comes before"),
            ("[0, 8, 8]", "does not exist"),
            ("[0, 0, 0]", "at least 1"),
            ("[0, 1]", "count is missing"),
            ("\"all\"", "not \"auto\""),
            ("5", "\"auto\" or [first, last, count]"),
        ] {
            let err = json(text).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
        assert_eq!(ShardRange::parse("2-3/8").unwrap().to_string(), "2-3/8");
    }
}
