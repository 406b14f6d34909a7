//! What the kernel says about a process: `/proc/PID/status` (RSS, peak RSS,
//! threads) and per-thread context switches from `/proc/PID/task/*`. Read
//! from outside, so measuring never wakes the process measured.

use std::collections::BTreeMap;
use std::io;

/// The fields of `/proc/PID/status` the report uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct Status {
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// Peak resident set size, KiB.
    pub hwm_kib: u64,
    /// Of the RSS: anonymous memory (heap, stacks), KiB; the rest is file
    /// pages (the binary, shared libraries) the kernel may share or drop.
    pub anon_kib: u64,
    /// Threads alive.
    pub threads: u64,
}

/// One thread's name and context switch counters.
#[derive(Clone, Debug, Default)]
pub struct Thread {
    /// `comm` (e.g. `smolcord`, `async-io`, `blocking-1`).
    pub name: String,
    /// Times it went to sleep by itself (each is one wake-up later).
    pub voluntary: u64,
    /// Times it was preempted.
    pub nonvoluntary: u64,
}

fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Reads `/proc/PID/status`.
pub fn status(pid: u32) -> io::Result<Status> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path)?;
    let get = |name| {
        field(&text, name).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path}: no {name} field"),
            )
        })
    };
    Ok(Status {
        rss_kib: get("VmRSS")?,
        hwm_kib: get("VmHWM")?,
        anon_kib: get("RssAnon")?,
        threads: get("Threads")?,
    })
}

/// Whether `pid` has a shared libc mapped (a dynamically linked build).
pub fn is_dynamic(pid: u32) -> io::Result<bool> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(maps.contains("/libc.so") || maps.contains("/libc-") || maps.contains("/ld-musl"))
}

/// Every live thread of `pid`, by thread id; the main thread (tid = pid)
/// is named `main` whatever the program calls itself. A thread that exits
/// between listing and reading is skipped.
pub fn threads(pid: u32) -> io::Result<BTreeMap<u32, Thread>> {
    let mut threads = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let entry = entry?;
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let dir = entry.path();
        let (Ok(status), Ok(comm)) = (
            std::fs::read_to_string(dir.join("status")),
            std::fs::read_to_string(dir.join("comm")),
        ) else {
            continue;
        };
        threads.insert(
            tid,
            Thread {
                name: if tid == pid {
                    "main".to_owned()
                } else {
                    comm.trim().to_owned()
                },
                voluntary: field(&status, "voluntary_ctxt_switches").unwrap_or(0),
                nonvoluntary: field(&status, "nonvoluntary_ctxt_switches").unwrap_or(0),
            },
        );
    }
    Ok(threads)
}

/// A thread's name with a trailing number folded (`blocking-12` →
/// `blocking-*`), so a pool reads as one entry however many threads came
/// and went.
pub fn family(name: &str) -> String {
    match name.rsplit_once('-') {
        Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{stem}-*")
        }
        _ => name.to_owned(),
    }
}

/// Thread names, with a count where several share one:
/// `async-io, blocking-* ×2, smolcord`.
pub fn thread_names(threads: &BTreeMap<u32, Thread>) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for thread in threads.values() {
        *counts.entry(family(&thread.name)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(name, n)| {
            if n == 1 {
                name.to_owned()
            } else {
                format!("{name} ×{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Context switches over a window, following threads that come and go.
///
/// [`Switches::sample`] as often as practical: a thread born and gone
/// between two samples is missed entirely, and a thread's switches after
/// the last sample that saw it are missed (blocking-pool threads linger
/// 500 ms before they exit, so a 50 ms period catches them).
#[derive(Debug, Default)]
pub struct Switches {
    first: BTreeMap<u32, Thread>,
    last: BTreeMap<u32, Thread>,
    /// Threads alive at the first sample.
    initial: std::collections::BTreeSet<u32>,
    /// Threads gone by a later sample.
    ended: std::collections::BTreeSet<u32>,
    samples: u64,
}

impl Switches {
    /// Records the threads' counters now.
    pub fn sample(&mut self, pid: u32) -> io::Result<()> {
        let now = threads(pid)?;
        let first_sample = self.samples == 0;
        self.samples += 1;
        for tid in self.last.keys() {
            if !now.contains_key(tid) {
                self.ended.insert(*tid);
            }
        }
        for (tid, thread) in now {
            if first_sample {
                self.initial.insert(tid);
            }
            // A thread first seen mid-window started at zero.
            self.first.entry(tid).or_insert_with(|| {
                if first_sample {
                    thread.clone()
                } else {
                    Thread {
                        name: thread.name.clone(),
                        ..Thread::default()
                    }
                }
            });
            self.last.insert(tid, thread);
        }
        Ok(())
    }

    /// Voluntary switches per thread [`family`] over the window.
    pub fn voluntary_by_name(&self) -> BTreeMap<String, u64> {
        let mut by_name = BTreeMap::new();
        for (tid, last) in &self.last {
            let first = self.first.get(tid).map_or(0, |t| t.voluntary);
            *by_name.entry(family(&last.name)).or_default() +=
                last.voluntary - first.min(last.voluntary);
        }
        by_name
    }

    /// Voluntary switches (wake-ups) over the window, all threads.
    pub fn voluntary(&self) -> u64 {
        self.voluntary_by_name().values().sum()
    }

    /// Involuntary switches over the window, all threads.
    pub fn nonvoluntary(&self) -> u64 {
        self.last
            .iter()
            .map(|(tid, last)| {
                last.nonvoluntary
                    - self
                        .first
                        .get(tid)
                        .map_or(0, |t| t.nonvoluntary)
                        .min(last.nonvoluntary)
            })
            .sum()
    }

    /// Distinct threads sampled during the window.
    pub fn threads_seen(&self) -> usize {
        self.last.len()
    }

    /// Threads that started and ended inside the window.
    pub fn transient(&self) -> usize {
        self.ended
            .iter()
            .filter(|tid| !self.initial.contains(tid))
            .count()
    }
}

/// Samples `pid`'s threads every `every` for `window` (at least once at
/// each end); the counters and the window actually covered.
pub fn sample_window(
    pid: u32,
    window: std::time::Duration,
    every: std::time::Duration,
) -> io::Result<(Switches, std::time::Duration)> {
    let mut switches = Switches::default();
    let started = std::time::Instant::now();
    loop {
        switches.sample(pid)?;
        if started.elapsed() >= window {
            return Ok((switches, started.elapsed()));
        }
        std::thread::sleep(every);
    }
}
