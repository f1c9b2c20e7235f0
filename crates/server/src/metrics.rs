//! Prometheus metrics in the text exposition format: requests and errors by endpoint and status, latency
//! histograms by endpoint and strategy, requests in flight, and per index: whether it is loaded, its
//! generation and documents, its loads, load failures and evictions.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    total: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, bound) in BUCKETS.iter().enumerate() {
            if secs <= *bound {
                self.counts[i] += 1;
            }
        }
        self.sum += secs;
        self.total += 1;
    }
}

/// The server's counters.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<(String, String), Histogram>>,
    in_flight: AtomicI64,
    rejected_busy: AtomicU64,
    timeouts: AtomicU64,
    changes_running: AtomicI64,
    changes: Mutex<BTreeMap<&'static str, u64>>,
    /// Per index: loads, load failures, evictions, seconds of the last load.
    indexes: Mutex<BTreeMap<String, IndexCounts>>,
    key_reloads: Mutex<BTreeMap<&'static str, u64>>,
}

#[derive(Default, Clone)]
struct IndexCounts {
    loads: u64,
    failures: u64,
    evictions: u64,
    last_load_secs: f64,
}

/// A metric family of one value per index: its name, its help and the value of an index.
type Family<T> = (&'static str, &'static str, fn(&T) -> String);

