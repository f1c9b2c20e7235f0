//! Dimension reduction before the Gaussian mixture.
//!
//! HiRAG and LeanRAG reduce entity embeddings with UMAP to two dimensions (cosine metric, 15 neighbours,
//! unseeded in the references). `umap`, the default, runs our UMAP ([`crate::umap`], seeded from the
//! mixture's seed) to `min(2, N − 2)` dimensions as the references ask for; `pca:N` (PCA to N dimensions,
//! the default before UMAP was measured against umap-learn) and `none` are the alternatives.
//!
//! PCA is computed here (one ndarray matrix product and nalgebra's symmetric eigensolver, both already in
//! the workspace) rather than with linfa-reduction, which would add the linfa stack for one SVD and whose
//! component signs are not fixed. PCA: centre the rows, form the `dim × dim` scatter matrix with one matrix product, take its symmetric
//! eigendecomposition, keep the `d = min(requested, N − 1, dim)` leading components (`d = 0` when every point is the
//! same), fix each component's sign so that its largest-magnitude loading is positive, and project.

use std::fmt;
use std::str::FromStr;

use nalgebra::{DMatrix, SymmetricEigen};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::{HierarchyError, Result};

/// How embeddings are reduced before clustering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reduction {
    /// Cluster the raw vectors (only sensible for small dimensions).
    None,
    /// PCA to this many dimensions.
    Pca(usize),
    /// UMAP as the references run it: cosine, 15 neighbours, `min(2, N − 2)` dimensions (the default).
    #[default]
    Umap,
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reduction::None => f.write_str("none"),
            Reduction::Pca(n) => write!(f, "pca:{n}"),
            Reduction::Umap => f.write_str("umap"),
        }
    }
}

impl FromStr for Reduction {
    type Err = HierarchyError;

    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim();
        if t == "none" {
            return Ok(Reduction::None);
        }
        if t == "umap" {
            return Ok(Reduction::Umap);
        }
        if let Some(n) = t.strip_prefix("pca:") {
            return match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(Reduction::Pca(n)),
                _ => Err(HierarchyError::Config(format!(
                    "reduction {s:?}: pca:N needs a positive integer N"
                ))),
            };
        }
        Err(HierarchyError::Config(format!(
            "reduction {s:?} is not one of \"pca:2\", \"pca:N\", \"umap\", \"none\""
        )))
    }
}

impl Serialize for Reduction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Reduction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Points to cluster: `n` rows of `d` f64 coordinates, row-major.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Points {
    n: usize,
    d: usize,
    data: Vec<f64>,
}

impl Points {
    /// Wraps a row-major buffer of `n` rows; fails unless its length is `n × d` and every value is finite.
    pub fn new(n: usize, d: usize, data: Vec<f64>) -> Result<Self> {
        if data.len() != n * d {
            return Err(HierarchyError::Input(format!(
                "{} coordinates are not {n} rows of dimension {d}",
                data.len()
            )));
        }
        if let Some(i) = data.iter().position(|x| !x.is_finite()) {
            return Err(HierarchyError::Input(format!(
                "point {} holds a NaN or infinite coordinate",
                i / d.max(1)
            )));
        }
        Ok(Self { n, d, data })
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Dimension (0 when the points were all identical before PCA).
    pub fn dim(&self) -> usize {
        self.d
    }

    /// Point `i` (empty slice when `d = 0`).
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.d..(i + 1) * self.d]
    }

    /// The row-major buffer.
    pub fn as_slice(&self) -> &[f64] {
        &self.data
    }
}

/// Whether every row equals the first (no structure to cluster).
pub fn all_identical<V: AsRef<[f32]>>(rows: &[V]) -> bool {
    match rows.split_first() {
        None => true,
        Some((first, rest)) => rest.iter().all(|r| r.as_ref() == first.as_ref()),
    }
}

/// Reduces `rows` (all of one dimension) as `reduction` says (UMAP with seed 0).
pub fn reduce<V: AsRef<[f32]>>(rows: &[V], reduction: Reduction) -> Result<Points> {
    reduce_seeded(rows, reduction, 0)
}

