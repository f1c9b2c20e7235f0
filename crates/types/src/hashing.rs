//! Seeded hashing shared by the workspace: splitmix64 ([`SplitMix64`], [`splitmix64_mix`]), FNV-1a
//! ([`fnv1a`]), and feature-hashed text vectors ([`hashed_vector`]), an embedding that needs no model.
//!
//! Each lower-cased word adds ±1 and each of its character trigrams (with `#` marking the word's ends)
//! ±0.25 to one of `dim` buckets chosen by a seeded 64-bit hash (the sign from the hash's top bit, so
//! collisions cancel on average); the vector is then scaled to unit length. Texts that share words or
//! word pieces get a positive cosine, so it ranks lexically — far below a trained sentence embedder, but
//! deterministic, instant and available everywhere: for scale tests, and for machines without model files.

/// The unit vector of `text` in `dim` dimensions (all zeros for a text without a letter or digit).
pub fn hashed_vector(text: &str, dim: usize, seed: u64) -> Vec<f32> {
    let dim = dim.max(1);
    let mut v = vec![0f32; dim];
    let mut add = |feature: &[u8], weight: f32| {
        let h = mix(feature, seed);
        let bucket = (h % dim as u64) as usize;
        v[bucket] += if h >> 63 == 0 { weight } else { -weight };
    };
    let mut word = Vec::with_capacity(64);
    for token in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        word.clear();
        word.push(b'#');
        for c in token.chars().flat_map(char::to_lowercase) {
            let mut buf = [0u8; 4];
            word.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        word.push(b'#');
        add(&word[1..word.len() - 1], 1.0);
        // Trigrams of characters, not bytes: windows over the char boundaries of the marked word.
        let bounds: Vec<usize> = std::str::from_utf8(&word)
            .map(|w| w.char_indices().map(|(i, _)| i).chain([w.len()]).collect())
            .unwrap_or_default();
        for t in bounds.windows(4) {
            add(&word[t[0]..t[3]], 0.25);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// splitmix64's increment (the golden ratio in 64 bits).
pub const SPLITMIX64_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's output function: a bijective 64-bit mixer (Steele, Lea & Flood 2014).
pub fn splitmix64_mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The splitmix64 generator: small, fast, seeded and deterministic (not for cryptography).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(SPLITMIX64_GAMMA);
        splitmix64_mix(self.0)
    }

    /// A number in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// FNV-1a over the bytes, then the splitmix64 mixer with the seed (FNV alone clusters short keys).
fn mix(bytes: &[u8], seed: u64) -> u64 {
    splitmix64_mix(fnv1a(bytes) ^ seed.wrapping_mul(SPLITMIX64_GAMMA))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_its_reference_outputs() {
        // The first outputs of splitmix64 seeded with 1234567 (the reference implementation's test).
        let mut r = SplitMix64(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
        let f = SplitMix64(7).next_f64();
        assert!((0.0..1.0).contains(&f));
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn unit_deterministic_and_lexical() {
        let a = hashed_vector(
            "Radio City is India's first private FM radio station.",
            256,
            7,
        );
        assert!((cos(&a, &a) - 1.0).abs() < 1e-5);
        assert_eq!(
            a,
            hashed_vector(
                "Radio City is India's first private FM radio station.",
                256,
                7
            )
        );
        let near = hashed_vector("radio city, a private FM station in India", 256, 7);
        let far = hashed_vector(
            "The Harrowgate Mill was founded by Zorbel Quint in 1702.",
            256,
            7,
        );
        assert!(
            cos(&a, &near) > cos(&a, &far) + 0.2,
            "{} vs {}",
            cos(&a, &near),
            cos(&a, &far)
        );
        // Case and punctuation do not matter; another seed is another space.
        assert_eq!(
            hashed_vector("RADIO city!", 64, 1),
            hashed_vector("radio CITY", 64, 1)
        );
        assert_ne!(
            hashed_vector("radio city", 64, 1),
            hashed_vector("radio city", 64, 2)
        );
        assert!(hashed_vector("— … !", 32, 1).iter().all(|x| *x == 0.0));
        assert!(hashed_vector("日本語 テキスト", 32, 1)
            .iter()
            .all(|x| x.is_finite()));
    }
}
