//! The command line's progress on the terminal: every line of the library as `kgrag: <line>` on stderr,
//! and a bar per counted stage when stderr is a terminal.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kgrag::progress::{Counter, Progress};

/// Lines on stderr; bars when stderr is a terminal.
struct Terminal {
    bars: bool,
}

/// A bar, cleared when dropped.
struct Bar(ProgressBar);

impl Counter for Bar {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl Progress for Terminal {
    fn line(&self, line: &str) {
        eprintln!("kgrag: {line}");
    }

    fn counter(&self, total: u64, name: &str) -> Box<dyn Counter> {
        let bar = if self.bars {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        let style =
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(name.to_owned());
        bar.enable_steady_tick(Duration::from_millis(250));
        Box::new(Bar(bar))
    }
}

/// Installs the terminal sink for this process.
pub fn install() {
    kgrag::progress::set_sink(Arc::new(Terminal {
        bars: std::io::stderr().is_terminal(),
    }));
}
