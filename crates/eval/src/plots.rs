//! Plots of a bench report as SVG and PNG (feature `plots`, drawn with plotters; text in the Ubuntu Light
//! font that `epaint_default_fonts` ships, so that PNGs render the same everywhere):
//!
//! | chart | what it shows | drawn when |
//! | --- | --- | --- |
//! | `recall` | passage recall@k per method, k = 1, 2, 5, 10, 20 | some method has recall |
//! | `context_tokens` | mean context tokens per method | some method retrieved |
//! | `latency` | p50 and p95 query latency per method | some method retrieved |
//! | `win_rates` | each method's win rate against the baseline, per criterion | the judge compared |
//! | `scores` | mean 1–10 score per method and criterion | the judge scored |
//! | `compare` | changes against an earlier report (recall@5, F1, Overall win rate, Overall score) | `--compare` |

use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle, RGBColor};

use crate::compare::Comparison;
use crate::error::{invalid, Result};
use crate::metrics::RECALL_KS;
use crate::report::{Report, SCORE_KEYS, WIN_CRITERIA};

/// Width and height of every chart, in pixels.
pub const SIZE: (u32, u32) = (860, 460);

/// One chart, drawn twice.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// File stem (`recall`, `latency`, …).
    pub name: &'static str,
    /// Caption.
    pub title: String,
    /// The chart as an SVG document.
    pub svg: String,
    /// The chart as a PNG file.
    pub png: Vec<u8>,
}

/// Colour-blind-safe colours (Okabe–Ito), then repeated.
const COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

fn fonts() -> Result<()> {
    static FONTS: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            for style in [FontStyle::Normal, FontStyle::Bold] {
                register_font("sans-serif", style, epaint_default_fonts::UBUNTU_LIGHT)
                    .map_err(|_| "the bundled Ubuntu Light font does not parse".to_owned())?;
            }
            Ok(())
        })
        .clone()
        .map_err(invalid)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// What one chart plots.
enum Plot {
    Lines {
        x_labels: Vec<String>,
        series: Vec<(String, Vec<f64>)>,
        y_max: f64,
    },
    Bars {
        groups: Vec<String>,
        series: Vec<(String, Vec<Option<f64>>)>,
    },
}

struct Spec {
    name: &'static str,
    title: String,
    x_desc: String,
    y_desc: String,
    plot: Plot,
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    spec: &Spec,
) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    match &spec.plot {
        Plot::Lines {
            x_labels,
            series,
            y_max,
        } => {
            let n = x_labels.len().max(1);
            let axes = Axes {
                x: -0.25..(n as f64 - 0.75),
                y: 0.0..*y_max,
                label_areas: (40, 56),
                label_size: 14,
                x_mesh: true,
            };
            let mut chart = frame(root, spec, x_labels, axes)?;
            for (i, (name, ys)) in series.iter().enumerate() {
                let c = color(i);
                chart
                    .draw_series(LineSeries::new(
                        ys.iter().enumerate().map(|(j, y)| (j as f64, *y)),
                        c.stroke_width(2),
                    ))
                    .map_err(err)?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(
                        ys.iter()
                            .enumerate()
                            .map(|(j, y)| Circle::new((j as f64, *y), 3, c.filled())),
                    )
                    .map_err(err)?;
            }
            legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        }
        Plot::Bars { groups, series } => {
            let values = series.iter().flat_map(|(_, v)| v.iter().flatten().copied());
            let (lo, hi) = values.fold((0f64, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let pad = ((hi - lo) * 0.08).max(1e-9);
            let (lo, hi) = (
                if lo < 0.0 { lo - pad } else { 0.0 },
                if hi > 0.0 { hi + pad } else { 1.0 },
            );
            let n = groups.len().max(1);
            let axes = Axes {
                x: -0.5..(n as f64 - 0.5),
                y: lo..hi,
                label_areas: (44, 64),
                label_size: 13,
                x_mesh: false,
            };
            let mut chart = frame(root, spec, groups, axes)?;
            let k = series.len().max(1);
            let width = 0.8 / k as f64;
            for (i, (name, vals)) in series.iter().enumerate() {
                let c = color(i);
                let bars: Vec<Rectangle<(f64, f64)>> = vals
                    .iter()
                    .enumerate()
                    .filter_map(|(g, v)| {
                        let v = (*v)?;
                        let x0 = g as f64 - 0.4 + i as f64 * width;
                        Some(Rectangle::new(
                            [(x0 + width * 0.05, 0.0), (x0 + width * 0.95, v)],
                            c.filled(),
                        ))
                    })
                    .collect();
                let drawn = chart.draw_series(bars).map_err(err)?;
                if k > 1 {
                    drawn.label(name.as_str()).legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled())
                    });
                }
            }
            if k > 1 {
                legend(&mut chart, SeriesLabelPosition::UpperRight)?;
            }
        }
    }
    root.present().map_err(err)
}

