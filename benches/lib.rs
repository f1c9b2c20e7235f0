//! Shared inputs for kgrag's criterion benches: deterministic synthetic corpora, so figures are comparable
//! between runs and machines without any downloaded data.

/// A deterministic English-like text of about `words` words, with sentences, numbers, names and some
/// non-ASCII, generated from `seed`.
pub fn synthetic_text(words: usize, seed: u64) -> String {
    const VOCAB: &[&str] = &[
        "the",
        "river",
        "city",
        "of",
        "Ardenne",
        "was",
        "founded",
        "in",
        "1821",
        "by",
        "merchants",
        "who",
        "traded",
        "salt",
        "and",
        "copper",
        "along",
        "northern",
        "route",
        "its",
        "council",
        "elected",
        "Mayor",
        "Oksana",
        "Dröm",
        "after",
        "a",
        "long",
        "dispute",
        "with",
        "guild",
        "over",
        "tariffs",
        "station",
        "museum",
        "archive",
        "bridge",
        "東京",
        "café",
        "harbour",
        "2003",
        "population",
    ];
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut out = String::with_capacity(words * 7);
    for i in 0..words {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let word = VOCAB[((state >> 33) as usize) % VOCAB.len()];
        out.push_str(word);
        out.push(if i % 17 == 16 { '.' } else { ' ' });
        if i % 17 == 16 {
            out.push(if i % 170 == 169 { '\n' } else { ' ' });
        }
    }
    out
}
