//! `kgrag-perf`: our side of `cargo xtask perf`.
//!
//! Each subcommand runs one case on the inputs under a data folder (written once by `prepare`, `embed` and
//! `derive`), prints one JSON object on stdout (`ms`: the case's time; the rest: what the check needs) and
//! writes what the reference compares against into the same folder. The references are the Python scripts
//! in `benches/python/`, which read the same files; `cargo xtask perf` runs both sides alternately and
//! writes the table.
//!
//! ```text
//! kgrag-perf prepare DIR          MuSiQue texts, chunks and questions; the synthetic 1M-edge graphs
//! kgrag-perf embed DIR            case embed_musique (writes the vectors every later case uses)
//! kgrag-perf derive DIR           PPR / Leiden / PCA inputs from the MuSiQue index
//! kgrag-perf synonymy DIR         case synonymy_musique
//! kgrag-perf hipporag2-index DIR  case hipporag2_index_musique (with the milliseconds of each stage)
//! kgrag-perf hipporag2-query DIR  case hipporag2_query_musique
//! kgrag-perf ppr DIR NAME         cases ppr_musique (NAME musique-ppr), ppr_1m (NAME ppr-1m)
//! kgrag-perf gmm DIR              case gmm_bic_musique
//! kgrag-perf gmm-linfa DIR        case gmm_linfa_musique (feature `linfa`)
//! kgrag-perf leiden DIR NAME      cases leiden_musique (NAME musique-leiden), leiden_1m (NAME leiden-1m)
//! kgrag-perf modularity DIR NAME FILE   level-0 modularity of a "node cluster" partition file
//! kgrag-perf method-query DIR     cases hirag_query_musique, leanrag_query_musique (through `kgrag bench`)
//! kgrag-perf peak DIR            the machine: f32 matrix-product rate (ndarray's sgemm, one block of rows
//!                                 per core) and memory read bandwidth, for the physical-limit estimates
//! kgrag-perf index-full DIR       case index_musique_full: `kgrag bench` on musique-100, every method, with
//!                                 an empty embedding cache (the full offline index a user waits for)
//! ```

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use async_trait::async_trait;
use kgrag_benches::{
    data_dir, level0, merged, musique_chunks, musique_entity_edges, musique_resets, read_npy,
    synthetic_leiden_1m, synthetic_ppr_1m, write_npy, MusiqueGraph, MUSIQUE_OPENIE,
};
use kgrag_graph_store::hippo::HippoChunk;
use kgrag_graph_store::ppr::{PprConfig, PprSolver};
use kgrag_graph_store::synonymy::{scan, SynonymyConfig};
use kgrag_graph_store::{CsrGraph, EdgeWeighting, EmbeddingStore, ExactIndex, Metric, VectorIndex};
use kgrag_hipporag::{FilterMode, HippoConfig, HippoIndex, HippoRetriever, NoProgress};
use kgrag_types::{EmbedKind, Embedder, Embeddings, FactId, Triple};
use serde_json::{json, Map, Value};