/// The axes of one chart: ranges, the sizes of the label areas (x, y), the label font size, and whether
/// vertical grid lines are drawn.
struct Axes {
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    label_areas: (u32, u32),
    label_size: u32,
    x_mesh: bool,
}

type Chart2d<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The frame both kinds of chart share: the caption, category labels on x, ticks by range on y, light grid.
fn frame<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    spec: &Spec,
    labels: &[String],
    axes: Axes,
) -> std::result::Result<Chart2d<'a, DB>, String> {
    let span = axes.y.end - axes.y.start;
    let mut chart = ChartBuilder::on(root)
        .caption(&spec.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(axes.label_areas.0)
        .y_label_area_size(axes.label_areas.1)
        .build_cartesian_2d(axes.x, axes.y)
        .map_err(err)?;
    let mut mesh = chart.configure_mesh();
    if !axes.x_mesh {
        mesh.disable_x_mesh();
    }
    mesh.x_labels(labels.len().max(1))
        .x_label_formatter(&|x: &f64| category(labels, *x))
        .y_label_formatter(&|y: &f64| tick(*y, span))
        .light_line_style(RGBColor(238, 238, 238))
        .x_desc(&spec.x_desc)
        .y_desc(&spec.y_desc)
        .label_style(("sans-serif", axes.label_size))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// The series legend, in a box at `position`.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart2d<'a, DB>,
    position: SeriesLabelPosition,
) -> std::result::Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .position(position)
        .draw()
        .map_err(err)
}

/// A y-axis tick with as many decimals as an axis spanning `span` needs.
fn tick(y: f64, span: f64) -> String {
    if span >= 20.0 {
        format!("{y:.0}")
    } else if span >= 2.0 {
        format!("{y:.1}")
    } else {
        format!("{y:.2}")
    }
}

/// The label of the category at integer position `x` (empty between categories).
fn category(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}

fn render(spec: &Spec) -> Result<Chart> {
    let problem = |what: &str, e: String| invalid(format!("plot {}: {what}: {e}", spec.name));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw(&root, spec).map_err(|e| problem("drawing the SVG", e))?;
    }
    let (w, h) = SIZE;
    let mut pixels = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area();
        draw(&root, spec).map_err(|e| problem("drawing the PNG", e))?;
    }
    let mut png = Vec::new();
    {
        let mut encoder = ::png::Encoder::new(&mut png, w, h);
        encoder.set_color(::png::ColorType::Rgb);
        encoder.set_depth(::png::BitDepth::Eight);
        let mut writer = encoder
            .write_header()
            .map_err(|e| problem("encoding the PNG", e.to_string()))?;
        writer
            .write_image_data(&pixels)
            .map_err(|e| problem("encoding the PNG", e.to_string()))?;
    }
    Ok(Chart {
        name: spec.name,
        title: spec.title.clone(),
        svg,
        png,
    })
}

