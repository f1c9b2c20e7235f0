//! Case `gmm_linfa_musique`: our GMM against linfa-clustering's `GaussianMixtureModel` on the same PCA
//! matrix, for each k of our BIC scan, with the same settings (5 runs, 100 iterations, tolerance 1e-3,
//! covariance regularisation 1e-6, k-means initialisation: linfa has no k-means++ seeding of the mixture).
//! linfa does not report a log-likelihood, so it is computed here from its fitted weights, means and full
//! covariances with the same formula as ours.

use std::time::Instant;

use anyhow::{anyhow, Result};
use kgrag_hierarchy::reduce::Points;
use kgrag_hierarchy::{cluster_points, Assignment, ClusterConfig, Gmm};
use linfa::prelude::*;
use linfa_clustering::GaussianMixtureModel;
use ndarray::Array2;
use serde_json::{json, Value};

/// Mean log-likelihood of `points` under a full-covariance mixture given as flat row-major arrays.
pub fn mean_log_likelihood(
    points: &Points,
    weights: &[f64],
    means: &[f64],
    covariances: &[f64],
) -> Result<f64> {
    let d = points.dim();
    let k = weights.len();
    // Per component: the Cholesky factor L of its covariance and log det.
    let mut factors = Vec::with_capacity(k);
    for c in 0..k {
        let cov = &covariances[c * d * d..(c + 1) * d * d];
        let mut l = vec![0.0f64; d * d];
        for i in 0..d {
            for j in 0..=i {
                let mut s = cov[i * d + j];
                for m in 0..j {
                    s -= l[i * d + m] * l[j * d + m];
                }
                if i == j {
                    if s <= 0.0 {
                        return Err(anyhow!(
                            "component {c}: covariance is not positive definite"
                        ));
                    }
                    l[i * d + i] = s.sqrt();
                } else {
                    l[i * d + j] = s / l[j * d + j];
                }
            }
        }
        let log_det: f64 = (0..d).map(|i| 2.0 * l[i * d + i].ln()).sum();
        factors.push((l, log_det));
    }
    let log_2pi = (2.0 * std::f64::consts::PI).ln();
    let mut total = 0.0;
    let mut z = vec![0.0f64; d];
    let mut logs = vec![0.0f64; k];
    for x in points.as_slice().chunks(d) {
        for (c, (l, log_det)) in factors.iter().enumerate() {
            let mu = &means[c * d..(c + 1) * d];
            // Solve L z = x - mu; the Mahalanobis distance is |z|².
            for (i, (xi, mi)) in x.iter().zip(mu).enumerate() {
                let row = &l[i * d..i * d + i];
                let s = xi - mi - row.iter().zip(&z[..i]).map(|(a, b)| a * b).sum::<f64>();
                z[i] = s / l[i * d + i];
            }
            let maha: f64 = z.iter().map(|v| v * v).sum();
            logs[c] = weights[c].ln() - 0.5 * (d as f64 * log_2pi + log_det + maha);
        }
        let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        total += top + logs.iter().map(|v| (v - top).exp()).sum::<f64>().ln();
    }
    Ok(total / points.len().max(1) as f64)
}

pub fn run(points: &Points) -> Result<Value> {
    let config = ClusterConfig::default();
    let layer = cluster_points(points, &config, Assignment::Soft { threshold: 0.1 }, 0)?;
    let records = Array2::from_shape_vec((points.len(), points.dim()), points.as_slice().to_vec())?;
    let dataset = DatasetBase::from(records);
    let (mut ours_ms, mut linfa_ms) = (0.0, 0.0);
    let mut diffs = Vec::new();
    let mut per_k = Vec::new();
    for &k in &layer.scan.ks {
        let t = Instant::now();
        let ours = Gmm::fit(points, k, &config.gmm)?;
        let o_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let theirs = GaussianMixtureModel::params(k)
            .n_runs(config.gmm.n_init as u64)
            .max_n_iterations(config.gmm.max_iter as u64)
            .tolerance(config.gmm.tol)
            .reg_covariance(config.gmm.reg_covar)
            .fit(&dataset);
        let l_ms = t.elapsed().as_secs_f64() * 1e3;
        ours_ms += o_ms;
        linfa_ms += l_ms;
        let ours_ll = ours.score(points);
        let entry = match theirs {
            Ok(g) => {
                let w: Vec<f64> = g.weights().iter().copied().collect();
                let m: Vec<f64> = g.means().iter().copied().collect();
                let c: Vec<f64> = g.covariances().iter().copied().collect();
                let ll = mean_log_likelihood(points, &w, &m, &c)?;
                diffs.push(ours_ll - ll);
                json!({"k": k, "ours_ms": o_ms, "linfa_ms": l_ms, "ours_ll": ours_ll, "linfa_ll": ll})
            }
            Err(e) => {
                json!({"k": k, "ours_ms": o_ms, "linfa_ms": l_ms, "ours_ll": ours_ll, "linfa_error": e.to_string()})
            }
        };
        per_k.push(entry);
    }
    let mean_diff = diffs.iter().sum::<f64>() / diffs.len().max(1) as f64;
    Ok(json!({
        "ms": ours_ms, "ref_ms": linfa_ms, "ks": layer.scan.ks,
        "mean_ll_ours_minus_linfa": mean_diff, "linfa_failures": layer.scan.ks.len() - diffs.len(),
        "per_k": per_k,
    }))
}
