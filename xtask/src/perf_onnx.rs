//! `cargo xtask perf`'s case `embed_onnxruntime`: our encoder against all-MiniLM-L6-v2 on ONNX Runtime,
//! the runtime fastembed, sentence-transformers' ONNX backend and text-embeddings-inference's CPU path
//! use — in f32 and int8 on both sides.
//!
//! Each pass runs, in turn: `kgrag-perf embed` (ours, the default precision; writes the vectors the
//! others are compared with), `kgrag-perf embed-int8` (ours, `precision = "int8"`), then
//! `benches/python/perf_onnxruntime.py` once for its fp32 graph and once for its dynamically quantised
//! int8 graph (the graph written from the model's safetensors by that script, the same tokenizer,
//! texts and batches). The best time of each of the four is kept.

use serde_json::{json, Value};

use crate::perf::{best_by, num, Row, Runner};
use crate::TaskResult;

/// `v[outer][key]` as a number.
fn at(v: &Value, outer: &str, key: &str) -> Option<f64> {
    v.get(outer).and_then(|o| num(o, key))
}

/// Runs the case for `passes` passes and returns its row.
pub(crate) fn row(r: &Runner, passes: usize) -> TaskResult<Row> {
    let model = r.assets.join("all-minilm-l6-v2");
    let (mut f32_ours, mut int8_ours, mut fp32_ort, mut int8_ort) = (None, None, None, None);
    for pass in 0..passes {
        println!("xtask perf: embed_onnxruntime pass {}/{passes}: ours f32, ours int8, ONNX Runtime fp32, int8", pass + 1);
        f32_ours = Some(crate::perf::best(f32_ours, r.ours(&["embed"])?));
        int8_ours = Some(crate::perf::best(int8_ours, r.ours(&["embed-int8"])?));
        let ort = |variant: &str| {
            r.reference_args(
                "perf_onnxruntime.py",
                &[
                    r.dir.as_os_str(),
                    model.as_os_str(),
                    "--threads".as_ref(),
                    "2".as_ref(),
                    "--variants".as_ref(),
                    variant.as_ref(),
                ],
            )
        };
        fp32_ort = Some(best_by(fp32_ort, ort("fp32")?, |v| at(v, "fp32", "ms")));
        int8_ort = Some(best_by(int8_ort, ort("int8")?, |v| at(v, "int8", "ms")));
    }
    let (f32_ours, int8_ours) = (f32_ours.unwrap_or_default(), int8_ours.unwrap_or_default());
    let (fp32_ort, int8_ort) = (fp32_ort.unwrap_or_default(), int8_ort.unwrap_or_default());
    let ours_ms = num(&f32_ours, "ms").unwrap_or(f64::NAN);
    let int8_ms = num(&int8_ours, "ms").unwrap_or(f64::NAN);
    let ort_fp32 = at(&fp32_ort, "fp32", "ms");
    let ort_int8 = at(&int8_ort, "int8", "ms");
    let ratio = |a: f64, b: Option<f64>| b.map(|b| a / b);
    let cos = int8_ours.get("cos_to_f32").cloned().unwrap_or(Value::Null);
    let cos_mean = num(&cos, "mean");
    let cos_p1 = num(&cos, "p1");
    let check = at(&fp32_ort, "fp32", "max_abs_diff_to_ours");
    let ratios = json!({
        "f32_to_ort_fp32": ratio(ours_ms, ort_fp32),
        "int8_to_ort_fp32": ratio(int8_ms, ort_fp32),
        "int8_to_ort_int8": ratio(int8_ms, ort_int8),
    });
    println!("xtask perf: embed_onnxruntime ratios {ratios}, our int8's cosine to our f32 {cos}");
    let le = |v: Option<f64>, limit: f64| v.is_some_and(|v| v <= limit);
    let ge = |v: Option<f64>, limit: f64| v.is_some_and(|v| v >= limit);
    Ok(Row {
        met: le(ratio(ours_ms, ort_fp32), 0.8)
            && le(ratio(int8_ms, ort_fp32), 0.5)
            && le(ratio(int8_ms, ort_int8), 0.8)
            && ge(cos_mean, 0.995)
            && ge(cos_p1, 0.97)
            && le(check, 1e-4),
        ours: json!({"f32": f32_ours, "int8": int8_ours, "ratios": ratios}),
        reference: json!({"fp32": fp32_ort.get("fp32"), "int8": int8_ort.get("int8"),
                          "onnxruntime": fp32_ort.get("onnxruntime"), "threads": fp32_ort.get("threads")}),
        ours_ms,
        ref_ms: ort_fp32,
        check,
        check_what: "max |ours f32 - ONNX Runtime fp32| over all vector components",
        goal: "f32 <= 0.8x ORT fp32; int8 <= 0.5x ORT fp32 and <= 0.8x ORT int8; int8 cosine to f32 mean >= 0.995, 1st percentile >= 0.97",
    })
}