/// The charts of `report` (and of its comparison with an earlier one), in the order of the module table.
pub fn charts(report: &Report, comparison: Option<&Comparison>) -> Result<Vec<Chart>> {
    fonts()?;
    let mut specs = Vec::new();
    let recall: Vec<(String, Vec<f64>)> = report
        .methods
        .iter()
        .filter(|(_, m)| !m.recall.is_empty())
        .map(|(name, m)| {
            let ys = RECALL_KS
                .iter()
                .map(|k| m.recall.get(&k.to_string()).copied().unwrap_or(0.0) * 100.0)
                .collect();
            (name.clone(), ys)
        })
        .collect();
    if !recall.is_empty() {
        specs.push(Spec {
            name: "recall",
            title: format!("Passage recall@k · {}", report.dataset),
            x_desc: "k".to_owned(),
            y_desc: "recall@k (%)".to_owned(),
            plot: Plot::Lines {
                x_labels: RECALL_KS.iter().map(|k| k.to_string()).collect(),
                series: recall,
                y_max: 100.0,
            },
        });
    }
    let retrieved: Vec<(&String, &crate::report::MethodReport)> = report
        .methods
        .iter()
        .filter(|(_, m)| m.answers_from.is_none())
        .collect();
    if !retrieved.is_empty() {
        let groups: Vec<String> = retrieved.iter().map(|(n, _)| (*n).clone()).collect();
        specs.push(Spec {
            name: "context_tokens",
            title: format!("Mean context tokens per question · {}", report.dataset),
            x_desc: "method".to_owned(),
            y_desc: "tokens".to_owned(),
            plot: Plot::Bars {
                groups: groups.clone(),
                series: vec![(
                    "context tokens".to_owned(),
                    retrieved
                        .iter()
                        .map(|(_, m)| Some(m.context_tokens_mean))
                        .collect(),
                )],
            },
        });
        specs.push(Spec {
            name: "latency",
            title: format!("Query latency · {}", report.dataset),
            x_desc: "method".to_owned(),
            y_desc: "ms".to_owned(),
            plot: Plot::Bars {
                groups,
                series: vec![
                    (
                        "p50".to_owned(),
                        retrieved
                            .iter()
                            .map(|(_, m)| Some(m.latency_ms.p50))
                            .collect(),
                    ),
                    (
                        "p95".to_owned(),
                        retrieved
                            .iter()
                            .map(|(_, m)| Some(m.latency_ms.p95))
                            .collect(),
                    ),
                ],
            },
        });
    }
    if let Some(j) = report.judge.as_ref().filter(|j| !j.pairwise.is_empty()) {
        let groups: Vec<String> = j.pairwise.keys().cloned().collect();
        let series = WIN_CRITERIA
            .iter()
            .map(|c| {
                (
                    (*c).to_owned(),
                    j.pairwise
                        .values()
                        .map(|p| p.win_rate.get(*c).copied())
                        .collect(),
                )
            })
            .collect();
        specs.push(Spec {
            name: "win_rates",
            title: format!("Win rate against {} · {}", j.baseline, report.dataset),
            x_desc: "method".to_owned(),
            y_desc: "win rate (%)".to_owned(),
            plot: Plot::Bars { groups, series },
        });
    }
    let scored: Vec<(&String, &crate::report::MethodReport)> = report
        .methods
        .iter()
        .filter(|(_, m)| !m.scores.is_empty())
        .collect();
    if !scored.is_empty() {
        let groups = scored.iter().map(|(n, _)| (*n).clone()).collect();
        let series = SCORE_KEYS
            .iter()
            .map(|c| {
                (
                    (*c).to_owned(),
                    scored
                        .iter()
                        .map(|(_, m)| m.scores.get(*c).map(|s| s.mean))
                        .collect(),
                )
            })
            .collect();
        specs.push(Spec {
            name: "scores",
            title: format!("1–10 scores · {}", report.dataset),
            x_desc: "method".to_owned(),
            y_desc: "mean score".to_owned(),
            plot: Plot::Bars { groups, series },
        });
    }
    if let Some(c) = comparison.filter(|c| !c.deltas.is_empty()) {
        let mut groups: Vec<String> = c.deltas.iter().map(|d| d.method.clone()).collect();
        groups.dedup();
        let series: Vec<(String, Vec<Option<f64>>)> =
            ["R@5", "F1", "win Overall", "score Overall Quality"]
                .iter()
                .filter(|m| c.deltas.iter().any(|d| d.metric == **m))
                .map(|m| {
                    (
                        format!("Δ {m}"),
                        groups
                            .iter()
                            .map(|g| {
                                c.deltas
                                    .iter()
                                    .find(|d| d.method == *g && d.metric == *m)
                                    .map(|d| d.change())
                            })
                            .collect(),
                    )
                })
                .collect();
        if !series.is_empty() {
            specs.push(Spec {
                name: "compare",
                title: format!("Change against the earlier report ({})", c.before_dataset),
                x_desc: "method".to_owned(),
                y_desc: "points".to_owned(),
                plot: Plot::Bars { groups, series },
            });
        }
    }
    specs.iter().map(render).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::{
        IndexReport, JudgeReport, Latency, MethodReport, PairwiseReport, ScoreSummary,
    };

    fn report() -> Report {
        let mut methods = BTreeMap::new();
        for (i, name) in ["dense", "hipporag2", "leanrag"].iter().enumerate() {
            let recall = RECALL_KS
                .iter()
                .map(|k| {
                    (
                        k.to_string(),
                        (0.2 + 0.03 * *k as f64 + 0.05 * i as f64).min(1.0),
                    )
                })
                .collect();
            let scores = SCORE_KEYS
                .iter()
                .map(|c| {
                    (
                        (*c).to_owned(),
                        ScoreSummary {
                            mean: 6.0 + i as f64,
                            sd: 0.3,
                            repeats: 5,
                        },
                    )
                })
                .collect();
            methods.insert(
                (*name).to_owned(),
                MethodReport {
                    recall,
                    context_tokens_mean: 900.0 + 100.0 * i as f64,
                    latency_ms: Latency {
                        p50: 2.0 + i as f64,
                        p95: 4.0 + i as f64,
                    },
                    scores,
                    ..MethodReport::default()
                },
            );
        }
        let pairwise = ["hipporag2", "leanrag"]
            .iter()
            .map(|m| {
                (
                    (*m).to_owned(),
                    PairwiseReport {
                        judgments: 20,
                        win_rate: WIN_CRITERIA
                            .iter()
                            .map(|c| ((*c).to_owned(), 55.0))
                            .collect(),
                        ..PairwiseReport::default()
                    },
                )
            })
            .collect();
        Report {
            dataset: "test".into(),
            questions: 10,
            config_hash: String::new(),
            index: IndexReport::default(),
            methods,
            notes: Vec::new(),
            dataset_info: None,
            judge: Some(JudgeReport {
                model: "judge".into(),
                baseline: "dense".into(),
                pairwise,
                score_repeats: 5,
                llm: Default::default(),
            }),
        }
    }

    #[test]
    fn every_chart_is_valid_svg_and_png() {
        let now = report();
        let mut before = report();
        if let Some(m) = before.methods.get_mut("dense") {
            m.recall.insert("5".into(), 0.1);
        }
        let comparison = crate::compare::compare(&now, &before);
        let drawn = charts(&now, Some(&comparison)).unwrap();
        let names: Vec<&str> = drawn.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "recall",
                "context_tokens",
                "latency",
                "win_rates",
                "scores",
                "compare"
            ]
        );
        for c in &drawn {
            let doc = roxmltree::Document::parse(&c.svg).unwrap();
            assert_eq!(doc.root_element().tag_name().name(), "svg", "{}", c.name);
            assert!(
                c.svg.contains(&c.title.replace('&', "&amp;")),
                "{}: caption",
                c.name
            );
            let decoder = ::png::Decoder::new(std::io::Cursor::new(&c.png));
            let mut reader = decoder.read_info().unwrap();
            let mut buf = vec![0; reader.output_buffer_size()];
            let info = reader.next_frame(&mut buf).unwrap();
            assert_eq!((info.width, info.height), SIZE, "{}", c.name);
            // Not blank: bars, lines and text are drawn on the white background.
            assert!(
                buf.iter().filter(|b| **b < 200).count() > 1000,
                "{}",
                c.name
            );
        }
        // Nothing to plot: no charts.
        let mut empty = report();
        empty.methods.clear();
        empty.judge = None;
        assert!(charts(&empty, None).unwrap().is_empty());
    }
}
