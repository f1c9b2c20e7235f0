//! A small seeded generator (SplitMix64): every random choice of the crate draws from it, so a seed from
//! config fixes the result on every platform and every version of this crate's dependencies.

/// SplitMix64 (Steele, Lea & Flood 2014): 64-bit state, passes BigCrush, trivially seedable.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator for `seed`, decorrelated from generators of nearby seeds by one mixing step.
    pub(crate) fn new(seed: u64) -> Self {
        let mut g = Self(seed);
        g.next_u64();
        g
    }

    /// A generator for a stream identified by `(seed, a, b)`: independent restarts and layers.
    pub(crate) fn stream(seed: u64, a: u64, b: u64) -> Self {
        let mut g = Self::new(seed ^ a.wrapping_mul(0xA076_1D64_78BD_642F));
        let s = g.next_u64() ^ b.wrapping_mul(0xE703_7ED1_A0B4_28DB);
        Self::new(s)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0), without modulo bias.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let n = n.max(1) as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return (x % n) as usize;
            }
        }
    }

    /// Uniform in 0..n (n > 0) by a multiply-high (Lemire), without [`Self::below`]'s division; the bias is
    /// at most `n / 2⁶⁴`. For hot loops (UMAP's negative samples).
    pub(crate) fn below_fast(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// `m` distinct indices of 0..n, in ascending order (Floyd's algorithm).
    pub(crate) fn subset(&mut self, n: usize, m: usize) -> Vec<usize> {
        let m = m.min(n);
        let mut chosen = std::collections::BTreeSet::new();
        for j in n - m..n {
            let t = self.below(j + 1);
            if !chosen.insert(t) {
                chosen.insert(j);
            }
        }
        chosen.into_iter().collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn deterministic_uniform_and_subsets_are_distinct_sorted() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut g = SplitMix64::stream(0, 3, 1);
        let mean = (0..10_000).map(|_| g.next_f64()).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
        let s = g.subset(10, 4);
        assert_eq!(s.len(), 4);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && s.iter().all(|&x| x < 10));
        assert_eq!(g.subset(3, 5), vec![0, 1, 2]);
        assert_ne!(
            SplitMix64::stream(0, 1, 0).next_u64(),
            SplitMix64::stream(0, 0, 1).next_u64()
        );
    }
}
