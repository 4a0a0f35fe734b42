//! Progress of long work (verify, copy, import) on standard error: a bar on a terminal;
//! with `--progress` and no terminal (a log, CI), a plain line every second or so;
//! otherwise nothing. Never on standard output, which stays the command's answer.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the plain lines are written.
const LINE_EVERY: Duration = Duration::from_secs(1);

/// One phase's progress: `label` `done`/`total` `unit`.
pub(crate) struct Progress {
    label: String,
    unit: &'static str,
    shown: Shown,
}

enum Shown {
    Nothing,
    Bar(indicatif::ProgressBar),
    Lines {
        last: Option<Instant>,
        done: u64,
        total: u64,
    },
}

impl Progress {
    /// Progress for a phase counting `unit` (`rows`, `bytes`): a bar when standard error
    /// is a terminal, lines when `forced`, else nothing (and never with `json`, whose
    /// readers want only the answer).
    pub(crate) fn new(label: &str, unit: &'static str, forced: bool, json: bool) -> Progress {
        let shown = if json && !forced {
            Shown::Nothing
        } else if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(0);
            let template = format!("{label} {{bar:40}} {{pos}}/{{len}} {unit} ({{eta}})");
            bar.set_style(
                indicatif::ProgressStyle::with_template(&template)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            Shown::Bar(bar)
        } else if forced {
            Shown::Lines {
                last: None,
                done: 0,
                total: 0,
            }
        } else {
            Shown::Nothing
        };
        Progress {
            label: label.to_owned(),
            unit,
            shown,
        }
    }

    /// `done` of `total` so far.
    pub(crate) fn update(&mut self, done: u64, total: u64) {
        match &mut self.shown {
            Shown::Nothing => {}
            Shown::Bar(bar) => {
                bar.set_length(total);
                bar.set_position(done);
            }
            Shown::Lines {
                last,
                done: d,
                total: t,
            } => {
                (*d, *t) = (done, total);
                if last.is_none_or(|at| at.elapsed() >= LINE_EVERY) {
                    *last = Some(Instant::now());
                    line(&self.label, done, total, self.unit);
                }
            }
        }
    }

    /// The phase is over: the bar goes; a line says where it ended.
    pub(crate) fn finish(self) {
        match self.shown {
            Shown::Nothing => {}
            Shown::Bar(bar) => bar.finish_and_clear(),
            Shown::Lines { done, total, .. } => line(&self.label, done, total, self.unit),
        }
    }
}

fn line(label: &str, done: u64, total: u64, unit: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{label}: {done}/{total} {unit}");
}
