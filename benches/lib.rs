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

/// A deterministic pseudo-random generator (64-bit LCG) for synthetic bench inputs.
#[derive(Debug, Clone)]
pub struct Lcg(u64);

impl Lcg {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    /// The next value, uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next value, uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_f64() * n as f64) as usize).min(n.saturating_sub(1))
    }

    /// `n` random unit vectors of dimension `dim` (uniform on the sphere), row-major.
    pub fn unit_vectors(&mut self, n: usize, dim: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let row: Vec<f32> = (0..dim)
                .map(|_| {
                    let u1 = self.next_f64().max(f64::EPSILON);
                    let u2 = self.next_f64();
                    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
                })
                .collect();
            let norm = row
                .iter()
                .map(|v| v * v)
                .sum::<f32>()
                .sqrt()
                .max(f32::MIN_POSITIVE);
            out.extend(row.iter().map(|v| v / norm));
        }
        out
    }
}

/// Where benches keep files they derive (exported graphs, cached embeddings): `target/bench-data/`.
pub fn bench_data_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// The folder of the reference datasets: `KGRAG_DATA_DIR` (e.g. `/path/to/datasets`), else the
/// project's `datasets/`.
pub fn data_dir() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("KGRAG_DATA_DIR").filter(|d| !d.is_empty()) {
        return d.into();
    }
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets")
}

/// The MuSiQue HippoRAG 2 graph (GPT-3.5 OpenIE, 1,890 passages) with MiniLM phrase embeddings (cached in
/// [`bench_data_dir`]) and its synonymy edges. `None` (with a message) when the data or the model is missing.
pub fn musique_graph() -> Option<MusiqueGraph> {
    use kgrag_graph_store::hippo::{insert_chunks, HippoChunk};
    use kgrag_graph_store::synonymy::{add_synonymy_edges, SynonymyConfig};
    use kgrag_graph_store::{ExactIndex, KnowledgeGraph, Metric, VectorIndex};
    use kgrag_llm::{build_embedder, EmbedderConfig, LocalEmbedderConfig};
    use kgrag_types::{EmbedKind, Normalisation};

    let file = data_dir()
        .join("musique-hipporag/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json");
    let docs = match kgrag_openie::read_openie_file(&file) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipping MuSiQue benches: {e} (set KGRAG_DATA_DIR)");
            return None;
        }
    };
    let chunks: Vec<HippoChunk> = docs
        .iter()
        .map(|d| {
            HippoChunk::from_raw(
                d.extraction.chunk_id.clone(),
                &d.passage,
                &d.extraction.triples,
                Normalisation::Ascii,
                false,
            )
        })
        .collect();
    let mut graph = KnowledgeGraph::new();
    let ins = insert_chunks(&mut graph, &chunks).ok()?;
    let phrases: Vec<String> = ins.new_phrases.iter().map(|(p, _)| p.clone()).collect();
    let nodes: Vec<_> = ins.new_phrases.iter().map(|(_, n)| *n).collect();
    let cache = bench_data_dir().join("musique-phrases-minilm.idx");
    let index = match ExactIndex::load(&cache) {
        Ok(i) if i.len() == phrases.len() => i,
        _ => {
            let mut config = LocalEmbedderConfig::default();
            if std::env::var_os("KGRAG_ASSETS").is_none() {
                config.model_dir = Some(
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../.assets/all-minilm-l6-v2"),
                );
            }
            let embedder = match build_embedder(&EmbedderConfig::Local(config), None) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("skipping MuSiQue benches: {e}");
                    return None;
                }
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            let mut index = ExactIndex::new(embedder.dimension(), Metric::Cosine).ok()?;
            for part in phrases.chunks(512) {
                let e = runtime
                    .block_on(embedder.embed(part, &EmbedKind::Document))
                    .ok()?;
                index.add(e.as_slice()).ok()?;
            }
            let _ = index.save(&cache);
            index
        }
    };
    let rows: Vec<usize> = (0..phrases.len()).collect();
    add_synonymy_edges(
        &mut graph,
        &phrases,
        &nodes,
        &index,
        &rows,
        &SynonymyConfig::default(),
    )
    .ok()?;
    Some(MusiqueGraph {
        graph,
        phrases,
        phrase_nodes: nodes,
        passage_nodes: ins.new_passages,
        phrase_index: index,
    })
}

/// What [`musique_graph`] returns.
#[derive(Debug)]
pub struct MusiqueGraph {
    /// The graph with fact, context and synonymy edges.
    pub graph: kgrag_graph_store::KnowledgeGraph,
    /// Phrases, in node order.
    pub phrases: Vec<String>,
    /// Phrase nodes.
    pub phrase_nodes: Vec<kgrag_graph_store::NodeIndex>,
    /// Passage nodes.
    pub passage_nodes: Vec<kgrag_graph_store::NodeIndex>,
    /// MiniLM phrase embeddings.
    pub phrase_index: kgrag_graph_store::ExactIndex,
}