/// Passages asked of a retriever per query (the bench's recall@k needs 20).
const TOP_K: usize = 20;

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kgrag-perf: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<Value> {
    let arg = |i: usize, what: &str| -> Result<&str> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("missing {what} (see the module docs of benches/perf/main.rs)"))
    };
    let dir = PathBuf::from(arg(1, "DIR")?);
    let rounds = std::env::var("KGRAG_PERF_ROUNDS")
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
        .unwrap_or(5)
        .max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match arg(0, "subcommand")? {
        "prepare" => prepare(&dir),
        "embed" => runtime.block_on(embed(&dir)),
        "derive" => runtime.block_on(derive(&dir)),
        "synonymy" => synonymy(&dir, rounds),
        "hipporag2-index" => runtime.block_on(hipporag2_index(&dir, rounds)),
        "hipporag2-query" => runtime.block_on(hipporag2_query(&dir, rounds)),
        "ppr" => ppr(&dir, arg(2, "NAME")?, rounds),
        "gmm" => gmm(&dir, rounds),
        "gmm-linfa" => gmm_linfa(&dir),
        "leiden" => leiden(&dir, arg(2, "NAME")?, rounds),
        "modularity" => modularity(&dir, arg(2, "NAME")?, Path::new(arg(3, "FILE")?)),
        "method-query" => runtime.block_on(method_query(&dir)),
        "index-full" => runtime.block_on(index_full(&dir)),
        "peak" => peak(rounds),
        other => {
            bail!("unknown subcommand {other:?} (see the module docs of benches/perf/main.rs)")
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Inputs

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
        .flat_map(|t| [t.subject.as_str(), t.object.as_str()])
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

fn write_json(path: &Path, value: &Value) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension("json.part");
    std::fs::write(&tmp, serde_json::to_vec(value)?)?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "{} (run `kgrag-perf prepare/embed/derive` first)",
            path.display()
        )
    })?;
    serde_json::from_slice(&bytes).with_context(|| format!("{}: not JSON", path.display()))
}

