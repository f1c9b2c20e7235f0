//! The inputs of the cases: MuSiQue's texts, chunks and questions, the synthetic 1M-edge graphs, the
//! embeddings (`prepare`, `embed`, `derive`), the files they are written to and read from, and the index
//! the HippoRAG 2 cases start from.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use async_trait::async_trait;
use kgrag_benches::{
    data_dir, musique_chunks, musique_entity_edges, musique_resets, read_npy, synthetic_leiden_1m,
    synthetic_ppr_1m, write_npy, MusiqueGraph, MUSIQUE_OPENIE,
};
use kgrag_graph_store::hippo::HippoChunk;
use kgrag_graph_store::{EdgeWeighting, EmbeddingStore, VectorIndex};
use kgrag_hipporag::{FilterMode, HippoConfig, HippoIndex, NoProgress};
use kgrag_types::{EmbedKind, Embedder, Embeddings, FactId, Triple};
use serde_json::{json, Value};

/// The MuSiQue chunks as HippoRAG 2 indexes them, and the texts it embeds, in index order.
struct Musique {
    chunks: Vec<HippoChunk>,
    passages: Vec<String>,
    phrases: Vec<String>,
    facts: Vec<String>,
}

fn musique_inputs() -> Result<Musique> {
    let chunks = musique_chunks().with_context(|| {
        format!(
            "{MUSIQUE_OPENIE} under {} (set KGRAG_DATA_DIR)",
            data_dir().display()
        )
    })?;
    let phrases: BTreeSet<&str> = chunks
        .iter()
        .flat_map(|c| c.triples.iter())
        .flat_map(|t| [t.subject(), t.object()])
        .collect();
    let mut seen = HashSet::new();
    let mut facts = Vec::new();
    for t in chunks.iter().flat_map(|c| c.triples.iter()) {
        if seen.insert(FactId::from_triple(t).as_str().to_owned()) {
            facts.push(t.render());
        }
    }
    Ok(Musique {
        passages: chunks.iter().map(|c| c.text.clone()).collect(),
        phrases: phrases.into_iter().map(str::to_owned).collect(),
        facts,
        chunks,
    })
}

pub(crate) fn write_json(path: &Path, value: &Value) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension("json.part");
    std::fs::write(&tmp, serde_json::to_vec(value)?)?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub(crate) fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "{} (run `kgrag-perf prepare/embed/derive` first)",
            path.display()
        )
    })?;
    serde_json::from_slice(&bytes).with_context(|| format!("{}: not JSON", path.display()))
}

/// Writes an edge list as the Python references read it: the node count, then `a b weight` lines.
pub(crate) fn write_edges<A: std::fmt::Display, W: std::fmt::LowerExp>(
    path: &Path,
    n: usize,
    edges: impl Iterator<Item = (A, A, W)>,
) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut s = String::new();
    let _ = writeln!(s, "{n}");
    for (a, b, w) in edges {
        let _ = writeln!(s, "{a} {b} {w:e}");
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A node count and weighted edges.
pub(crate) type EdgeList = (usize, Vec<(usize, usize, f64)>);

pub(crate) fn read_edges(path: &Path) -> Result<EdgeList> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let n: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| anyhow!("{}: first line must be the node count", path.display()))?;
    let mut edges = Vec::new();
    for (i, line) in lines.enumerate() {
        let mut p = line.split_whitespace();
        let (Some(a), Some(b), Some(w)) = (p.next(), p.next(), p.next()) else {
            bail!("{}: line {}: expected `a b weight`", path.display(), i + 2);
        };
        edges.push((a.parse()?, b.parse()?, w.parse()?));
    }
    Ok((n, edges))
}

pub(crate) fn write_rows(path: &Path, rows: &[Vec<f64>]) -> Result<()> {
    let mut s = String::new();
    for r in rows {
        let line: Vec<String> = r.iter().map(|v| format!("{v:e}")).collect();
        let _ = writeln!(s, "{}", line.join(" "));
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub(crate) fn read_rows(path: &Path) -> Result<Vec<Vec<f64>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .map(|v| v.parse::<f64>().map_err(Into::into))
                .collect()
        })
        .collect()
}

