//! Application, not library API: terminal bar charts and the units they print, as pure functions
//! from numbers to text, so `smolcord status` and the demo's report draw the
//! same way and tests can check every line.
//!
//! Two character sets: [`Charset::Unicode`] draws bars with eighth blocks
//! (`█▍`) and prints `µs`, `≤`, `−`; [`Charset::Ascii`] uses only ASCII (`#`,
//! `us`, `<=`), for logs, pipes and terminals that are not UTF-8.
//! [`Charset::detect`] picks one the way most command-line tools do.
//!
//! ```
//! use smolcord_app::chart::{bars, Bar, Charset};
//! let rows = [Bar::new("fast", 30), Bar::new("slow", 10)];
//! let text = bars(&rows, 40, Charset::Ascii);
//! assert_eq!(text, concat!(
//!     "    fast |################### 30   75.0%\n",
//!     "    slow |######              10   25.0%\n",
//! ));
//! ```

use std::fmt::Write as _;
use std::time::Duration;

/// Set `SMOLCORD_ASCII=1` to force plain ASCII output.
pub const FORCE_ASCII_ENV: &str = "SMOLCORD_ASCII";

/// Which characters the output may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charset {
    /// Box-drawing blocks and typographic symbols (UTF-8).
    Unicode,
    /// Plain 7-bit ASCII.
    Ascii,
}

impl Charset {
    /// Unicode only when stdout is a terminal and the locale says UTF-8
    /// (the first of `LC_ALL`, `LC_CTYPE`, `LANG` that is set and not
    /// empty, as POSIX orders them), and `SMOLCORD_ASCII` does not force
    /// ASCII. A pipe or a file gets ASCII: it usually ends up in a log or a
    /// script that should not have to guess the encoding.
    pub fn detect(stdout_is_terminal: bool, env: impl Fn(&str) -> Option<String>) -> Charset {
        let forced = env(FORCE_ASCII_ENV).is_some_and(|v| !v.is_empty() && v != "0");
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
            .into_iter()
            .find_map(|name| env(name).filter(|value| !value.is_empty()))
            .unwrap_or_default()
            .to_ascii_lowercase();
        let utf8 = locale.contains("utf-8") || locale.contains("utf8");
        if stdout_is_terminal && utf8 && !forced {
            Charset::Unicode
        } else {
            Charset::Ascii
        }
    }

    /// [`Charset::detect`] for this process's stdout and environment.
    pub fn for_stdout() -> Charset {
        use std::io::IsTerminal as _;
        Charset::detect(std::io::stdout().is_terminal(), |name| {
            std::env::var(name).ok()
        })
    }

    /// "at most".
    pub fn le(self) -> &'static str {
        self.pick("≤", "<=")
    }

    /// A dash between a title and what it says.
    pub fn dash(self) -> &'static str {
        self.pick("—", "-")
    }

    /// A minus sign.
    pub fn minus(self) -> &'static str {
        self.pick("−", "-")
    }

    /// An arrow ("from → to").
    pub fn arrow(self) -> &'static str {
        self.pick("→", "->")
    }

    /// `text` as this charset can show it: non-ASCII characters become `?`
    /// in ASCII (user names come from Discord and may hold anything).
    pub fn clean(self, text: &str) -> String {
        match self {
            Charset::Unicode => text.chars().filter(|c| !c.is_control()).collect(),
            Charset::Ascii => text
                .chars()
                .filter(|c| !c.is_control())
                .map(|c| if c.is_ascii() { c } else { '?' })
                .collect(),
        }
    }

    fn pick(self, unicode: &'static str, ascii: &'static str) -> &'static str {
        match self {
            Charset::Unicode => unicode,
            Charset::Ascii => ascii,
        }
    }
}

/// One bar: a label and a count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bar {
    /// Shown right-aligned before the bar.
    pub label: String,
    /// The count the bar's length shows.
    pub value: u64,
}

impl Bar {
    /// A bar labelled `label`.
    pub fn new(label: impl Into<String>, value: u64) -> Bar {
        Bar {
            label: label.into(),
            value,
        }
    }
}

/// Indent of every chart line.
const INDENT: &str = "    ";
/// The narrowest bar area drawn, whatever `width` says.
const MIN_BAR_CELLS: usize = 8;
/// Unicode partial blocks, by eighths (index 1..=7).
const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];