/// Writes an edge list as the Python references read it: the node count, then `a b weight` lines.
fn write_edges<A: std::fmt::Display, W: std::fmt::LowerExp>(
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
type EdgeList = (usize, Vec<(usize, usize, f64)>);

fn read_edges(path: &Path) -> Result<EdgeList> {
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

fn write_rows(path: &Path, rows: &[Vec<f64>]) -> Result<()> {
    let mut s = String::new();
    for r in rows {
        let line: Vec<String> = r.iter().map(|v| format!("{v:e}")).collect();
        let _ = writeln!(s, "{}", line.join(" "));
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn read_rows(path: &Path) -> Result<Vec<Vec<f64>>> {
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

fn prepare(dir: &Path) -> Result<Value> {
    let m = musique_inputs()?;
    let mdir = dir.join("musique");
    let chunks: Vec<Value> = m
        .chunks
        .iter()
        .map(|c| {
            json!({
                "id": c.chunk.as_str(),
                "text": c.text,
                "triples": c.triples.iter().map(|t| [&t.subject, &t.predicate, &t.object]).collect::<Vec<_>>(),
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
type Texts = (Vec<String>, Vec<String>, Vec<String>);

fn texts(dir: &Path) -> Result<Texts> {
    let v = read_json(&dir.join("musique/texts.json"))?;
    let list = |k: &str| -> Result<Vec<String>> {
        serde_json::from_value(v.get(k).cloned().unwrap_or(Value::Null))
            .with_context(|| format!("texts.json: {k}"))
    };
    Ok((list("passages")?, list("phrases")?, list("facts")?))
}

fn questions(dir: &Path) -> Result<Vec<String>> {
    Ok(serde_json::from_value(read_json(
        &dir.join("musique/questions.json"),
    )?)?)
}

fn local_embedder() -> Result<Arc<dyn Embedder>> {
    use kgrag_llm::{build_embedder, EmbedderConfig, LocalEmbedderConfig};
    let mut config = LocalEmbedderConfig::default();
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
async fn embed(dir: &Path) -> Result<Value> {
    let (passages, phrases, facts) = texts(dir)?;
    let embedder = local_embedder()?;
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
        all.extend_from_slice(index.as_slice());
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let n = passages.len() + phrases.len() + facts.len();
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
    Ok(json!({"ms": ms, "texts": n, "texts_per_s": n as f64 / (ms / 1e3)}))
}

/// Precomputed vectors looked up by text: what the index and query cases embed with, so that they time
/// everything but the model.
struct TableEmbedder {
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
struct Setup {
    embedder: Arc<TableEmbedder>,
    chunks: Vec<HippoChunk>,
    passages: Arc<EmbeddingStore>,
}

async fn setup(dir: &Path) -> Result<Setup> {
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

fn offline_config() -> HippoConfig {
    HippoConfig {
        filter: FilterMode::None,
        ..HippoConfig::default()
    }
}

async fn build_index(s: &Setup) -> Result<HippoIndex> {
    Ok(build_index_timed(s).await?.0)
}

/// [`build_index`] with the seconds of each stage of the insert.
async fn build_index_timed(s: &Setup) -> Result<(HippoIndex, Vec<(String, f64)>)> {
    let mut index = HippoIndex::new(Arc::clone(&s.passages), offline_config());
    let stats = index
        .insert(&s.chunks, s.embedder.as_ref(), &mut NoProgress)
        .await?;
    Ok((index, stats.stages))
}

fn musique_graph_of(index: &HippoIndex) -> Result<MusiqueGraph> {
    let graph = index.graph().clone();
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
        .iter()
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
async fn derive(dir: &Path) -> Result<Value> {
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
    let rows: Vec<&[f32]> = m.phrase_index.as_slice().chunks(dim).collect();
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

// ---------------------------------------------------------------------------------------------------------
// Cases

fn best_of<T>(rounds: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..rounds {
        let t = Instant::now();
        let v = f()?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        last = Some(v);
    }
    let v = last.ok_or_else(|| anyhow!("no rounds"))?;
    Ok((best, v))
}

/// Case `synonymy_musique`: the exact k-NN scan of every phrase (HippoRAG 2's threshold, k and cap).
fn synonymy(dir: &Path, rounds: usize) -> Result<Value> {
    let (passages, phrases, _) = texts(dir)?;
    let (_, dim, data) = read_npy::<f32>(&dir.join("musique/vectors.npy"))?;
    let start = passages.len() * dim;
    let mut index = ExactIndex::new(dim, Metric::Cosine)?;
    index.add(&data[start..start + phrases.len() * dim])?;
    let rows: Vec<usize> = (0..phrases.len()).collect();
    let config = SynonymyConfig::default();
    let (ms, pairs) = best_of(rounds, || Ok(scan(&phrases, &index, &rows, &config)?))?;
    let mut s = String::with_capacity(pairs.len() * 24);
    for p in &pairs {
        let _ = writeln!(s, "{} {} {:.9}", p.from, p.to, p.cosine);
    }
    std::fs::create_dir_all(dir.join("out"))?;
    std::fs::write(dir.join("out/synonymy-ours.txt"), s)?;
    Ok(json!({"ms": ms, "pairs": pairs.len()}))
}

/// HippoRAG 2's retriever over `index` at the offline settings (no LLM filter).
fn offline_retriever(s: &Setup, index: &Arc<HippoIndex>) -> Result<HippoRetriever> {
    Ok(HippoRetriever::new(
        Arc::clone(index),
        Arc::clone(&s.embedder) as Arc<dyn Embedder>,
        None,
        offline_config(),
    )?)
}

/// Case `hipporag2_index_musique`: everything after the embeddings — phrase and fact stores from the
/// precomputed vectors, the graph, the synonymy edges and the retriever's CSR snapshot.
async fn hipporag2_index(dir: &Path, rounds: usize) -> Result<Value> {
    let s = setup(dir).await?;
    let mut best = f64::INFINITY;
    let mut last = None;
    let mut stages_ms = Map::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let (index, stages) = build_index_timed(&s).await?;
        let index = Arc::new(index);
        let built = t.elapsed();
        let retriever = offline_retriever(&s, &index)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if ms < best {
            best = ms;
            stages_ms = stages
                .into_iter()
                .map(|(stage, secs)| (stage, json!(secs * 1e3)))
                .collect();
            stages_ms.insert("retriever".into(), json!(ms - built.as_secs_f64() * 1e3));
        }
        drop(retriever);
        last = Some(index);
    }
    let index = last.ok_or_else(|| anyhow!("no rounds"))?;
    let csr = index.graph().csr(EdgeWeighting::HippoReference)?;
    Ok(json!({
        "ms": best, "stages_ms": stages_ms, "nodes": csr.node_count(), "arcs": csr.arc_count(),
        "phrases": index.phrases().len(), "facts": index.facts().len(),
    }))
}

/// Case `hipporag2_query_musique`: the 100 questions after their (precomputed) query embedding; writes
/// each question's top-5 passage rows.
async fn hipporag2_query(dir: &Path, rounds: usize) -> Result<Value> {
    use kgrag_types::{RetrievalRequest, Retriever};
    let s = setup(dir).await?;
    let index = Arc::new(build_index(&s).await?);
    let retriever = offline_retriever(&s, &index)?;
    let row_of: HashMap<&str, usize> = s
        .chunks
        .iter()
        .enumerate()
        .map(|(i, c)| (c.chunk.as_str(), i))
        .collect();
    let qs = questions(dir)?;
    let mut times = Vec::with_capacity(qs.len() * rounds);
    let mut top5 = Vec::with_capacity(qs.len());
    for round in 0..rounds {
        for q in &qs {
            let request = RetrievalRequest {
                query: q.clone(),
                top_k: TOP_K,
            };
            let t = Instant::now();
            let ctx = retriever.retrieve(&request).await?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            if round == 0 {
                let rows: Vec<usize> = ctx
                    .passages
                    .iter()
                    .take(5)
                    .filter_map(|p| row_of.get(p.chunk_id.as_str()).copied())
                    .collect();
                top5.push(rows);
            }
        }
    }
    write_json(&dir.join("out/hipporag2-top5-ours.json"), &json!(top5))?;
    let (p50, p95) = percentiles(&mut times);
    Ok(json!({"ms": p50, "p50_ms": p50, "p95_ms": p95, "queries": qs.len(), "rounds": rounds}))
}

fn percentiles(times: &mut [f64]) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if times.is_empty() {
            f64::NAN
        } else {
            times[((times.len() - 1) as f64 * q).round() as usize]
        }
    };
    (at(0.5), at(0.95))
}

/// Cases `ppr_musique` / `ppr_1m`: mean time per query over every reset vector, `rounds` times, at
/// HippoRAG 2's settings; writes the scores for the reference's check.
fn ppr(dir: &Path, name: &str, rounds: usize) -> Result<Value> {
    let d = dir.join(name);
    let (n, edges) = read_edges(&d.join("edges.txt"))?;
    let edges: Vec<(u32, u32, f64)> = edges
        .into_iter()
        .map(|(a, b, w)| (a as u32, b as u32, w))
        .collect();
    let csr = CsrGraph::from_edges(n, &edges, false)?;
    let resets = read_rows(&d.join("resets.txt"))?;
    let mut solver = PprSolver::new(&csr, PprConfig::default())?;
    let mut iterations = 0;
    let t = Instant::now();
    for _ in 0..rounds {
        for r in &resets {
            iterations = solver.run(r)?.iterations;
        }
    }
    let ms = t.elapsed().as_secs_f64() * 1e3 / (rounds * resets.len()).max(1) as f64;
    let mut scores = Vec::with_capacity(resets.len());
    for r in &resets {
        solver.run(r)?;
        scores.push(solver.scores().to_vec());
    }
    write_rows(&d.join("scores.txt"), &scores)?;
    Ok(
        json!({"ms": ms, "nodes": n, "arcs": csr.arc_count(), "iterations_last": iterations, "eliminated": solver.eliminated_nodes(), "swept_arcs": solver.swept_arcs()}),
    )
}

fn pca_points(dir: &Path) -> Result<kgrag_hierarchy::reduce::Points> {
    let (n, d, data) = read_npy::<f64>(&dir.join("musique/pca2.npy"))?;
    Ok(kgrag_hierarchy::reduce::Points::new(n, d, data)?)
}

/// Case `gmm_bic_musique`: one hierarchy layer's BIC scan and soft assignment on the PCA-reduced phrases.
fn gmm(dir: &Path, rounds: usize) -> Result<Value> {
    use kgrag_hierarchy::{cluster_points, Assignment, ClusterConfig, Gmm};
    let points = pca_points(dir)?;
    let config = ClusterConfig::default();
    let (ms, layer) = best_of(rounds, || {
        Ok(cluster_points(
            &points,
            &config,
            Assignment::Soft { threshold: 0.1 },
            0,
        )?)
    })?;
    let ll = Gmm::fit(&points, layer.k, &config.gmm)?.score(&points);
    Ok(json!({"ms": ms, "k": layer.k, "ks": layer.scan.ks, "mean_log_likelihood": ll}))
}

#[cfg(feature = "linfa")]
fn gmm_linfa(dir: &Path) -> Result<Value> {
    linfa_case::run(&pca_points(dir)?)
}

#[cfg(not(feature = "linfa"))]
fn gmm_linfa(_dir: &Path) -> Result<Value> {
    bail!("gmm-linfa needs the `linfa` feature (cargo xtask perf builds with it)")
}

#[cfg(feature = "linfa")]
mod linfa_case;

fn leiden_config() -> kgrag_community::HierarchicalConfig {
    // graspologic-native clusters every component it is given and runs one Leiden iteration per level
    // (`iterations=1`), so ours does too (HiRAG's other settings are the defaults).
    kgrag_community::HierarchicalConfig {
        largest_component_only: false,
        leiden: kgrag_community::LeidenConfig {
            max_iterations: 1,
            ..kgrag_community::LeidenConfig::default()
        },
        ..kgrag_community::HierarchicalConfig::default()
    }
}

/// Cases `leiden_musique` / `leiden_1m`: hierarchical Leiden from the edge list (graph build included, as
/// graspologic-native's call builds its network from the list); level-0 modularity.
fn leiden(dir: &Path, name: &str, rounds: usize) -> Result<Value> {
    use kgrag_community::{hierarchical_leiden, Graph};
    let (n, edges) = read_edges(&dir.join(name).join("edges.txt"))?;
    let edges = merged(edges);
    let config = leiden_config();
    let (ms, h) = best_of(rounds, || {
        Ok(hierarchical_leiden(
            &Graph::from_edges(n, &edges)?,
            &config,
        )?)
    })?;
    let g = Graph::from_edges(n, &edges)?;
    let q = g.modularity(&level0(&h, n), 1.0)?;
    Ok(json!({"ms": ms, "modularity": q, "levels": h.levels, "records": h.records.len()}))
}

/// The level-0 modularity (our formula) of a partition file of `node cluster` lines over `NAME`'s graph;
/// nodes the file does not list are singletons.
fn modularity(dir: &Path, name: &str, file: &Path) -> Result<Value> {
    use kgrag_community::Graph;
    let (n, edges) = read_edges(&dir.join(name).join("edges.txt"))?;
    let g = Graph::from_edges(n, &merged(edges))?;
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut membership: Vec<Option<usize>> = vec![None; n];
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for line in text.lines() {
        let mut p = line.split_whitespace();
        let (Some(node), Some(cluster)) = (p.next(), p.next()) else {
            continue;
        };
        let node: usize = node.parse()?;
        let next = ids.len();
        if node < n {
            membership[node] = Some(*ids.entry(cluster).or_insert(next));
        }
    }
    let mut next = ids.len();
    let membership: Vec<usize> = membership
        .into_iter()
        .map(|c| {
            c.unwrap_or_else(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    Ok(json!({"modularity": g.modularity(&membership, 1.0)?}))
}

/// Cases `hirag_query_musique` and `leanrag_query_musique`: `kgrag bench` on musique-100 with the HiRAG and
/// LeanRAG methods (offline, through the default response cache); their p50 query latency.
async fn method_query(dir: &Path) -> Result<Value> {
    let mut args = kgrag_bench::BenchArgs::new(data_dir());
    args.dataset = Some("musique-100".to_owned());
    args.methods = vec!["hirag".to_owned(), "leanrag".to_owned()];
    args.out = Some(dir.join("bench"));
    let outcome = kgrag_bench::run(&args).await?;
    let mut out = Map::new();
    for (method, case) in [
        ("hirag", "hirag_query_musique"),
        ("leanrag", "leanrag_query_musique"),
    ] {
        let m = outcome
            .report
            .methods
            .get(method)
            .ok_or_else(|| anyhow!("the bench report has no {method}"))?;
        let after = m.latency_after_embedding_ms;
        out.insert(
            case.to_owned(),
            json!({
                "ms": m.latency_ms.p50, "p95_ms": m.latency_ms.p95,
                "after_embedding_p50_ms": after.map(|l| l.p50),
            }),
        );
    }
    Ok(Value::Object(out))
}

/// Case `index_musique_full`: `kgrag bench` on musique-100 with every method, offline, from an empty
/// response cache (so every text is embedded): wall time, and the seconds of each index stage.
async fn index_full(dir: &Path) -> Result<Value> {
    let full = dir.join("full");
    let cache = full.join("cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&full)?;
    let config = full.join("kgrag.toml");
    std::fs::write(
        &config,
        format!("cache_dir = {:?}\n", cache.to_string_lossy()),
    )?;
    let mut args = kgrag_bench::BenchArgs::new(data_dir());
    args.dataset = Some("musique-100".to_owned());
    args.out = Some(full.join("bench"));
    args.config = Some(config);
    let t = Instant::now();
    let outcome = kgrag_bench::run(&args).await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let stages: Map<String, Value> = outcome
        .report
        .index
        .stages
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.secs)))
        .collect();
    let recall: Map<String, Value> = outcome
        .report
        .methods
        .iter()
        .map(|(k, m)| (k.clone(), json!(m.recall)))
        .collect();
    Ok(json!({"ms": ms, "stages_secs": stages, "recall": recall}))
}

/// The machine's measured limits: the f32 matrix-product rate of the kernel our exact k-NN uses (a
/// 4096 × 4096 × 384 product, the rows split over the cores as the synonymy scan splits them) and the
/// read bandwidth of a 512 MiB array summed by every core.
fn peak(rounds: usize) -> Result<Value> {
    use ndarray::linalg::general_mat_mul;
    use ndarray::Array2;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let (m, n, k) = (4096usize, 4096usize, 384usize);
    let a = Array2::from_shape_fn((m, k), |(i, j)| ((i * 31 + j * 17) % 97) as f32 / 97.0);
    let b = Array2::from_shape_fn((n, k), |(i, j)| ((i * 13 + j * 7) % 89) as f32 / 89.0);
    let rows = m.div_ceil(threads);
    let (gemm_ms, _) = best_of(rounds, || {
        std::thread::scope(|scope| {
            for t in 0..threads {
                let (a, b) = (&a, &b);
                scope.spawn(move || {
                    let lo = (t * rows).min(m);
                    let hi = ((t + 1) * rows).min(m);
                    let part = a.slice_axis(ndarray::Axis(0), ndarray::Slice::from(lo..hi));
                    let mut c = Array2::<f32>::zeros((hi - lo, n));
                    general_mat_mul(1.0, &part, &b.t(), 0.0, &mut c);
                    std::hint::black_box(c[[0, 0]]);
                });
            }
        });
        Ok(())
    })?;
    let gflops = 2.0 * (m * n * k) as f64 / (gemm_ms * 1e6);
    let words = 64usize << 20; // 64 Mi f64 = 512 MiB
    let data: Vec<f64> = (0..words).map(|i| (i % 1000) as f64).collect();
    let per = words.div_ceil(threads);
    let (read_ms, _) = best_of(rounds, || {
        let total: f64 = std::thread::scope(|scope| {
            let handles: Vec<_> = data
                .chunks(per)
                .map(|c| scope.spawn(move || c.iter().sum::<f64>()))
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).sum()
        });
        std::hint::black_box(total);
        Ok(())
    })?;
    let gbs = (words * 8) as f64 / (read_ms * 1e6);
    Ok(json!({
        "threads": threads, "sgemm_gflops": gflops, "sgemm_ms": gemm_ms,
        "read_gb_per_s": gbs, "read_ms": read_ms,
    }))
}