pub(crate) fn prepare(dir: &Path) -> Result<Value> {
    let m = musique_inputs()?;
    let mdir = dir.join("musique");
    let chunks: Vec<Value> = m
        .chunks
        .iter()
        .map(|c| {
            json!({
                "id": c.chunk.as_str(),
                "text": c.text,
                "triples": c.triples.iter().map(|t| [t.subject(), t.predicate(), t.object()]).collect::<Vec<_>>(),
            })
        })
        .collect();
    write_json(&mdir.join("chunks.json"), &Value::Array(chunks))?;
    write_json(
        &mdir.join("texts.json"),
        &json!({"passages": m.passages, "phrases": m.phrases, "facts": m.facts}),
    )?;
    let dataset = kgrag_eval::load("musique-100", &data_dir())?;
    let questions: Vec<&str> = dataset
        .questions
        .iter()
        .map(|q| q.question.as_str())
        .collect();
    write_json(&mdir.join("questions.json"), &json!(questions))?;

    let ppr = dir.join("ppr-1m");
    if !ppr.join("resets.txt").exists() {
        let (n, edges, resets) = synthetic_ppr_1m();
        write_edges(&ppr.join("edges.txt"), n, edges.into_iter())?;
        write_rows(&ppr.join("resets.txt"), &resets)?;
    }
    let leiden = dir.join("leiden-1m");
    if !leiden.join("edges.txt").exists() {
        let (n, edges) = synthetic_leiden_1m();
        write_edges(&leiden.join("edges.txt"), n, edges.into_iter())?;
    }
    Ok(json!({
        "passages": m.passages.len(), "phrases": m.phrases.len(), "facts": m.facts.len(),
        "questions": questions.len(),
    }))
}

/// Passages, phrases and facts.
pub(crate) type Texts = (Vec<String>, Vec<String>, Vec<String>);

pub(crate) fn texts(dir: &Path) -> Result<Texts> {
    let v = read_json(&dir.join("musique/texts.json"))?;
    let list = |k: &str| -> Result<Vec<String>> {
        serde_json::from_value(v.get(k).cloned().unwrap_or(Value::Null))
            .with_context(|| format!("texts.json: {k}"))
    };
    Ok((list("passages")?, list("phrases")?, list("facts")?))
}

pub(crate) fn questions(dir: &Path) -> Result<Vec<String>> {
    Ok(serde_json::from_value(read_json(
        &dir.join("musique/questions.json"),
    )?)?)
}

fn local_embedder(precision: kgrag_llm::EncoderPrecision) -> Result<Arc<dyn Embedder>> {
    use kgrag_llm::{build_embedder, EmbedderConfig, LocalEmbedderConfig};
    let mut config = LocalEmbedderConfig {
        precision,
        ..LocalEmbedderConfig::default()
    };
    if std::env::var_os("KGRAG_ASSETS").is_none() {
        config.model_dir =
            Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.assets/all-minilm-l6-v2"));
    }
    Ok(build_embedder(&EmbedderConfig::Local(config), None)?)
}

fn items(texts: &[String]) -> Vec<(String, String)> {
    texts.iter().map(|t| (t.clone(), t.clone())).collect()
}

/// Case `embed_musique`: passages, phrases and facts through the local MiniLM as the index embeds them
/// (one store per kind, texts grouped by length, batches of HippoRAG 2's `embed_batch`).
pub(crate) async fn embed(dir: &Path) -> Result<Value> {
    let (ms, n, all, embedder) = embed_texts(dir, kgrag_llm::EncoderPrecision::default()).await?;
    let dim = embedder.dimension();
    write_npy(&dir.join("musique/vectors.npy"), n, dim, &all)?;
    let qs = questions(dir)?;
    let q = embedder
        .embed(&qs, &EmbedKind::Query { instruction: None })
        .await?;
    write_npy(
        &dir.join("musique/queries.npy"),
        qs.len(),
        dim,
        q.as_slice(),
    )?;
    Ok(
        json!({"ms": ms, "texts": n, "texts_per_s": n as f64 / (ms / 1e3), "model": embedder.model_name()}),
    )
}

