//! Shared inputs for kgrag's criterion benches: deterministic synthetic corpora, so figures are comparable
//! between runs and machines without any downloaded data.
//!
//! It also compiles and runs the Rust snippet of the workspace's README as a doctest.

/// The workspace README: its Rust snippet is a doctest here (the shell and TOML blocks are not Rust).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

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
    use kgrag_graph_store::hippo::insert_chunks;
    use kgrag_graph_store::synonymy::{add_synonymy_edges, SynonymyConfig};
    use kgrag_graph_store::{ExactIndex, KnowledgeGraph, Metric, VectorIndex};
    use kgrag_llm::{build_embedder, EmbedderConfig, LocalEmbedderConfig};
    use kgrag_types::EmbedKind;

    let chunks = match musique_chunks() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipping MuSiQue benches: {e} (set KGRAG_DATA_DIR)");
            return None;
        }
    };
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

/// The MuSiQue HippoRAG OpenIE file under [`data_dir`].
pub const MUSIQUE_OPENIE: &str =
    "musique-hipporag/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json";

/// The 1,890 MuSiQue passages as HippoRAG 2 indexes them: GPT-3.5 OpenIE triples, ASCII normalisation,
/// empty phrases kept.
pub fn musique_chunks(
) -> Result<Vec<kgrag_graph_store::hippo::HippoChunk>, kgrag_openie::OpenIeError> {
    use kgrag_graph_store::hippo::HippoChunk;
    let docs = kgrag_openie::read_openie_file(&data_dir().join(MUSIQUE_OPENIE))?;
    Ok(docs
        .iter()
        .map(|d| {
            HippoChunk::from_raw(
                d.extraction.chunk_id.clone(),
                &d.passage,
                &d.extraction.triples,
                kgrag_types::Normalisation::Ascii,
                false,
            )
        })
        .collect())
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

/// A PPR input: node count, weighted edges, reset vectors.
pub type PprInput = (usize, Vec<(u32, u32, f64)>, Vec<Vec<f64>>);

/// The synthetic PPR graph of the benches: 100,000 nodes, 1,000,000 random weighted undirected edges
/// (weights in [0.5, 2), self-pairs dropped) and 20 reset vectors of 5 random seeds each.
pub fn synthetic_ppr_1m() -> PprInput {
    let n = 100_000;
    let mut rng = Lcg::new(1);
    let edges: Vec<(u32, u32, f64)> = (0..1_000_000)
        .map(|_| {
            (
                rng.below(n) as u32,
                rng.below(n) as u32,
                0.5 + 1.5 * rng.next_f64(),
            )
        })
        .filter(|(a, b, _)| a != b)
        .collect();
    let resets = (0..20)
        .map(|_| {
            let mut r = vec![0.0; n];
            for _ in 0..5 {
                r[rng.below(n)] += rng.next_f64() + 0.1;
            }
            r
        })
        .collect();
    (n, edges, resets)
}

/// The synthetic Leiden graph of the benches: 100k nodes in planted groups of 100, edges drawn round-robin
/// over the nodes (4 of 5 inside the node's group, 1 of 5 anywhere) until there are exactly 1,000,000
/// distinct unit-weight pairs, sorted.
pub fn synthetic_leiden_1m() -> (usize, Vec<(usize, usize, f64)>) {
    let n = 100_000;
    let target = 1_000_000;
    let mut rng = Lcg::new(7);
    let mut pairs = std::collections::HashSet::with_capacity(target);
    let mut draw = 0usize;
    while pairs.len() < target {
        let a = draw % n;
        let b = if draw % 5 == 4 {
            rng.below(n)
        } else {
            a / 100 * 100 + rng.below(100)
        };
        draw += 1;
        if a != b {
            pairs.insert((a.min(b), a.max(b)));
        }
    }
    let mut edges: Vec<(usize, usize, f64)> = pairs.into_iter().map(|(a, b)| (a, b, 1.0)).collect();
    edges.sort_unstable_by_key(|&(a, b, _)| (a, b));
    (n, edges)
}

/// HippoRAG-shaped PPR resets on `m`'s graph (vertex ids of `csr`): up to 5 phrase seeds, every passage at
/// 0.05 × a score in [0, 1]; `count` of them from a fixed seed.
pub fn musique_resets(
    m: &MusiqueGraph,
    csr: &kgrag_graph_store::CsrGraph,
    count: usize,
) -> Vec<Vec<f64>> {
    let mut rng = Lcg::new(2);
    (0..count)
        .map(|_| {
            let mut r = vec![0.0; csr.node_count()];
            for _ in 0..5 {
                let p = m.phrase_nodes[rng.below(m.phrase_nodes.len())];
                if let Some(i) = csr.dense_id(p) {
                    r[i] += rng.next_f64() * 0.5 + 0.1;
                }
            }
            for &p in &m.passage_nodes {
                if let Some(i) = csr.dense_id(p) {
                    r[i] = 0.05 * rng.next_f64();
                }
            }
            r
        })
        .collect()
}

/// The MuSiQue entity graph of HiRAG's Leiden step: phrases linked by their fact counts, one edge per
/// unordered pair (weights summed; see [`merged`]), over `m.phrase_nodes.len()` nodes.
pub fn musique_entity_edges(m: &MusiqueGraph) -> Vec<(usize, usize, f64)> {
    use kgrag_graph_store::{EdgeKind, NodeKind};
    let g = &m.graph;
    let index: std::collections::HashMap<_, usize> = m
        .phrase_nodes
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, i))
        .collect();
    let mut edges = Vec::new();
    for (_, a, b, e) in g.edges() {
        let kinds = (g.node(a).map(|n| n.kind), g.node(b).map(|n| n.kind));
        if kinds != (Some(NodeKind::Entity), Some(NodeKind::Entity)) || !e.has(EdgeKind::Fact) {
            continue;
        }
        if let (Some(&x), Some(&y)) = (index.get(&a), index.get(&b)) {
            edges.push((x, y, f64::from(e.fact_count())));
        }
    }
    merged(edges)
}

