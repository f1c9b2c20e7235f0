//! Progress reporting without terminal code: the library says what it does through [`say`] (a line) and
//! [`Stages`] (a counter per stage, seconds per finished stage). Every line is a `tracing` `info` event;
//! a program that wants them on a terminal installs a [`Progress`] sink with [`set_sink`] (the `kgrag`
//! binary draws bars with it). Without a sink nothing is printed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kgrag_hipporag::IndexProgress;

static QUIET: AtomicBool = AtomicBool::new(false);
static SINK: RwLock<Option<Arc<dyn Progress>>> = RwLock::new(None);

/// Where progress goes: lines for the user and counters for long stages.
pub trait Progress: Send + Sync {
    /// One line for the user.
    fn line(&self, line: &str);

    /// A counter of `total` items named `name` (a bar on a terminal).
    fn counter(&self, total: u64, name: &str) -> Box<dyn Counter>;
}

/// A counter of a stage's items. Dropped when the stage ends.
pub trait Counter: Send + Sync {
    /// `n` more items done.
    fn inc(&self, n: u64);
}

/// A counter that shows nothing.
struct Hidden;

impl Counter for Hidden {
    fn inc(&self, _n: u64) {}
}

/// Installs the process's progress sink (replacing any earlier one).
pub fn set_sink(sink: Arc<dyn Progress>) {
    if let Ok(mut s) = SINK.write() {
        *s = Some(sink);
    }
}

fn sink() -> Option<Arc<dyn Progress>> {
    SINK.read().ok().and_then(|s| s.clone())
}

/// Silences the lines and counters (`--quiet`); `tracing` still gets the lines.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `--quiet` is in effect.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// One line for the user: an `info` event, and the sink's line unless quiet.
pub fn say(line: &str) {
    tracing::info!("{line}");
    if !quiet() {
        if let Some(s) = sink() {
            s.line(line);
        }
    }
}

/// A counter of `total` items for stage `name` (shown only when `show`, a sink is installed and not
/// quiet).
pub fn counter(show: bool, total: usize, name: &str) -> Box<dyn Counter> {
    match sink() {
        Some(s) if show && !quiet() => s.counter(total as u64, name),
        _ => Box::new(Hidden),
    }
}

/// Progress of one stage at a time: a counter while it runs, then a one-line summary; seconds per stage.
pub struct Stages {
    show: bool,
    print: bool,
    current: Option<Box<dyn Counter>>,
    secs: BTreeMap<String, f64>,
    order: Vec<String>,
}

impl Stages {
    /// `show`: counters (bars); `print`: a line per finished stage.
    pub fn new(show: bool, print: bool) -> Self {
        Self {
            show,
            print,
            current: None,
            secs: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    /// A counter of `total` items (hidden when counters are off).
    pub fn bar(&self, total: usize, name: &str) -> Box<dyn Counter> {
        counter(self.show, total, name)
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
        self.current = Some(self.bar(total, stage));
    }

    fn advance(&mut self, n: usize) {
        if let Some(b) = &self.current {
            b.inc(n as u64);
        }
    }

    fn finish(&mut self, stage: &str, secs: f64) {
        self.current = None;
        self.record(stage, secs);
    }
}
