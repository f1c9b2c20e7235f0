//! `cargo xtask scale`: a synthetic corpus of N passages (deterministic from a seed), indexed and queried by
//! every method without an LLM or a model — rule extraction, extractive summaries, the hashing embedder —
//! through `kgrag bench` on a release build under `/usr/bin/time -v`. Prints and writes
//! `target/scale/N/scale.json`: per-stage index time, peak memory, index size, and per-method query latency
//! p50/p95 and recall.
//!
//! The corpus: an invented world of people, places, organisations and works (names from syllables),
//! each passage titled by one of them and holding three to six fact sentences about it and others drawn
//! with a skew, so that entities recur across passages as in an encyclopaedia. Each question asks for one
//! fact of one passage, which is its gold passage.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{cargo_command, fail, run_step, workspace_root, TaskResult};

/// The options of `cargo xtask scale`.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Passages in the synthetic corpus (underscores allowed: 100_000).
    #[arg(long, default_value = "100000", value_parser = number)]
    passages: usize,
    /// Questions asked of every method.
    #[arg(long, default_value = "200", value_parser = number)]
    questions: usize,
    /// Comma-separated methods to index and query.
    #[arg(long, default_value = "dense,hipporag2,hirag,leanrag")]
    methods: String,
    /// The generator's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn number(s: &str) -> Result<usize, String> {
    s.replace('_', "")
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))
}

/// A small deterministic generator (the workspace's splitmix64).
struct Rng(kgrag_types::hashing::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Skewed towards small indices (the square of a uniform draw): a few entities recur often.
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u) * n as f64) as usize % n.max(1)
    }
}

const SYLLABLES: [&str; 24] = [
    "ar", "bel", "cor", "dun", "el", "fen", "gar", "hol", "in", "jor", "kel", "lor", "mar", "nor",
    "or", "pel", "quin", "ros", "sel", "tor", "ul", "var", "wen", "zan",
];

fn name(rng: &mut Rng, parts: usize) -> String {
    let mut s = String::new();
    for _ in 0..parts {
        s.push_str(SYLLABLES[rng.below(SYLLABLES.len())]);
    }
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// A fact template: sentence, question, and which slot answers it.
const FACTS: [(&str, &str); 6] = [
    ("{a} founded {b} in {y}.", "Who founded {b}?"),
    ("{a} was born in {b} in {y}.", "Where was {a} born?"),
    ("{a} wrote {b}, published in {y}.", "Who wrote {b}?"),
    ("{a} is located in {b}.", "Where is {a} located?"),
    ("{a} married {b} in {y}.", "Whom did {a} marry?"),
    ("{a} led {b} from {y}.", "Who led {b}?"),
];

/// Writes the corpus (`synthetic_corpus.json`) and questions (`synthetic.json`) in HippoRAG's format.
fn generate(dir: &Path, o: &Options) -> TaskResult {
    let mut rng = Rng(kgrag_types::hashing::SplitMix64(o.seed));
    let entities: Vec<String> = (0..(o.passages / 2).max(8))
        .map(|i| {
            let first = name(&mut rng, 2);
            let last = name(&mut rng, 2 + i % 2);
            format!("{first} {last}")
        })
        .collect();
    let mut corpus = Vec::with_capacity(o.passages);
    let mut facts = Vec::new();
    for p in 0..o.passages {
        let subject = &entities[p % entities.len()];
        let mut text = String::new();
        for s in 0..3 + rng.below(4) {
            let (sentence, question) = FACTS[rng.below(FACTS.len())];
            let other = &entities[rng.skewed(entities.len())];
            let year = (1500 + rng.below(520)).to_string();
            let (a, b) = if s % 2 == 0 {
                (subject.as_str(), other.as_str())
            } else {
                (other.as_str(), subject.as_str())
            };
            let fill = |t: &str| t.replace("{a}", a).replace("{b}", b).replace("{y}", &year);
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&fill(sentence));
            let answer = if question.contains("{a}") { b } else { a };
            facts.push((p, fill(question), answer.to_owned()));
        }
        corpus.push(serde_json::json!({ "title": format!("{subject} ({p})"), "text": text }));
    }
    let mut questions = Vec::with_capacity(o.questions);
    for q in 0..o.questions.min(facts.len()) {
        let (p, question, answer) = &facts[rng.below(facts.len())];
        let passage = &corpus[*p];
        questions.push(serde_json::json!({
            "id": format!("s{q}"),
            "question": question,
            "answer": answer,
            "paragraphs": [{
                "title": passage["title"],
                "paragraph_text": passage["text"],
                "is_supporting": true,
            }],
        }));
    }
    let write = |name: &str, value: &serde_json::Value| -> TaskResult {
        let path = dir.join(name);
        std::fs::write(&path, value.to_string())
            .map_err(|e| fail(format!("{}: {e}", path.display())))
    };
    write("synthetic_corpus.json", &serde_json::Value::Array(corpus))?;
    write("synthetic.json", &serde_json::Value::Array(questions))
}