/// Horizontal bars, one line per row, each at most `width` columns:
/// `    label |bar  count  share%`. Bars are scaled to the largest value; a
/// row with any count at all shows at least a sliver (`▏`, or `.` in
/// ASCII), so a single outlier in ten thousand beats stays visible.
pub fn bars(rows: &[Bar], width: usize, charset: Charset) -> String {
    let label_width = rows
        .iter()
        .map(|row| row.label.chars().count())
        .max()
        .unwrap_or(0);
    let total: u64 = rows.iter().map(|row| row.value).sum();
    let max = rows.iter().map(|row| row.value).max().unwrap_or(0);
    let count_width = max.to_string().len();
    // indent, label, " |", bar, " ", count, "  ", "100.0%"
    let fixed = INDENT.len() + label_width + 2 + 1 + count_width + 2 + 6;
    let cells = width.saturating_sub(fixed).max(MIN_BAR_CELLS);
    let separator = charset.pick("│", "|");
    let mut out = String::new();
    for row in rows {
        let _ = writeln!(
            out,
            "{INDENT}{:>label_width$} {separator}{} {:>count_width$}  {:>6}",
            row.label,
            bar(row.value, max, cells, charset),
            row.value,
            share(row.value, total),
        );
    }
    out
}

/// A bar `cells` wide (padded with spaces) for `value` out of `max`.
fn bar(value: u64, max: u64, cells: usize, charset: Charset) -> String {
    let mut out = String::with_capacity(cells * 3);
    let fraction = if max == 0 {
        0.0
    } else {
        value as f64 / max as f64
    };
    let drawn = match charset {
        Charset::Unicode => {
            let mut eighths = (fraction * (cells * 8) as f64).round() as usize;
            if value > 0 && eighths == 0 {
                eighths = 1;
            }
            out.extend(std::iter::repeat_n('█', eighths / 8));
            if eighths % 8 > 0 {
                out.push(EIGHTHS[eighths % 8]);
            }
            eighths.div_ceil(8)
        }
        Charset::Ascii => {
            let full = (fraction * cells as f64).round() as usize;
            if value > 0 && full == 0 {
                out.push('.');
                1
            } else {
                out.extend(std::iter::repeat_n('#', full));
                full
            }
        }
    };
    out.extend(std::iter::repeat_n(' ', cells.saturating_sub(drawn)));
    out
}

/// `value` as a share of `total`; tiny but non-zero shares say so.
fn share(value: u64, total: u64) -> String {
    if total == 0 {
        return "-".to_owned();
    }
    let percent = value as f64 * 100.0 / total as f64;
    if value > 0 && percent < 0.1 {
        "<0.1%".to_owned()
    } else {
        format!("{percent:.1}%")
    }
}

/// A duration in the largest unit that keeps it readable: `850 µs`,
/// `12.4 ms`, `3.2 s`.
pub fn duration(value: Duration, charset: Charset) -> String {
    let us = value.as_secs_f64() * 1e6;
    let micro = charset.pick("µs", "us");
    let trim = |n: f64, unit: &str| {
        let text = if n >= 100.0 || n.fract() == 0.0 {
            format!("{n:.0}")
        } else if n >= 10.0 {
            format!("{n:.1}")
        } else {
            format!("{n:.2}")
        };
        // `1.50` reads as `1.5`; `2.00` never happens (fract() == 0 above).
        let text = if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text
        };
        format!("{text} {unit}")
    };
    if us < 1000.0 {
        trim(us, micro)
    } else if us < 1e6 {
        trim(us / 1e3, "ms")
    } else {
        trim(us / 1e6, "s")
    }
}

/// A duration given in milliseconds (as the status file has them).
pub fn millis(ms: f64, charset: Charset) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "-".to_owned();
    }
    duration(Duration::from_secs_f64(ms / 1000.0), charset)
}

/// A span of wall time, coarse: `12.3 s`, `4m 05s`, `3h 12m`, `2d 04h`.
pub fn span(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{:.1} s", ms as f64 / 1000.0),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        3600..86400 => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {:02}h", secs / 86400, secs % 86400 / 3600),
    }
}

