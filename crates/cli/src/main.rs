//! The `kgrag` command line (the binary of `kgrag-cli`, over the `kgrag` library and `kgrag-bench`): `index`, `query`, `insert`, `delete`, `export`, `stats` on an index directory,
//! and `bench` on a dataset. Exit codes: 0 success, 1 error, 2 usage.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kgrag::config::Config;
use kgrag::{Index, ReloadPolicy};
use kgrag_bench::{run, BenchArgs, METHODS};

mod distributed;
mod indexing;
mod terminal;

use indexing::{IndexRun, ReadArgs, Selection};

#[derive(Parser)]
#[command(
    name = "kgrag",
    version,
    about = "Knowledge-graph RAG: HippoRAG 2, HiRAG, LeanRAG and dense retrieval, side by side",
    after_help = "Configuration: --config FILE, else ./kgrag.toml when present, else the defaults (offline: \
                  local MiniLM embeddings, rule extraction, extractive summaries and answers). \
                  Logs: RUST_LOG=info (or debug, kgrag=debug, …)."
)]
struct Cli {
    /// No progress bars or stage lines on stderr (errors are still printed).
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build an index of documents, or bring it up to date: a folder (recursively; hidden and
    /// .gitignore'd files left out) or files — PDF, Word, PowerPoint, Excel/ODS, HTML, EPUB, text and
    /// Markdown (one document each, cited to the page), .jsonl ({"id"?, "title"?, "text"} per line) or
    /// .json (a HippoRAG corpus). A file that cannot be read is reported and skipped. Run again on the same
    /// folder, it adds new and changed files and removes deleted ones.
    Index(IndexRun),
    /// Answer a question from an index.
    Query(QueryArgs),
    /// Show what kgrag reads from files: their text, block by block, with each block's page (slide,
    /// sheet, chapter) and section; --json adds the chunks and each chunk's pages.
    Read(ReadArgs),
    /// Add documents to an index.
    Insert {
        /// Files or folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        selection: Selection,
        /// The index directory.
        #[arg(long)]
        index: PathBuf,
        /// Configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Remove documents from an index by id (as `kgrag stats --documents` lists them).
    Delete {
        /// Document ids.
        #[arg(required = true)]
        ids: Vec<String>,
        /// The index directory.
        #[arg(long)]
        index: PathBuf,
        /// Configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Export a graph.
    Export {
        /// What to export.
        format: ExportFormat,
        /// The index directory.
        #[arg(long)]
        index: PathBuf,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
        /// Whose graph: hipporag2 (default when indexed) or hirag.
        #[arg(long)]
        method: Option<String>,
    },
    /// Take jobs of a distributed build (`kgrag index --distribute`) from the index's PostgreSQL database
    /// and do them with this machine's models, until the queue is drained and no coordinator runs (or
    /// Ctrl-C / SIGTERM, after the jobs in hand). Start any number, on any machines.
    Worker(distributed::WorkerArgs),
    /// The queue of a distributed build: `status`, `retry-failed`.
    Queue {
        #[command(subcommand)]
        action: distributed::QueueAction,
    },
    /// Serve an index over HTTP: a JSON API (query, compare strategies, documents, graph, communities), an
    /// OpenAI-compatible chat endpoint (model = strategy), MCP at /mcp, Prometheus /metrics and a web page
    /// at / that compares the strategies side by side. Stops on Ctrl-C or SIGTERM after requests in flight.
    Serve(ServeArgs),
    /// Serve an index's MCP tools (search, answer, add_documents, list_strategies) over stdin/stdout, for
    /// an MCP client that starts the server itself.
    Mcp {
        /// The index directory.
        #[arg(long)]
        index: PathBuf,
        /// Configuration file (default: ./kgrag.toml, else the one the index was built with).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// What an index holds and what it cost.
    Stats {
        /// The index directory.
        #[arg(long)]
        index: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Also list the documents.
        #[arg(long)]
        documents: bool,
    },
    /// Build one index for a dataset, run the methods on every question, judge their answers (with a judge
    /// model), write report.json, report.md, report.html and plots, and print the tables.
    Bench {
        /// Dataset name (musique-100, ultradomain-mix, kgrag-fixture) or a folder in HippoRAG's format
        /// (<name>_corpus.json, <name>.json, optionally openie*.json); default: musique-100 if present under
        /// the data folder, else the bundled fixture.
        #[arg(long)]
        dataset: Option<String>,
        /// Comma-separated methods (default: all available; `none`: only judge --answers files).
        #[arg(long, value_delimiter = ',',
              value_parser = clap::builder::PossibleValuesParser::new(METHODS.iter().copied().chain(["none"])))]
        methods: Vec<String>,
        /// Configuration file (TOML); default: offline (local MiniLM, no LLM).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Only the first N questions.
        #[arg(long)]
        limit: Option<usize>,
        /// Only the first N corpus entries (documents or passages), for smaller runs.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        docs: Option<u64>,
        /// The method every other method's answers are judged against (default: [eval] baseline, dense).
        #[arg(long)]
        baseline_method: Option<String>,
        /// Answers from a file, judged like a method: NAME=FILE (JSON lines {"query", "answer"}), or a
        /// name the dataset publishes (ultradomain-mix: hirag-deepseek, naive-deepseek). Repeatable.
        #[arg(long)]
        answers: Vec<String>,
        /// An earlier report (its folder or report.json): print and plot the changes against it.
        #[arg(long)]
        compare: Option<PathBuf>,
        /// Keep only the passages the selected questions list (their paragraphs and gold passages): a small,
        /// easier corpus for smoke runs such as CI's; not comparable with full-corpus figures.
        #[arg(long)]
        question_corpus: bool,
        /// Ignore the dataset's own triples (musique-100's GPT-3.5 OpenIE): every chunk is extracted as
        /// `openie` says (offline: the rule extractor).
        #[arg(long)]
        no_dataset_triples: bool,
        /// Output folder (default: target/bench/<dataset>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Data folder (default: $KGRAG_DATA_DIR, else datasets).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Never draw progress bars.
        #[arg(long)]
        no_progress: bool,
    },
}

#[derive(Args)]
struct QueryArgs {
    /// The question.
    question: String,
    /// The index directory.
    #[arg(long)]
    index: PathBuf,
    /// Strategy (default: [retriever] strategy): dense, hipporag2, hirag, hirag-local, hirag-global,
    /// hirag-bridge, hirag-nobridge, leanrag.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(METHODS.iter().copied()))]
    strategy: Option<String>,
    /// Passages to return (default: [retriever] top_k).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    top_k: Option<u64>,
    /// Also print the rendered context the reader saw.
    #[arg(long)]
    context: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Configuration file (default: ./kgrag.toml, else the one the index was built with).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct ServeArgs {
    /// An index to serve: NAME=DIR, or DIR (served under its folder's name); repeatable. The first is
    /// the default index, which the routes without a name (/v1/query, …) answer from.
    #[arg(long, value_name = "[NAME=]DIR", required_unless_present = "indexes")]
    index: Vec<String>,
    /// A folder of indexes: every sub-folder is served under its name, and POST /v1/indexes (an admin
    /// key) makes new ones there.
    #[arg(long, value_name = "ROOT")]
    indexes: Option<PathBuf>,
    /// The default index (default: the first --index).
    #[arg(long, value_name = "NAME")]
    default_index: Option<String>,
    /// At most this many indexes in memory: past it, the least recently used one no request holds is
    /// dropped (and loaded again on its next use).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_loaded: Option<u64>,
    /// At most this many MiB of loaded indexes (each counted at what its load added to the process),
    /// enforced like --max-loaded.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    memory_budget_mib: Option<u64>,
    /// A keys file (TOML): each key with the indexes it may read and change, and whether it may create
    /// and drop indexes (docs/server.md); reloaded on SIGHUP. Not with --api-key-env.
    #[arg(long, value_name = "FILE", conflicts_with = "api_key_env")]
    keys: Option<PathBuf>,
    /// Address to listen on; a non-loopback address needs --api-key-env (or --insecure-no-auth).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// Configuration file (default: ./kgrag.toml, else the one the index was built with).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The environment variable holding the API key: every endpoint but /health and the page then needs
    /// `Authorization: Bearer <key>`.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// Listen on a non-loopback address without an API key.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Create an empty index in each --index folder that holds none (documents then come by POST
    /// /v1/documents or the page's upload).
    #[arg(long)]
    create: bool,
    /// The largest request body, in MiB.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    max_body_mib: u64,
    /// Seconds a query may take before a 503 (document changes are not cut short).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// Requests answered at once; others wait (up to --timeout), then get a 503.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_concurrency: u64,
    /// A host name accepted in `Host` besides loopback's (e.g. behind a proxy): by every path without a
    /// key, by /mcp always; repeatable.
    #[arg(long)]
    allowed_host: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// GraphML (nodes and weighted edges with their attributes).
    Graphml,
}

/// `--config F`, else `./kgrag.toml`, else `None`.
fn config_arg(path: Option<&Path>) -> kgrag::Result<Option<Config>> {
    match path {
        Some(p) => Config::load(p).map(Some),
        None => {
            let local = Path::new("kgrag.toml");
            if local.is_file() {
                Config::load(local).map(Some)
            } else {
                Ok(None)
            }
        }
    }
}

/// `NAME=DIR` or `DIR` (named after its folder) of `--index`.
fn index_spec(spec: &str) -> kgrag::Result<(String, PathBuf)> {
    if let Some((name, dir)) = spec.split_once('=') {
        if kgrag_server::catalog::valid_name(name) && !dir.is_empty() {
            return Ok((name.to_owned(), PathBuf::from(dir)));
        }
    }
    let dir = PathBuf::from(spec);
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| kgrag_server::catalog::valid_name(n))
        .map(str::to_owned)
        .ok_or_else(|| {
            kgrag::KgragError::Config(format!(
                "--index {spec}: its folder's name cannot name an index (1 to 64 letters, digits, '_', \
                 '-' or '.'): give --index NAME={spec}"
            ))
        })?;
    Ok((name, dir))
}

/// Opens the index in `dir` with `config` (else the one it was built with).
fn open(dir: &Path, config: Option<Config>, progress: bool) -> kgrag::Result<Index> {
    let mut options = Index::options().progress(progress);
    if let Some(c) = config {
        options = options.config(c);
    }
    options.open(dir)
}

fn progress(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

async fn run_query(args: QueryArgs, quiet: bool) -> kgrag::Result<()> {
    let QueryArgs {
        question,
        index,
        strategy,
        top_k,
        context,
        json,
        config,
    } = args;
    let config = config_arg(config.as_deref())?;
    let handle = open(&index, config, progress(quiet))?;
    let strategy = strategy.unwrap_or_else(|| handle.config().retriever.strategy.clone());
    let top_k = top_k.map_or(handle.config().retriever.top_k, |k| {
        usize::try_from(k).unwrap_or(usize::MAX)
    });
    let searcher = handle.reader_with(ReloadPolicy::Manual)?.searcher();
    let a = searcher.answer(&question, &strategy, top_k).await?;
    if json {
        let mut v = serde_json::json!({
            "strategy": a.strategy,
            "question": a.question,
            "answer": a.answer,
            "citations": a.citations,
            "dropped_citations": a.dropped_citations,
            "passages": a.passages,
            "context_tokens": a.context.context_tokens,
            "stats": a.context.stats,
            "retrieve_ms": a.retrieve_ms,
            "answer_ms": a.answer_ms,
        });
        if context {
            v["context"] = serde_json::Value::String(a.context.rendered.clone());
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("strategy: {}", a.strategy);
    println!("answer: {}", a.answer.as_deref().unwrap_or("(no reader)"));
    if !a.citations.is_empty() {
        println!("cited:");
        for c in &a.citations {
            let label = c
                .source
                .as_ref()
                .map_or_else(|| c.chunk_id.to_string(), |s| s.label.clone());
            println!("  [{}] {label}", c.number);
        }
    }
    println!("passages:");
    for p in &a.passages {
        let preview: String = p
            .text
            .chars()
            .take(160)
            .collect::<String>()
            .replace('\n', " ");
        let cite = p
            .source
            .as_ref()
            .map_or_else(|| p.documents.join(", "), |s| s.label.clone());
        println!("[{}] {cite}  (score {:.4})", p.rank, p.score);
        println!(
            "    {}{}",
            preview,
            if p.text.chars().count() > 160 {
                "…"
            } else {
                ""
            }
        );
    }
    if a.context
        .stats
        .get("ppr_not_converged")
        .is_some_and(|v| *v > 0.0)
    {
        println!("note: PPR stopped at ppr_max_iter before converging; scores are approximate");
    }
    if context {
        println!(
            "context ({} tokens):\n{}",
            a.context.context_tokens, a.context.rendered
        );
    }
    Ok(())
}

fn run_stats(index: PathBuf, json: bool, documents: bool) -> kgrag::Result<()> {
    let searcher = Index::inspect(&index)?
        .reader_with(ReloadPolicy::Manual)?
        .searcher();
    let mut s = searcher.stats()?;
    if documents {
        s["document_list"] = serde_json::to_value(searcher.documents())?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "index: {} (generation {})",
        index.display(),
        s["generation"]
    );
    println!("storage: {}", s["storage"]);
    println!("documents: {}, chunks: {}", s["documents"], s["chunks"]);
    println!("embedder: {}", s["embedder"]);
    if let Some(methods) = s["methods"].as_object() {
        for (name, v) in methods {
            println!("{name}: {v}");
        }
    }
    println!(
        "bytes by part: {} (total {})",
        s["bytes_by_part"], s["bytes_total"]
    );
    println!("cache: {}", s["cache"]);
    println!("LLM usage by stage: {}", s["llm_by_stage"]);
    if let Some(rows) = s["llm_estimate"]["by_stage"].as_array() {
        println!("LLM estimate of the last build against what it used (calls, prompt / completion tokens):");
        for r in rows {
            let (e, a) = (&r["estimated"], &r["actual"]);
            println!(
                "  {:<11} estimated {:>8} calls {:>11} / {:>10}   actual {:>8} calls {:>11} / {:>10}",
                r["stage"].as_str().unwrap_or("?"),
                e["calls"],
                e["prompt_tokens"],
                e["completion_tokens"],
                a["calls"],
                a["prompt_tokens"],
                a["completion_tokens"]
            );
        }
        if let Some(cost) = s["llm_estimate"]["cost"].as_f64() {
            println!("  estimated cost: {cost:.2}");
        }
    }
    println!(
        "last build: stages {} extraction {}",
        s["last_build_stages"], s["last_build_extraction"]
    );
    if documents {
        for d in searcher.documents() {
            println!("  {}\t{} chunks\t{}", d.id, d.chunks.len(), d.source);
        }
    }
    Ok(())
}

fn run_export(index: PathBuf, output: PathBuf, method: Option<String>) -> kgrag::Result<()> {
    let searcher = Index::inspect(&index)?
        .reader_with(ReloadPolicy::Manual)?
        .searcher();
    let (name, graphml) = searcher.graphml(method.as_deref())?;
    kgrag::graph_store::persist::write_atomic(&output, graphml.as_bytes())?;
    println!("wrote the {name} graph to {}", output.display());
    Ok(())
}

/// What a command can fail with.
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// The index, its configuration or its input.
    #[error(transparent)]
    Kgrag(#[from] kgrag::KgragError),
    /// The bench.
    #[error(transparent)]
    Bench(#[from] kgrag_bench::BenchError),
    /// The server.
    #[error(transparent)]
    Server(#[from] kgrag_server::ServerError),
}

async fn run_serve(args: ServeArgs) -> Result<(), CliError> {
    let api_key = match &args.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(k) if !k.trim().is_empty() => Some(k.trim().to_owned()),
            _ => {
                return Err(kgrag::KgragError::Config(format!(
                    "--api-key-env {var}: the environment variable is not set or empty"
                ))
                .into())
            }
        },
        None => None,
    };
    let config = config_arg(args.config.as_deref())?;
    let mut named = Vec::with_capacity(args.index.len());
    for spec in &args.index {
        let (name, dir) = index_spec(spec)?;
        if !args.create {
            // Checked now (its manifest only: it loads on first use), so that a wrong folder fails here.
            Index::built_with(&dir).map_err(|e| {
                kgrag::KgragError::Index(format!(
                    "--index {spec}: {e}{}",
                    if dir.exists() {
                        ""
                    } else {
                        "; give --create to start an empty index there"
                    }
                ))
            })?;
        }
        named.push(kgrag_server::NamedIndex {
            name,
            source: kgrag_server::IndexSource::Folder {
                path: dir,
                create: args.create,
            },
        });
    }
    let indexes = kgrag_server::Indexes {
        named,
        root: args.indexes.clone(),
        config,
        default: args.default_index.clone(),
        limits: kgrag_server::Limits {
            max_loaded: args
                .max_loaded
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            memory_budget: args.memory_budget_mib.map(|m| m.saturating_mul(1 << 20)),
        },
    };
    let options = kgrag_server::ServeOptions {
        listen: args.listen,
        api_key,
        keys_file: args.keys.clone(),
        insecure_no_auth: args.insecure_no_auth,
        body_limit: usize::try_from(args.max_body_mib << 20).unwrap_or(usize::MAX),
        request_timeout: std::time::Duration::from_secs(args.timeout),
        max_concurrency: usize::try_from(args.max_concurrency).unwrap_or(usize::MAX),
        allowed_hosts: args.allowed_host,
    };
    let listener = kgrag_server::bind(&options).await?;
    let addr = listener
        .local_addr()
        .map_err(kgrag_server::ServerError::Io)?;
    let server = kgrag_server::Server::with_indexes(indexes, options)?;
    // The default index is loaded before the address is printed: the first question does not wait.
    let served = match server.default_index().map(str::to_owned) {
        Some(name) => {
            let generation = server.load(&name).await?;
            format!("index {name}, generation {generation}")
        }
        None => "no default index".to_owned(),
    };
    let names = server.index_names();
    // The one line a script waits for (and a person reads): where the page is.
    println!(
        "kgrag serve: http://{addr}/ ({served}; {} served: {}; API /v1, OpenAI /v1/chat/completions, \
         MCP /mcp, metrics /metrics; Ctrl-C stops)",
        names.len(),
        names.join(", ")
    );
    let shutdown = async {
        kgrag_server::shutdown_signal().await;
        eprintln!(
            "kgrag serve: stopping: finishing the requests in flight and a change that has started \
             (a second Ctrl-C or SIGTERM stops at once)"
        );
        tokio::spawn(async {
            kgrag_server::shutdown_signal().await;
            eprintln!(
                "kgrag serve: stopped at once; a change in progress was not committed (the index keeps \
                 its last commit)"
            );
            std::process::exit(130);
        });
    };
    server.run(listener, shutdown).await?;
    eprintln!("kgrag serve: stopped");
    Ok(())
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// glibc's allocator gives each thread that contends for memory an arena of its own, up to eight per
/// core, and memory freed in one arena serves only that arena's threads. An index build passes large
/// vectors between the async runtime's and the encoder's threads, so the arenas fragmented: on
/// `ultradomain-mix --docs 10` (every method) peak RSS was 763 MB with glibc's default and 619 MB with
/// one arena per core, in the same time within the noise (`docs/perf.md`). So the command line asks for
/// one arena per core, unless `MALLOC_ARENA_MAX` is set (then glibc has read it and it stands).
#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
fn limit_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
    #[allow(unsafe_code)]
    // SAFETY: `mallopt` sets one of the allocator's parameters; it is called first thing in `main`,
    // before any other thread exists, and a refusal (return value 0) leaves glibc's default.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(all(
    not(all(target_os = "linux", target_env = "gnu")),
    not(feature = "mimalloc")
))]
fn limit_malloc_arenas() {}

/// The program's allocator: mimalloc (feature `mimalloc`, on by default). glibc's, even with one arena per
/// core and its free memory trimmed while a build runs (below), spends its time searching the holes a
/// build's freed records leave: HiRAG alone at 30,000 synthetic passages took 1:33–1:36 with glibc and
/// 1:10 with mimalloc, its reports stage 36 s and 19 s, in less memory (`docs/perf.md`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc gives freed memory back to the system at once instead of a second later (its purge delay: 0),
/// unless `MIMALLOC_PURGE_DELAY` (or its older name `MIMALLOC_RESET_DELAY`) says otherwise. With its default a build holds more: every method at
/// 10,000 synthetic passages peaked at 612 MB, and at 555 MB with 0, in the same time (`docs/perf.md`).
#[cfg(feature = "mimalloc")]
fn purge_freed_memory_at_once() {
    /// `mi_option_purge_delay` in mimalloc v3's option list (the bindings name no constant for it).
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    /// Its defaults (v3: 1,000 ms, as `MIMALLOC_VERBOSE=1` lists the options; v2: 10 ms), checked before
    /// it is set: another value means the variable set it, or that the option list changed (then it is
    /// left alone).
    const DEFAULT_PURGE_DELAYS: [libc::c_long; 2] = [1000, 10];
    if ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: reading and setting an allocator option are plain calls on mimalloc's option table, which
    // is initialised before `main` runs; a wrong option number is caught by the check of its default.
    unsafe {
        if DEFAULT_PURGE_DELAYS.contains(&libmimalloc_sys::mi_option_get(PURGE_DELAY)) {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
        }
    }
}

fn main() -> ExitCode {
    #[cfg(feature = "mimalloc")]
    purge_freed_memory_at_once();
    #[cfg(not(feature = "mimalloc"))]
    {
        limit_malloc_arenas();
        kgrag::memory::return_freed_memory_in_background();
    }
    let cli = Cli::parse();
    init_tracing();
    kgrag::progress::set_quiet(cli.quiet);
    terminal::install();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kgrag: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let quiet = cli.quiet;
    let (what, result): (&str, Result<(), CliError>) = match cli.command {
        Command::Index(run) => (
            "index",
            runtime
                .block_on(indexing::run_index(run, quiet))
                .map_err(CliError::from),
        ),
        Command::Read(args) => ("read", indexing::run_read(args).map_err(CliError::from)),
        Command::Query(args) => (
            "query",
            runtime
                .block_on(run_query(args, quiet))
                .map_err(CliError::from),
        ),
        Command::Insert {
            paths,
            selection,
            index,
            config,
        } => (
            "insert",
            runtime
                .block_on(indexing::run_change(
                    index,
                    config,
                    quiet,
                    Some((paths, selection)),
                    None,
                ))
                .map_err(CliError::from),
        ),
        Command::Delete { ids, index, config } => (
            "delete",
            runtime
                .block_on(indexing::run_change(index, config, quiet, None, Some(ids)))
                .map_err(CliError::from),
        ),
        Command::Serve(args) => ("serve", runtime.block_on(run_serve(args))),
        Command::Worker(args) => (
            "worker",
            runtime.block_on(distributed::run_worker(args, quiet)),
        ),
        Command::Queue { action } => ("queue", runtime.block_on(distributed::run_queue(action))),
        Command::Mcp { index, config } => (
            "mcp",
            runtime.block_on(async {
                let config = config_arg(config.as_deref())?;
                let handle = open(&index, config, false)?;
                kgrag_server::mcp::serve_stdio(handle).await?;
                Ok(())
            }),
        ),
        Command::Export {
            format: ExportFormat::Graphml,
            index,
            output,
            method,
        } => (
            "export",
            run_export(index, output, method).map_err(CliError::from),
        ),
        Command::Stats {
            index,
            json,
            documents,
        } => (
            "stats",
            run_stats(index, json, documents).map_err(CliError::from),
        ),
        Command::Bench {
            dataset,
            methods,
            config,
            limit,
            docs,
            baseline_method,
            answers,
            compare,
            question_corpus,
            no_dataset_triples,
            out,
            data_dir,
            no_progress,
        } => {
            let args = BenchArgs {
                dataset,
                methods,
                limit,
                docs: docs.map(|d| d as usize),
                question_corpus,
                no_dataset_triples,
                out,
                config,
                data_dir: data_dir.unwrap_or_else(kgrag::eval::data_dir),
                progress: !no_progress && !quiet && std::io::stderr().is_terminal(),
                baseline: baseline_method,
                answers,
                compare,
            };
            let r = runtime.block_on(run(&args)).map(|outcome| {
                println!("{}", outcome.report.to_markdown());
                if let Some(c) = &outcome.comparison {
                    println!("{}", c.to_markdown());
                }
                println!("report: {}", outcome.path.display());
                if let Some(dir) = outcome.path.parent() {
                    println!(
                        "also: {} and {} (plots in {})",
                        dir.join(kgrag::eval::render::MARKDOWN_FILE).display(),
                        dir.join(kgrag::eval::render::HTML_FILE).display(),
                        dir.join(kgrag::eval::render::PLOTS_DIR).display()
                    );
                }
            });
            if r.is_err() && args.methods.is_empty() {
                eprintln!("(methods available: {})", METHODS.join(", "));
            }
            ("bench", r.map_err(CliError::from))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kgrag {what}: error: {e}");
            ExitCode::FAILURE
        }
    }
}