/// One edge per unordered pair, weights summed, self-pairs dropped: graspologic-native keeps only the first
/// weight of a repeated pair, so both sides get the same simple graph.
pub fn merged(edges: Vec<(usize, usize, f64)>) -> Vec<(usize, usize, f64)> {
    let mut m: std::collections::BTreeMap<(usize, usize), f64> = std::collections::BTreeMap::new();
    for (a, b, w) in edges {
        if a != b {
            *m.entry((a.min(b), a.max(b))).or_default() += w;
        }
    }
    m.into_iter().map(|((a, b), w)| (a, b, w)).collect()
}

/// Writes a C-order `.npy` file of `rows × cols` values (`'<f8'` for f64, `'<f4'` for f32).
pub fn write_npy<T: NpyValue>(
    path: &std::path::Path,
    rows: usize,
    cols: usize,
    data: &[T],
) -> std::io::Result<()> {
    if data.len() != rows * cols {
        return Err(std::io::Error::other(format!(
            "{}: {} values for a {rows} × {cols} matrix",
            path.display(),
            data.len()
        )));
    }
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': ({rows}, {cols}), }}",
        T::DESCR
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = Vec::with_capacity(10 + header.len() + data.len() * T::SIZE);
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        v.put_le(&mut bytes);
    }
    let tmp = path.with_extension("npy.part");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Reads a C-order 2-D `.npy` file written by [`write_npy`]: `(rows, cols, values)`.
pub fn read_npy<T: NpyValue>(path: &std::path::Path) -> std::io::Result<(usize, usize, Vec<T>)> {
    let bad = |m: &str| std::io::Error::other(format!("{}: {m}", path.display()));
    let bytes = std::fs::read(path)?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file"));
    }
    let hlen = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = std::str::from_utf8(
        bytes
            .get(10..10 + hlen)
            .ok_or_else(|| bad("short header"))?,
    )
    .map_err(|_| bad("header is not UTF-8"))?;
    if !header.contains(T::DESCR) || header.contains("'fortran_order': True") {
        return Err(bad(&format!("expected C-order {} values", T::DESCR)));
    }
    let shape = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("no shape"))?;
    let dims: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad("bad shape")))
        .collect::<std::io::Result<_>>()?;
    let (rows, cols) = match dims[..] {
        [r, c] => (r, c),
        [r] => (r, 1),
        _ => return Err(bad("expected a 2-D array")),
    };
    let body = &bytes[10 + hlen..];
    if body.len() != rows * cols * T::SIZE {
        return Err(bad("data length does not match the shape"));
    }
    let values = body.chunks_exact(T::SIZE).map(T::from_le).collect();
    Ok((rows, cols, values))
}

/// A value type of [`write_npy`] / [`read_npy`].
pub trait NpyValue: Copy {
    /// numpy's type string.
    const DESCR: &'static str;
    /// Bytes per value.
    const SIZE: usize;
    /// Appends the little-endian bytes to `out`.
    fn put_le(self, out: &mut Vec<u8>);
    /// From `SIZE` little-endian bytes.
    fn from_le(b: &[u8]) -> Self;
}

macro_rules! npy_value {
    ($t:ty, $descr:literal) => {
        impl NpyValue for $t {
            const DESCR: &'static str = $descr;
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(a)
            }
        }
    };
}

npy_value!(f64, "<f8");
npy_value!(f32, "<f4");

/// The level-0 partition of `h` over all `n` nodes; nodes outside the clustered component are singletons.
pub fn level0(h: &kgrag_community::CommunityHierarchy, n: usize) -> Vec<usize> {
    let mut m: Vec<Option<usize>> = vec![None; n];
    for r in h.records.iter().filter(|r| r.level == 0) {
        m[r.node] = Some(r.cluster);
    }
    let mut next = h
        .records
        .iter()
        .map(|r| r.cluster)
        .max()
        .map_or(0, |c| c + 1);
    m.into_iter()
        .map(|c| {
            c.unwrap_or_else(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}