/// Cuts `text` to at most `max` characters, marking the cut with `…`
/// (`...` in ASCII).
pub fn fit(text: &str, max: usize, charset: Charset) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let ellipsis = charset.pick("…", "...");
    let keep = max.saturating_sub(ellipsis.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(ellipsis);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn unicode_only_on_a_utf8_terminal() {
        let utf8 = [("LANG", "en_US.UTF-8")];
        assert_eq!(Charset::detect(true, env(&utf8)), Charset::Unicode);
        assert_eq!(Charset::detect(false, env(&utf8)), Charset::Ascii);
        assert_eq!(Charset::detect(true, env(&[])), Charset::Ascii);
        assert_eq!(Charset::detect(true, env(&[("LANG", "C")])), Charset::Ascii);
        // LC_ALL wins over LANG, an empty one does not count.
        let c_all = [("LC_ALL", "C"), ("LANG", "en_US.UTF-8")];
        assert_eq!(Charset::detect(true, env(&c_all)), Charset::Ascii);
        let empty_all = [("LC_ALL", ""), ("LC_CTYPE", "de_DE.utf8")];
        assert_eq!(Charset::detect(true, env(&empty_all)), Charset::Unicode);
        let forced = [("LANG", "en_US.UTF-8"), (FORCE_ASCII_ENV, "1")];
        assert_eq!(Charset::detect(true, env(&forced)), Charset::Ascii);
        let not_forced = [("LANG", "en_US.UTF-8"), (FORCE_ASCII_ENV, "0")];
        assert_eq!(Charset::detect(true, env(&not_forced)), Charset::Unicode);
    }

    #[test]
    fn unicode_bars_use_eighths_and_keep_outliers_visible() {
        let rows = [
            Bar::new("a", 10_000),
            Bar::new("b", 5_000),
            Bar::new("c", 1),
            Bar::new("d", 0),
        ];
        let text = bars(&rows, 80, Charset::Unicode);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        for line in &lines {
            assert_eq!(line.chars().count(), 80, "{line:?}");
        }
        // 80 - (4 + 1 + 2 + 1 + 5 + 2 + 6) = 59 cells.
        assert!(lines[0].contains(&"█".repeat(59)), "{text}");
        assert!(
            lines[1].contains(&format!("│{}▌ ", "█".repeat(29))),
            "{text}"
        );
        assert!(lines[2].contains("│▏ "), "{text}");
        assert!(lines[2].ends_with("      1   <0.1%"), "{text}");
        assert!(lines[3].contains(&format!("│{}", " ".repeat(59))), "{text}");
        assert!(lines[3].ends_with("      0    0.0%"), "{text}");
    }

    #[test]
    fn ascii_bars_are_plain_and_fit() {
        let rows = [Bar::new("<= 200 us", 98), Bar::new("<= 5 ms", 1)];
        let text = bars(&rows, 80, Charset::Ascii);
        assert!(text.is_ascii());
        let lines: Vec<&str> = text.lines().collect();
        // 80 - (4 + 9 + 2 + 1 + 2 + 2 + 6) = 54 cells.
        assert_eq!(
            lines[0],
            format!("    <= 200 us |{} 98   99.0%", "#".repeat(54))
        );
        assert_eq!(
            lines[1],
            format!("      <= 5 ms |#{}  1    1.0%", " ".repeat(53))
        );
    }

    #[test]
    fn a_narrow_width_still_draws_a_minimal_bar() {
        let text = bars(&[Bar::new("x", 3)], 10, Charset::Ascii);
        assert_eq!(text, format!("    x |{} 3  100.0%\n", "#".repeat(8)));
        assert_eq!(bars(&[], 80, Charset::Unicode), "");
    }

    #[test]
    fn durations_read_naturally() {
        let u = Charset::Unicode;
        assert_eq!(duration(Duration::from_micros(10), u), "10 µs");
        assert_eq!(duration(Duration::from_micros(10), Charset::Ascii), "10 us");
        assert_eq!(duration(Duration::from_micros(1500), u), "1.5 ms");
        assert_eq!(duration(Duration::from_micros(12_345), u), "12.3 ms");
        assert_eq!(duration(Duration::from_millis(200), u), "200 ms");
        assert_eq!(duration(Duration::from_secs(50), u), "50 s");
        assert_eq!(millis(0.42, u), "420 µs");
        assert_eq!(millis(41.25, u), "41.2 ms");
        assert_eq!(millis(f64::NAN, u), "-");
        assert_eq!(span(12_345), "12.3 s");
        assert_eq!(span(245_000), "4m 05s");
        assert_eq!(span(3 * 3_600_000 + 12 * 60_000), "3h 12m");
        assert_eq!(span(2 * 86_400_000 + 4 * 3_600_000), "2d 04h");
    }

    #[test]
    fn text_is_cleaned_and_fitted() {
        assert_eq!(Charset::Ascii.clean("bøt\u{7}"), "b?t");
        assert_eq!(Charset::Unicode.clean("bøt\u{7}"), "bøt");
        assert_eq!(fit("abcdef", 4, Charset::Ascii), "a...");
        assert_eq!(fit("abcdef", 4, Charset::Unicode), "abc…");
        assert_eq!(fit("abc", 4, Charset::Unicode), "abc");
    }
}