/// [`reduce`] with the seed of UMAP's random choices.
pub fn reduce_seeded<V: AsRef<[f32]>>(
    rows: &[V],
    reduction: Reduction,
    seed: u64,
) -> Result<Points> {
    reduce_reporting(rows, reduction, seed).map(|(points, _)| points)
}

/// [`reduce_seeded`], with how UMAP started its layout (`None` for the other reductions and for inputs
/// that needed no layout).
pub fn reduce_reporting<V: AsRef<[f32]>>(
    rows: &[V],
    reduction: Reduction,
    seed: u64,
) -> Result<(Points, Option<crate::umap::UmapInit>)> {
    let rows: Vec<&[f32]> = rows.iter().map(AsRef::as_ref).collect();
    reduce_rows(&rows, reduction, seed)
}

/// [`reduce`] without type parameters: compiled once, here, at this crate's optimisation level (a generic
/// body would be instantiated, unoptimised in debug builds, in whichever crate calls it — through async
/// callers that is the top-level binary).
#[inline(never)]
fn reduce_rows(
    rows: &[&[f32]],
    reduction: Reduction,
    seed: u64,
) -> Result<(Points, Option<crate::umap::UmapInit>)> {
    let n = rows.len();
    let dim = rows.first().map_or(0, |r| r.as_ref().len());
    if let Some((i, r)) = rows
        .iter()
        .enumerate()
        .find(|(_, r)| r.as_ref().len() != dim)
    {
        return Err(HierarchyError::Input(format!(
            "embedding {i} has dimension {}, embedding 0 has {dim}",
            r.as_ref().len()
        )));
    }
    if let Some(i) = rows
        .iter()
        .position(|r| r.as_ref().iter().any(|x| !x.is_finite()))
    {
        return Err(HierarchyError::Input(format!(
            "embedding {i} holds a NaN or infinite value"
        )));
    }
    if n == 0 {
        return Ok((Points::default(), None));
    }
    if all_identical(rows) {
        return Ok((Points::new(n, 0, Vec::new())?, None));
    }
    match reduction {
        Reduction::None => {
            let data = rows
                .iter()
                .flat_map(|r| r.as_ref().iter().map(|x| f64::from(*x)))
                .collect();
            Ok((Points::new(n, dim, data)?, None))
        }
        Reduction::Pca(want) => Ok((pca(rows, dim, want.min(n - 1).min(dim))?, None)),
        Reduction::Umap => {
            let config = crate::umap::UmapConfig::for_layer(n, seed);
            let layout = crate::umap::umap(rows, &config)?;
            Ok((
                Points::new(n, layout.dim, layout.coords)?,
                Some(layout.init),
            ))
        }
    }
}