/// Case `embed_musique`, `precision = "int8"`: the same texts and batches; writes
/// `musique/vectors-int8.npy` and reports each vector's cosine to the f32 one of `musique/vectors.npy`
/// (mean, minimum, 1st percentile) when that file is there.
pub(crate) async fn embed_int8(dir: &Path) -> Result<Value> {
    let (ms, n, all, embedder) = embed_texts(dir, kgrag_llm::EncoderPrecision::Int8).await?;
    let dim = embedder.dimension();
    write_npy(&dir.join("musique/vectors-int8.npy"), n, dim, &all)?;
    let f32_path = dir.join("musique/vectors.npy");
    let cos = if f32_path.exists() {
        let (rows, d, reference) = read_npy::<f32>(&f32_path)?;
        if rows != n || d != dim {
            bail!("vectors.npy has {rows} x {d}, the int8 run {n} x {dim}: run `kgrag-perf embed` again");
        }
        let mut c: Vec<f64> = reference
            .chunks_exact(dim)
            .zip(all.chunks_exact(dim))
            .map(|(a, b)| {
                a.iter()
                    .zip(b)
                    .map(|(x, y)| f64::from(*x) * f64::from(*y))
                    .sum()
            })
            .collect();
        c.sort_by(f64::total_cmp);
        let mean = c.iter().sum::<f64>() / c.len().max(1) as f64;
        json!({"mean": mean, "min": c.first(), "p1": c.get(c.len() / 100)})
    } else {
        Value::Null
    };
    Ok(
        json!({"ms": ms, "texts": n, "texts_per_s": n as f64 / (ms / 1e3),
              "model": embedder.model_name(), "cos_to_f32": cos}),
    )
}

/// The texts of `texts.json` embedded as the index embeds them: (ms, texts, vectors row by row, the
/// embedder).
async fn embed_texts(
    dir: &Path,
    precision: kgrag_llm::EncoderPrecision,
) -> Result<(f64, usize, Vec<f32>, Arc<dyn Embedder>)> {
    let (passages, phrases, facts) = texts(dir)?;
    let embedder = local_embedder(precision)?;
    let batch = HippoConfig::default().embed_batch;
    let t = Instant::now();
    let mut all = Vec::new();
    for (name, list) in [
        ("passages", &passages),
        ("phrases", &phrases),
        ("facts", &facts),
    ] {
        let mut store = EmbeddingStore::new(name);
        store
            .insert(&items(list), embedder.as_ref(), batch, |_| {})
            .await?;
        let index = store.index().ok_or_else(|| anyhow!("no {name} vectors"))?;
        all.extend_from_slice(&index.values()?);
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let n = passages.len() + phrases.len() + facts.len();
    Ok((ms, n, all, embedder))
}

/// Precomputed vectors looked up by text: what the index and query cases embed with, so that they time
/// everything but the model.
pub(crate) struct TableEmbedder {
    rows: HashMap<String, usize>,
    data: Vec<f32>,
    dim: usize,
}

impl TableEmbedder {
    fn load(dir: &Path) -> Result<Self> {
        let (passages, phrases, facts) = texts(dir)?;
        let (n, dim, mut data) = read_npy::<f32>(&dir.join("musique/vectors.npy"))?;
        let qs = questions(dir)?;
        let (nq, qdim, q) = read_npy::<f32>(&dir.join("musique/queries.npy"))?;
        if n != passages.len() + phrases.len() + facts.len() || nq != qs.len() || qdim != dim {
            bail!(
                "vectors.npy / queries.npy do not match texts.json: run `kgrag-perf embed` again"
            );
        }
        data.extend(q);
        let rows = passages
            .into_iter()
            .chain(phrases)
            .chain(facts)
            .chain(qs)
            .enumerate()
            .map(|(i, t)| (t, i))
            .collect();
        Ok(Self { rows, data, dim })
    }

    fn rows_of(&self, texts: &[String]) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(texts.len() * self.dim);
        for t in texts {
            let r = *self
                .rows
                .get(t)
                .ok_or_else(|| anyhow!("no precomputed vector for {t:?}"))?;
            out.extend_from_slice(&self.data[r * self.dim..(r + 1) * self.dim]);
        }
        Ok(out)
    }
}

