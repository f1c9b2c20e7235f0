//! Progress on the terminal: a bar per stage when stderr is a terminal, one line per finished stage
//! (`kgrag: <stage> <secs> s`) unless `--quiet`, and the same events through `tracing`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kgrag_hipporag::IndexProgress;

static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences the stage lines and notes on stderr (`--quiet`); `tracing` still gets them.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `--quiet` is in effect.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// One line for the user on stderr (unless quiet), and an `info` event.
pub fn say(line: &str) {
    tracing::info!("{line}");
    if !quiet() {
        eprintln!("kgrag: {line}");
    }
}

/// Progress of one stage at a time: a bar on a terminal, then a one-line summary; seconds per stage.
pub struct Stages {
    show: bool,
    print: bool,
    bar: Option<ProgressBar>,
    secs: BTreeMap<String, f64>,
    order: Vec<String>,
}

impl Stages {
    /// `show`: draw bars; `print`: a line per finished stage.
    pub fn new(show: bool, print: bool) -> Self {
        Self {
            show: show && !quiet(),
            print,
            bar: None,
            secs: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    /// A bar of `total` items (hidden when bars are off).
    pub fn bar(&self, total: usize, prefix: &str) -> ProgressBar {
        let bar = if self.show {
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        let style =
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(prefix.to_owned());
        bar.enable_steady_tick(Duration::from_millis(250));
        bar
    }

    /// Adds `secs` to `stage`.
    pub fn record(&mut self, stage: &str, secs: f64) {
        if !self.secs.contains_key(stage) {
            self.order.push(stage.to_owned());
        }
        *self.secs.entry(stage.to_owned()).or_insert(0.0) += secs;
        if self.print {
            say(&format!("{stage:<16} {secs:>9.2} s"));
        }
    }

    /// Seconds per stage, to set stages timed elsewhere.
    pub fn secs_mut(&mut self) -> &mut BTreeMap<String, f64> {
        &mut self.secs
    }

    /// Seconds per stage, sorted by stage name.
    pub fn secs(&self) -> &BTreeMap<String, f64> {
        &self.secs
    }

    /// Seconds per stage in the order they first ran.
    pub fn into_secs(self) -> Vec<(String, f64)> {
        self.order
            .iter()
            .map(|s| (s.clone(), self.secs.get(s).copied().unwrap_or(0.0)))
            .collect()
    }
}

impl IndexProgress for Stages {
    fn start(&mut self, stage: &str, total: usize) {
        self.bar = Some(self.bar(total, stage));
    }

    fn advance(&mut self, n: usize) {
        if let Some(b) = &self.bar {
            b.inc(n as u64);
        }
    }

    fn finish(&mut self, stage: &str, secs: f64) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        self.record(stage, secs);
    }
}