fn pca(rows: &[&[f32]], dim: usize, d: usize) -> Result<Points> {
    let n = rows.len();
    let mut mean = vec![0.0f64; dim];
    for r in rows {
        for (m, x) in mean.iter_mut().zip(r.as_ref()) {
            *m += f64::from(*x);
        }
    }
    for m in &mut mean {
        *m /= n as f64;
    }
    let mut x = Array2::<f64>::zeros((n, dim));
    for (i, r) in rows.iter().enumerate() {
        for (j, v) in r.as_ref().iter().enumerate() {
            x[[i, j]] = f64::from(*v) - mean[j];
        }
    }
    let scatter = x.t().dot(&x);
    let sym = DMatrix::from_fn(dim, dim, |i, j| 0.5 * (scatter[[i, j]] + scatter[[j, i]]));
    let eig = SymmetricEigen::new(sym);
    let mut order: Vec<usize> = (0..dim).collect();
    order.sort_by(|&a, &b| {
        eig.eigenvalues[b]
            .total_cmp(&eig.eigenvalues[a])
            .then(a.cmp(&b))
    });
    let mut components = Vec::with_capacity(d * dim);
    for &c in order.iter().take(d) {
        let v = eig.eigenvectors.column(c);
        let mut pivot = 0;
        for j in 1..dim {
            if v[j].abs() > v[pivot].abs() {
                pivot = j;
            }
        }
        let sign = if v[pivot] < 0.0 { -1.0 } else { 1.0 };
        components.extend(v.iter().map(|x| sign * x));
    }
    let mut data = vec![0.0f64; n * d];
    for i in 0..n {
        let row = x.row(i);
        for c in 0..d {
            let comp = &components[c * dim..(c + 1) * dim];
            data[i * d + c] = row.iter().zip(comp).map(|(a, b)| a * b).sum();
        }
    }
    Points::new(n, d, data)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_reductions() {
        assert_eq!("pca:2".parse::<Reduction>().ok(), Some(Reduction::Pca(2)));
        assert_eq!("none".parse::<Reduction>().ok(), Some(Reduction::None));
        assert_eq!("umap".parse::<Reduction>().ok(), Some(Reduction::Umap));
        assert_eq!(Reduction::Umap.to_string(), "umap");
        assert!("pca:0".parse::<Reduction>().is_err());
        let unknown = "tsne"
            .parse::<Reduction>()
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(unknown.is_err_and(|e| e.contains("umap")));
        assert_eq!(Reduction::default().to_string(), "umap");
    }

    #[test]
    fn umap_reduces_to_two_dimensions_and_fewer_for_tiny_inputs() {
        let rows: Vec<Vec<f32>> = (0..30)
            .map(|i| vec![(i % 3) as f32, (i / 3) as f32 * 0.1, 1.0])
            .collect();
        let p = reduce_seeded(&rows, Reduction::Umap, 7).unwrap();
        assert_eq!((p.len(), p.dim()), (30, 2));
        assert_eq!(p, reduce_seeded(&rows, Reduction::Umap, 7).unwrap());
        // N − 2 components below four points, as the references ask umap-learn for.
        let three = reduce_seeded(&rows[..3], Reduction::Umap, 7).unwrap();
        assert_eq!(three.dim(), 1);
    }

    #[test]
    fn pca_finds_the_main_axis_with_a_fixed_sign() {
        // Points on the line y = 2x (plus a small orthogonal wobble): the first component is (1, 2)/√5
        // with positive largest loading; projections are the signed distances along it.
        let rows: Vec<Vec<f32>> = (-5..=5)
            .map(|t| {
                let t = t as f32;
                let w = if (t as i32) % 2 == 0 { 0.01 } else { -0.01 };
                vec![t + 2.0 * w, 2.0 * t - w]
            })
            .collect();
        let p = reduce(&rows, Reduction::Pca(1)).map_err(|e| e.to_string());
        let Ok(p) = p else { return assert!(p.is_ok()) };
        assert_eq!((p.len(), p.dim()), (11, 1));
        let s5 = 5f64.sqrt();
        for (i, t) in (-5..=5).enumerate() {
            assert!((p.row(i)[0] - f64::from(t) * s5).abs() < 0.05, "{i}");
        }
        // d is capped by N − 1 and by dim.
        let two = reduce(&rows[..2], Reduction::Pca(5)).map(|p| p.dim()).ok();
        assert_eq!(two, Some(1));
        let all = reduce(&rows, Reduction::Pca(9)).map(|p| p.dim()).ok();
        assert_eq!(all, Some(2));
    }

    #[test]
    fn degenerate_inputs() {
        let none: Vec<Vec<f32>> = Vec::new();
        assert_eq!(
            reduce(&none, Reduction::Pca(2)).map(|p| p.len()).ok(),
            Some(0)
        );
        let same = vec![vec![0.5f32, 0.5]; 4];
        let p = reduce(&same, Reduction::Pca(2)).ok();
        assert_eq!(p.map(|p| (p.len(), p.dim())), Some((4, 0)));
        let bad = vec![vec![0.5f32, 0.5], vec![1.0]];
        assert!(reduce(&bad, Reduction::Pca(2)).is_err());
        let nan = vec![vec![0.5f32, f32::NAN], vec![1.0, 0.0]];
        assert!(reduce(&nan, Reduction::None).is_err());
    }
}