#[async_trait]
impl Embedder for TableEmbedder {
    fn model_name(&self) -> &str {
        "precomputed-minilm"
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    async fn embed(&self, texts: &[String], _kind: &EmbedKind) -> kgrag_types::Result<Embeddings> {
        let data = self
            .rows_of(texts)
            .map_err(|e| kgrag_types::Error::InvalidInput(e.to_string()))?;
        Embeddings::new(self.dim, data)
    }
}

fn chunks(dir: &Path) -> Result<Vec<HippoChunk>> {
    #[derive(serde::Deserialize)]
    struct Raw {
        id: String,
        text: String,
        triples: Vec<[String; 3]>,
    }
    let raw: Vec<Raw> = serde_json::from_value(read_json(&dir.join("musique/chunks.json"))?)?;
    raw.into_iter()
        .map(|r| {
            Ok(HippoChunk {
                chunk: kgrag_types::ChunkId::parse(&r.id)
                    .map_err(|e| anyhow!("chunk id {:?}: {e}", r.id))?,
                text: r.text,
                triples: r
                    .triples
                    .into_iter()
                    .map(|[s, p, o]| Triple::new(s, p, o))
                    .collect(),
            })
        })
        .collect()
}

/// What the index cases start from: the precomputed vectors, the chunks and their passage store.
pub(crate) struct Setup {
    pub(crate) embedder: Arc<TableEmbedder>,
    pub(crate) chunks: Vec<HippoChunk>,
    pub(crate) passages: Arc<EmbeddingStore>,
}

pub(crate) async fn setup(dir: &Path) -> Result<Setup> {
    let embedder = TableEmbedder::load(dir)?;
    let chunks = chunks(dir)?;
    let mut store = EmbeddingStore::new("passages");
    let items: Vec<(String, String)> = chunks
        .iter()
        .map(|c| (c.chunk.as_str().to_owned(), c.text.clone()))
        .collect();
    store.insert(&items, &embedder, 64, |_| {}).await?;
    Ok(Setup {
        embedder: Arc::new(embedder),
        chunks,
        passages: Arc::new(store),
    })
}

pub(crate) fn offline_config() -> HippoConfig {
    HippoConfig {
        filter: FilterMode::None,
        ..HippoConfig::default()
    }
}

pub(crate) async fn build_index(s: &Setup) -> Result<HippoIndex> {
    Ok(build_index_timed(s).await?.0)
}

/// [`build_index`] with the seconds of each stage of the insert.
pub(crate) async fn build_index_timed(s: &Setup) -> Result<(HippoIndex, Vec<(String, f64)>)> {
    let mut index = HippoIndex::new(Arc::clone(&s.passages), offline_config());
    let stats = index
        .insert(&s.chunks, s.embedder.as_ref(), &mut NoProgress)
        .await?;
    Ok((index, stats.stages))
}

fn musique_graph_of(index: &HippoIndex) -> Result<MusiqueGraph> {
    let graph = index.graph()?;
    let phrase_nodes = (0..index.phrases().len())
        .map(|r| {
            index
                .phrase_node(r)
                .ok_or_else(|| anyhow!("phrase row {r} has no node"))
        })
        .collect::<Result<Vec<_>>>()?;
    let passage_nodes = index
        .passages()
        .keys()
        .map(|k| {
            graph
                .find(k)
                .ok_or_else(|| anyhow!("passage {k} has no node"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(MusiqueGraph {
        phrases: index
            .phrases()
            .texts()
            .iter()
            .map(|t| t.to_string())
            .collect(),
        phrase_index: index
            .phrases()
            .index()
            .cloned()
            .ok_or_else(|| anyhow!("no phrase vectors"))?,
        graph,
        phrase_nodes,
        passage_nodes,
    })
}

/// The inputs of the PPR, Leiden and GMM cases, from the MuSiQue HippoRAG 2 index.
pub(crate) async fn derive(dir: &Path) -> Result<Value> {
    let index = build_index(&setup(dir).await?).await?;
    let m = musique_graph_of(&index)?;
    let csr = m.graph.csr(EdgeWeighting::HippoReference)?;
    let edges: Vec<(usize, usize, f64)> = m
        .graph
        .edges()
        .filter_map(|(_, a, b, e)| {
            let w = e.weight(EdgeWeighting::HippoReference);
            Some((csr.dense_id(a)?, csr.dense_id(b)?, w))
        })
        .filter(|e| e.2 != 0.0)
        .collect();
    let pdir = dir.join("musique-ppr");
    write_edges(&pdir.join("edges.txt"), csr.node_count(), edges.into_iter())?;
    write_rows(&pdir.join("resets.txt"), &musique_resets(&m, &csr, 20))?;
    let entity = musique_entity_edges(&m);
    write_edges(
        &dir.join("musique-leiden/edges.txt"),
        m.phrase_nodes.len(),
        entity.iter().copied(),
    )?;
    let dim = m.phrase_index.dim();
    let values = m.phrase_index.values()?;
    let rows: Vec<&[f32]> = values.chunks(dim).collect();
    let points =
        kgrag_hierarchy::reduce::reduce(&rows, kgrag_hierarchy::reduce::Reduction::Pca(2))?;
    write_npy(
        &dir.join("musique/pca2.npy"),
        points.len(),
        points.dim(),
        points.as_slice(),
    )?;
    Ok(json!({
        "ppr_nodes": csr.node_count(), "ppr_arcs": csr.arc_count(),
        "leiden_edges": entity.len(), "pca_points": points.len(),
    }))
}