/// Bytes under `path`.
fn size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        size(&p)
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// `cargo xtask scale [--passages N] [--questions Q] [--methods a,b] [--seed S]`.
/// Peak memory per 1,000 passages of every method's index, as the memory guard of `cargo xtask test`
/// measures it (the debug build, [`GUARD_SIZES`]), after the facade stopped holding the extractions twice
/// (issue 37): 1k passages 261–262 MB, 3k 547–548 MB, 142.7–143.0 MB per 1k over two runs (161 before);
/// then HiRAG's build dropped its chunks and extractions once its base layer stood: 1k 250–254 MB, 3k
/// 512–514 MB, 129.6–130.8 MB per 1k over two runs; then compact sets of source chunks and fact counts,
/// boxed relation facets and community-report inputs borrowed a level at a time: 1k 217 MB, 3k 435 MB,
/// 108.8 MB per 1k; then the extraction store's page cache cut from redb's 1 GiB to 16 MiB, one malloc
/// arena per core and the corpus keeping only triples and entity names: 1k 209–215 MB, 3k 409–422 MB,
/// 99.6–103.6 MB per 1k; then HippoRAG 2's fact vectors in f16, HiRAG built first offline, freed pages
/// returned between builds and HippoRAG's chunks taken by value: 1k 187 MB, 3k 342 MB, 77.5 MB per 1k;
/// then triples in one allocation, ids inline, the stores' keys held once and one extraction list shared
/// by the writer and the generation it commits: 1k 181–182 MB, 3k 315–317 MB, 66.7–67.5 MB per 1k;
/// then HiRAG's and LeanRAG's builds handing their records over instead of copying them, HiRAG's
/// community reports made one community at a time and the summarisers' sentence vectors given back
/// before the seeds: 1k 173 MB, 3k 294 MB, 60.3 MB per 1k; then the composer's sentence vectors in f16,
/// LeanRAG's crossing relations asked one pair at a time and HiRAG's extractions dropped once merged:
/// 1k 173 MB, 3k 287 MB, 57.0 MB per 1k; then HippoRAG 2's chunk lists as fact rows, graph node
/// sources as sorted arrays, the stores' keys in one buffer and the corpus holding triples only: 54.2 MB
/// per 1k; then HippoRAG 2's fact store without texts: 1k 167 MB, 3k 271 MB, 51.9 MB per 1k; then
/// HippoRAG 2's fact vectors in a file (`[index] fact_vectors_on_disk`): 1k 161 MB, 3k 257 MB, 48.2 MB
/// per 1k; then the offline reader's bounded memo and LeanRAG's seed vectors held once (issue 66): 1k
/// 181–182 MB, 3k 271–275 MB, 44.5–47.2 MB per 1k; then LeanRAG's relation lookup as sorted positions
/// and its aggregates' sources made again from their children, HiRAG's entity store without texts and
/// its communities' edges listed from the graph, HippoRAG 2's PPR solvers sharing one copy of the arcs
/// (issue 66, fourth round): 1k 180 MB, 3k 260 MB, 40.0 MB per 1k; then every method's entity vectors
/// in scratch files (HiRAG's and LeanRAG's screened per query), HiRAG's hierarchy packed and LeanRAG's
/// G0 made straight from HiRAG's base graph (issue 66, fifth round): 1k 168 MB, 3k 238 MB, 35.3 MB per 1k;
/// then HippoRAG 2's graph held packed beside its PPR arcs, built after its embeddings and before HiRAG,
/// and UMAP's neighbour search without a transposed copy (issue 66, sixth round): 1k 166–174 MB, 3k
/// 221–228 MB, 23.5–31.1 MB per 1k (two runs).
const GUARD_MB_PER_1K: f64 = 32.0;

/// How much the guard's figure may grow over [`GUARD_MB_PER_1K`] (the 30 %).
const GUARD_TOLERANCE: f64 = 0.30;

/// The two corpus sizes whose peaks give the guard's slope (the fixed cost of the process cancels).
const GUARD_SIZES: [usize; 2] = [1_000, 3_000];

