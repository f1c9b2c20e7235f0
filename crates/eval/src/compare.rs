//! Deltas between two bench reports (`kgrag bench --compare DIR`): per method and metric, the earlier value,
//! the current one and the difference, for the methods and metrics both reports have.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::metrics::RECALL_KS;
use crate::report::{MethodReport, Report};

/// One metric of one method in both reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// Method name.
    pub method: String,
    /// Metric name (`R@5`, `F1`, `ctx tokens`, `p50 ms`, `win Overall`, `score Overall Quality`, …).
    pub metric: String,
    /// The earlier report's value.
    pub before: f64,
    /// The current report's value.
    pub after: f64,
}

impl Delta {
    /// `after − before`.
    pub fn change(&self) -> f64 {
        self.after - self.before
    }
}

/// The deltas of two reports, and the methods only one of them has.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Dataset of the earlier report.
    pub before_dataset: String,
    /// Dataset of the current report.
    pub after_dataset: String,
    /// Every metric both reports have, method by method in name order.
    pub deltas: Vec<Delta>,
    /// Methods only in the earlier report.
    pub removed: Vec<String>,
    /// Methods only in the current report.
    pub added: Vec<String>,
}

/// The metrics of a method, in table order; percentages for recall, EM, F1 and win rates.
fn metrics_of(report: &Report, name: &str, m: &MethodReport) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for k in RECALL_KS {
        if let Some(v) = m.recall.get(&k.to_string()) {
            out.push((format!("R@{k}"), v * 100.0));
        }
    }
    if let Some(v) = m.em {
        out.push(("EM".to_owned(), v * 100.0));
    }
    if let Some(v) = m.f1 {
        out.push(("F1".to_owned(), v * 100.0));
    }
    if m.answers_from.is_none() {
        out.push(("ctx tokens".to_owned(), m.context_tokens_mean));
        out.push(("p50 ms".to_owned(), m.latency_ms.p50));
        out.push(("p95 ms".to_owned(), m.latency_ms.p95));
    }
    if let Some(p) = report.judge.as_ref().and_then(|j| j.pairwise.get(name)) {
        for (c, v) in &p.win_rate {
            out.push((format!("win {c}"), *v));
        }
    }
    for (c, s) in &m.scores {
        out.push((format!("score {c}"), s.mean));
    }
    out
}

/// Compares `current` with `before`.
pub fn compare(current: &Report, before: &Report) -> Comparison {
    let now: BTreeSet<&String> = current.methods.keys().collect();
    let then: BTreeSet<&String> = before.methods.keys().collect();
    let mut deltas = Vec::new();
    for name in now.intersection(&then) {
        let (Some(a), Some(b)) = (current.methods.get(*name), before.methods.get(*name)) else {
            continue;
        };
        let old = metrics_of(before, name, b);
        for (metric, after) in metrics_of(current, name, a) {
            if let Some((_, before)) = old.iter().find(|(m, _)| *m == metric) {
                deltas.push(Delta {
                    method: (*name).clone(),
                    metric,
                    before: *before,
                    after,
                });
            }
        }
    }
    Comparison {
        before_dataset: before.dataset.clone(),
        after_dataset: current.dataset.clone(),
        deltas,
        removed: then.difference(&now).map(|s| (*s).clone()).collect(),
        added: now.difference(&then).map(|s| (*s).clone()).collect(),
    }
}

impl Comparison {
    /// The deltas as a Markdown table (`before → after (±change)`), one row per method, one column per
    /// metric any method has.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let same = self.before_dataset == self.after_dataset;
        let _ = writeln!(
            out,
            "## Compared with the earlier report ({}{})\n",
            self.before_dataset,
            if same { "" } else { ", another dataset" }
        );
        let mut metrics: Vec<&str> = Vec::new();
        for d in &self.deltas {
            if !metrics.contains(&d.metric.as_str()) {
                metrics.push(&d.metric);
            }
        }
        if metrics.is_empty() {
            out.push_str("No method and metric in common.\n");
        } else {
            out.push_str("| method |");
            for m in &metrics {
                let _ = write!(out, " {m} |");
            }
            out.push_str("\n| --- |");
            for _ in &metrics {
                out.push_str(" ---: |");
            }
            out.push('\n');
            let methods: BTreeSet<&str> = self.deltas.iter().map(|d| d.method.as_str()).collect();
            for method in methods {
                let _ = write!(out, "| {method} |");
                for m in &metrics {
                    match self
                        .deltas
                        .iter()
                        .find(|d| d.method == method && d.metric == *m)
                    {
                        Some(d) => {
                            let _ = write!(
                                out,
                                " {:.1} → {:.1} ({:+.1}) |",
                                d.before,
                                d.after,
                                d.change()
                            );
                        }
                        None => out.push_str(" – |"),
                    }
                }
                out.push('\n');
            }
        }
        if !self.added.is_empty() {
            let _ = writeln!(out, "\nnew methods: {}", self.added.join(", "));
        }
        if !self.removed.is_empty() {
            let _ = writeln!(out, "\nmethods no longer run: {}", self.removed.join(", "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::{IndexReport, Latency};

    fn report(recall5: f64, p50: f64, extra: Option<&str>) -> Report {
        let mut methods = BTreeMap::new();
        let recall = RECALL_KS
            .iter()
            .map(|k| (k.to_string(), if *k == 5 { recall5 } else { 0.5 }))
            .collect();
        methods.insert(
            "dense".to_owned(),
            MethodReport {
                recall,
                latency_ms: Latency {
                    p50,
                    p95: p50 * 2.0,
                },
                f1: Some(0.25),
                ..MethodReport::default()
            },
        );
        if let Some(e) = extra {
            methods.insert(e.to_owned(), MethodReport::default());
        }
        Report {
            dataset: "d".to_owned(),
            questions: 1,
            config_hash: String::new(),
            index: IndexReport::default(),
            methods,
            notes: Vec::new(),
            dataset_info: None,
            judge: None,
        }
    }

    #[test]
    fn deltas_of_common_methods_and_metrics() {
        let before = report(0.4, 10.0, Some("old"));
        let after = report(0.55, 8.0, Some("new"));
        let c = compare(&after, &before);
        let r5 = c
            .deltas
            .iter()
            .find(|d| d.method == "dense" && d.metric == "R@5")
            .unwrap();
        assert!((r5.change() - 15.0).abs() < 1e-9, "{r5:?}");
        let p50 = c.deltas.iter().find(|d| d.metric == "p50 ms").unwrap();
        assert_eq!((p50.before, p50.after), (10.0, 8.0));
        assert!(c.deltas.iter().all(|d| d.method == "dense"));
        assert_eq!(c.added, vec!["new".to_owned()]);
        assert_eq!(c.removed, vec!["old".to_owned()]);
        let md = c.to_markdown();
        assert!(md.contains("40.0 → 55.0 (+15.0)"), "{md}");
        assert!(md.contains("new methods: new"), "{md}");
    }
}