/// What `/metrics` says of one loaded index.
pub struct LoadedIndex {
    /// Its name.
    pub name: String,
    /// The generation it answers from.
    pub generation: u64,
    /// Documents in that generation.
    pub documents: usize,
    /// What its load added to the process (at least its generation's bytes on disk).
    pub bytes: u64,
    /// Requests holding it now.
    pub in_use: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Escapes a label value (backslash, quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Counts a finished request of `endpoint` (the route's pattern) with `status`.
    pub fn request(&self, endpoint: &str, status: u16) {
        *lock(&self.requests)
            .entry((endpoint.to_owned(), status))
            .or_default() += 1;
    }

    /// Records how long one strategy took for `endpoint` (`strategy` empty for endpoints without one).
    pub fn latency(&self, endpoint: &str, strategy: &str, secs: f64) {
        lock(&self.latency)
            .entry((endpoint.to_owned(), strategy.to_owned()))
            .or_default()
            .observe(secs);
    }

    /// A request started (+1) or ended (−1).
    pub fn in_flight(&self, delta: i64) {
        self.in_flight.fetch_add(delta, Ordering::Relaxed);
    }

    /// A request was turned away because the concurrency limit was reached for too long.
    pub fn busy(&self) {
        self.rejected_busy.fetch_add(1, Ordering::Relaxed);
    }

    /// The writer started (+1) or ended (−1) a document change.
    pub fn change_running(&self, delta: i64) {
        self.changes_running.fetch_add(delta, Ordering::Relaxed);
    }

    /// A document change ended: `committed`, `failed` or `refused` (at shutdown).
    pub fn change_done(&self, outcome: &'static str) {
        *lock(&self.changes).entry(outcome).or_default() += 1;
    }

    /// Index `name` was loaded, in `secs`.
    pub fn index_loaded(&self, name: &str, secs: f64) {
        let mut m = lock(&self.indexes);
        let c = m.entry(name.to_owned()).or_default();
        c.loads += 1;
        c.last_load_secs = secs;
    }

    /// Index `name` could not be loaded.
    pub fn index_load_failed(&self, name: &str) {
        lock(&self.indexes)
            .entry(name.to_owned())
            .or_default()
            .failures += 1;
    }

    /// Index `name` was dropped from memory.
    pub fn index_evicted(&self, name: &str) {
        lock(&self.indexes)
            .entry(name.to_owned())
            .or_default()
            .evictions += 1;
    }

    /// Index `name` was dropped: its counts go.
    pub fn forget_index(&self, name: &str) {
        lock(&self.indexes).remove(name);
    }

    /// The keys file was reloaded (`ok`) or not.
    pub fn keys_reloaded(&self, ok: bool) {
        *lock(&self.key_reloads)
            .entry(if ok { "reloaded" } else { "failed" })
            .or_default() += 1;
    }

    /// A request ran past the timeout.
    pub fn timeout(&self) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition text, with the loaded indexes; the per-index counts only of the indexes `shown`
    /// lets through.
    pub fn render(&self, loaded: &[LoadedIndex], shown: &dyn Fn(&str) -> bool) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP kgrag_http_requests_total HTTP requests by endpoint and status.\n\
             # TYPE kgrag_http_requests_total counter\n",
        );
        for ((endpoint, status), n) in lock(&self.requests).iter() {
            let _ = writeln!(
                out,
                "kgrag_http_requests_total{{endpoint=\"{}\",status=\"{status}\"}} {n}",
                label(endpoint)
            );
        }
        out.push_str(
            "# HELP kgrag_http_errors_total HTTP requests answered with a 4xx or 5xx status, by endpoint.\n\
             # TYPE kgrag_http_errors_total counter\n",
        );
        let mut errors: BTreeMap<&str, u64> = BTreeMap::new();
        let requests = lock(&self.requests);
        for ((endpoint, status), n) in requests.iter() {
            if *status >= 400 {
                *errors.entry(endpoint.as_str()).or_default() += n;
            }
        }
        for (endpoint, n) in errors {
            let _ = writeln!(
                out,
                "kgrag_http_errors_total{{endpoint=\"{}\"}} {n}",
                label(endpoint)
            );
        }
        drop(requests);
        out.push_str(
            "# HELP kgrag_request_duration_seconds Time to answer, by endpoint and strategy.\n\
             # TYPE kgrag_request_duration_seconds histogram\n",
        );
        for ((endpoint, strategy), h) in lock(&self.latency).iter() {
            let labels = format!(
                "endpoint=\"{}\",strategy=\"{}\"",
                label(endpoint),
                label(strategy)
            );
            for (bound, n) in BUCKETS.iter().zip(h.counts.iter()) {
                let _ = writeln!(
                    out,
                    "kgrag_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "kgrag_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.total
            );
            let _ = writeln!(
                out,
                "kgrag_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "kgrag_request_duration_seconds_count{{{labels}}} {}",
                h.total
            );
        }
        let _ = write!(
            out,
            "# HELP kgrag_requests_in_flight Requests being answered.\n\
             # TYPE kgrag_requests_in_flight gauge\n\
             kgrag_requests_in_flight {}\n\
             # HELP kgrag_requests_rejected_busy_total Requests turned away at the concurrency limit.\n\
             # TYPE kgrag_requests_rejected_busy_total counter\n\
             kgrag_requests_rejected_busy_total {}\n\
             # HELP kgrag_request_timeouts_total Requests that ran past the timeout.\n\
             # TYPE kgrag_request_timeouts_total counter\n\
             kgrag_request_timeouts_total {}\n\
             # HELP kgrag_document_changes_running Document changes being made by the writer (0 or 1).\n\
             # TYPE kgrag_document_changes_running gauge\n\
             kgrag_document_changes_running {}\n\
             # HELP kgrag_indexes_loaded Indexes in memory.\n\
             # TYPE kgrag_indexes_loaded gauge\n\
             kgrag_indexes_loaded {}\n",
            self.in_flight.load(Ordering::Relaxed),
            self.rejected_busy.load(Ordering::Relaxed),
            self.timeouts.load(Ordering::Relaxed),
            self.changes_running.load(Ordering::Relaxed),
            loaded.len(),
        );
        let gauges: [Family<LoadedIndex>; 5] = [
            ("kgrag_index_loaded", "1 for each index in memory.", |_| {
                "1".into()
            }),
            (
                "kgrag_index_generation",
                "The committed generation a loaded index answers from.",
                |l| l.generation.to_string(),
            ),
            (
                "kgrag_index_documents",
                "Documents in a loaded index's generation.",
                |l| l.documents.to_string(),
            ),
            (
                "kgrag_index_loaded_bytes",
                "What loading an index added to the process (at least its files' bytes).",
                |l| l.bytes.to_string(),
            ),
            (
                "kgrag_index_in_use",
                "Requests holding a loaded index (it is not evicted while any does).",
                |l| l.in_use.to_string(),
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for l in loaded {
                let _ = writeln!(out, "{name}{{index=\"{}\"}} {}", label(&l.name), value(l));
            }
        }
        let counts: BTreeMap<String, IndexCounts> = lock(&self.indexes)
            .iter()
            .filter(|(name, _)| shown(name))
            .map(|(name, c)| (name.clone(), c.clone()))
            .collect();
        let counters: [(&str, Family<IndexCounts>); 4] = [
            (
                "counter",
                (
                    "kgrag_index_loads_total",
                    "Loads of an index into memory (the first use, and each use after an eviction).",
                    |c| c.loads.to_string(),
                ),
            ),
            (
                "counter",
                (
                    "kgrag_index_load_failures_total",
                    "Loads of an index that failed.",
                    |c| c.failures.to_string(),
                ),
            ),
            (
                "counter",
                (
                    "kgrag_index_evictions_total",
                    "Times an index was dropped from memory (least recently used, past --max-loaded \
                     or the memory budget).",
                    |c| c.evictions.to_string(),
                ),
            ),
            (
                "gauge",
                (
                    "kgrag_index_last_load_seconds",
                    "Seconds the last load of an index took.",
                    |c| c.last_load_secs.to_string(),
                ),
            ),
        ];
        for (kind, (name, help, value)) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (index, c) in &counts {
                let _ = writeln!(out, "{name}{{index=\"{}\"}} {}", label(index), value(c));
            }
        }
        out.push_str(
            "# HELP kgrag_keys_reloads_total Reloads of the keys file (SIGHUP), by outcome.\n\
             # TYPE kgrag_keys_reloads_total counter\n",
        );
        for (outcome, n) in lock(&self.key_reloads).iter() {
            let _ = writeln!(out, "kgrag_keys_reloads_total{{outcome=\"{outcome}\"}} {n}");
        }
        out.push_str(
            "# HELP kgrag_document_changes_total Document changes by outcome.\n\
             # TYPE kgrag_document_changes_total counter\n",
        );
        for (outcome, n) in lock(&self.changes).iter() {
            let _ = writeln!(
                out,
                "kgrag_document_changes_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let m = Metrics::default();
        m.latency("/v1/query", "hipporag2", 0.003);
        m.latency("/v1/query", "hipporag2", 0.2);
        m.request("/v1/query", 200);
        m.request("/v1/query", 400);
        m.request("/v1/q\"x", 404);
        m.index_loaded("wiki", 0.5);
        m.index_evicted("wiki");
        m.index_loaded("hidden", 0.5);
        let text = m.render(
            &[LoadedIndex {
                name: "wiki".into(),
                generation: 7,
                documents: 3,
                bytes: 10,
                in_use: 1,
            }],
            &|name| name != "hidden",
        );
        assert!(!text.contains("hidden"));
        assert!(text.contains(
            "kgrag_request_duration_seconds_bucket{endpoint=\"/v1/query\",strategy=\"hipporag2\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "kgrag_request_duration_seconds_bucket{endpoint=\"/v1/query\",strategy=\"hipporag2\",le=\"0.25\"} 2"
        ));
        assert!(text.contains(
            "kgrag_request_duration_seconds_count{endpoint=\"/v1/query\",strategy=\"hipporag2\"} 2"
        ));
        assert!(text.contains("kgrag_http_errors_total{endpoint=\"/v1/query\"} 1"));
        assert!(text.contains("endpoint=\"/v1/q\\\"x\""));
        assert!(text.contains("kgrag_index_generation{index=\"wiki\"} 7"));
        assert!(text.contains("kgrag_index_loaded{index=\"wiki\"} 1"));
        assert!(text.contains("kgrag_indexes_loaded 1"));
        assert!(text.contains("kgrag_index_loads_total{index=\"wiki\"} 1"));
        assert!(text.contains("kgrag_index_evictions_total{index=\"wiki\"} 1"));
    }
}