/// `cargo xtask test`'s memory guard: synthetic corpora of [`GUARD_SIZES`] passages indexed by every
/// method with `kgrag` (`binary`, the test build's) under `/usr/bin/time -v`, as `cargo xtask scale`
/// does; the growth of the peak between them per 1,000 passages must stay within [`GUARD_TOLERANCE`] of
/// [`GUARD_MB_PER_1K`]. Skipped with a note where `/usr/bin/time` is missing.
pub fn memory_guard(binary: &Path) -> TaskResult {
    if !Path::new("/usr/bin/time").is_file() {
        println!("xtask: skipped the memory guard: /usr/bin/time is not installed");
        return Ok(());
    }
    let mut peaks = Vec::new();
    for passages in GUARD_SIZES {
        let o = Options {
            passages,
            questions: 20,
            methods: "dense,hipporag2,hirag,leanrag".into(),
            seed: 1,
        };
        let dir = generated("memory-guard", &o)?;
        let (peak_mb, wall) = peak_of_bench(binary, &dir, &o)?;
        println!("xtask: memory guard: {passages} passages, peak {peak_mb:.0} MB in {wall:.1} s");
        peaks.push(peak_mb);
    }
    let per_1k = (peaks[1] - peaks[0]) / ((GUARD_SIZES[1] - GUARD_SIZES[0]) as f64 / 1000.0);
    let limit = GUARD_MB_PER_1K * (1.0 + GUARD_TOLERANCE);
    println!(
        "xtask: memory guard: {per_1k:.1} MB per 1,000 passages (recorded {GUARD_MB_PER_1K}, limit {limit:.1})"
    );
    if per_1k > limit {
        return Err(fail(format!(
            "peak memory grew {per_1k:.1} MB per 1,000 passages between {} and {} passages: more than \
             {limit:.1} ({GUARD_MB_PER_1K} recorded + {:.0} %)",
            GUARD_SIZES[0],
            GUARD_SIZES[1],
            GUARD_TOLERANCE * 100.0
        )));
    }
    Ok(())
}

/// `kgrag bench` of the synthetic corpus in `dir` (written by [`generate`]) with `binary` under
/// `/usr/bin/time -v`, offline (rules, extractive, the hashing embedder), fresh caches: (peak MB, wall s).
fn peak_of_bench(binary: &Path, dir: &Path, o: &Options) -> TaskResult<(f64, f64)> {
    let config = dir.join("scale.toml");
    std::fs::write(
        &config,
        format!(
            "cache_dir = {:?}\nopenie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 256\n",
            dir.join("cache").display().to_string()
        ),
    )
    .map_err(|e| fail(format!("{}: {e}", config.display())))?;
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(dir.join("cache"));
    let t = Instant::now();
    let result = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(binary)
        .args(["bench", "--dataset"])
        .arg(dir.join("synthetic"))
        .args(["--methods", &o.methods, "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .arg("--no-progress")
        .output()
        .map_err(|e| fail(format!("could not run /usr/bin/time -v kgrag: {e}")))?;
    let wall = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&result.stderr);
    if !result.status.success() {
        return Err(fail(format!("kgrag bench failed:\n{stderr}")));
    }
    let peak_kb: u64 = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| fail(format!("/usr/bin/time gave no peak:\n{stderr}")))?;
    Ok((peak_kb as f64 / 1024.0, wall))
}

/// `target/<folder>/<passages>/` with the synthetic corpus of `o` generated in its `synthetic/`.
fn generated(folder: &str, o: &Options) -> TaskResult<PathBuf> {
    let dir = workspace_root()
        .join("target")
        .join(folder)
        .join(o.passages.to_string());
    let data = dir.join("synthetic");
    std::fs::create_dir_all(&data).map_err(|e| fail(format!("{}: {e}", data.display())))?;
    generate(&data, o)?;
    Ok(dir)
}

pub fn run(o: &Options) -> TaskResult {
    let t = Instant::now();
    let dir = generated("scale", o)?;
    println!(
        "xtask scale: {} passages, {} questions generated in {:.1}s",
        o.passages,
        o.questions,
        t.elapsed().as_secs_f64()
    );
    run_step(
        "cargo build --release -p kgrag-cli",
        cargo_command().args(["build", "--release", "-p", "kgrag-cli"]),
    )?;
    let binary = workspace_root().join("target/release/kgrag");
    let out = dir.join("out");
    let (peak_mb, wall) = peak_of_bench(&binary, &dir, o)?;
    let report: serde_json::Value = std::fs::read(out.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| fail(format!("no report in {}", out.display())))?;
    let summary = serde_json::json!({
        "passages": o.passages,
        "questions": o.questions,
        "wall_s": wall,
        "peak_rss_mb": peak_mb,
        "cache_mb": size(&dir.join("cache")) as f64 / 1048576.0,
        "index_stages_s": report["index"]["stages"],
        "methods": report["methods"].as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), serde_json::json!({
            "latency_ms": v["latency_ms"],
            "recall": v["recall"],
        }))).collect::<serde_json::Map<_, _>>()),
    });
    let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
    println!("{text}");
    std::fs::write(dir.join("scale.json"), &text)
        .map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    Ok(())
}
