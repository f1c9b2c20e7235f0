//! `kgrag index`, `insert`, `delete` and `read`: documents into an index, and what a file reads as.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use kgrag::config::Config;
use kgrag::documents::{ReadOptions, ReadReport, SourceDoc};
use kgrag::{Index, ReloadPolicy};

use crate::{config_arg, open, progress};

/// Which files of a folder are read.
#[derive(Args, Clone, Default)]
pub(crate) struct Selection {
    /// Only files matching this glob (relative to the folder, e.g. `*.pdf`, `reports/**`); repeatable.
    #[arg(long, value_name = "GLOB")]
    pub(crate) include: Vec<String>,
    /// Leave out files matching this glob (e.g. `drafts/**`); repeatable. Hidden files and what
    /// `.gitignore` or `.kgragignore` files exclude are always left out.
    #[arg(long, value_name = "GLOB")]
    pub(crate) exclude: Vec<String>,
}

impl Selection {
    fn options(&self, config: &Config) -> ReadOptions {
        ReadOptions {
            limits: config.documents.limits(),
            include: self.include.clone(),
            exclude: self.exclude.clone(),
        }
    }
}

/// Reads `paths` and says what was read (to stderr, unless quiet); the report.
fn read(paths: &[PathBuf], selection: &Selection, config: &Config) -> kgrag::Result<ReadReport> {
    let t = Instant::now();
    let report = kgrag::documents::read_paths(paths, &selection.options(config))?;
    let summary = report.summary();
    for line in summary.lines() {
        kgrag::progress::say(line);
    }
    kgrag::progress::say(&format!("  (read in {:.1} s)", t.elapsed().as_secs_f64()));
    Ok(report)
}

/// What `kgrag index` was asked.
#[derive(Args)]
pub(crate) struct IndexRun {
    /// Files or folders.
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) selection: Selection,
    /// The index directory (created if missing).
    #[arg(long)]
    pub(crate) index: PathBuf,
    /// Configuration file (TOML).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Comma-separated methods to index (dense, hipporag2, hirag, leanrag); default: [index] methods.
    #[arg(long, value_delimiter = ',',
          value_parser = clap::builder::PossibleValuesParser::new(kgrag::methods::METHOD_NAMES.iter().copied()))]
    pub(crate) methods: Vec<String>,
    /// Rebuild even when the directory holds an index built with other settings.
    #[arg(long)]
    pub(crate) force: bool,
    /// A HippoRAG OpenIE results file (`openie_results_ner_*.json`): chunks it covers take its triples
    /// instead of being extracted.
    #[arg(long)]
    pub(crate) openie_cache: Option<PathBuf>,
    /// Print what the build would ask of the chat model (calls, prompt and completion tokens per
    /// stage, the cost with prices in [chat]) and stop: no model is called, nothing is written.
    #[arg(long)]
    pub(crate) estimate: bool,
    /// Coordinate a build split across machines (an index in PostgreSQL): the extraction, embeddings,
    /// summaries and reports go to `kgrag worker`s through the database; the stages over the whole corpus
    /// and the commit run here. Run it again after a failure: finished work is kept.
    #[arg(long)]
    pub(crate) distribute: bool,
    /// With --distribute: commit even when jobs failed on every attempt (they are named).
    #[arg(long, requires = "distribute")]
    pub(crate) allow_failed: bool,
    /// With --distribute: attempts of a job before it is parked as failed.
    #[arg(long, requires = "distribute", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) max_attempts: u32,
}

pub(crate) async fn run_index(run: IndexRun, quiet: bool) -> kgrag::Result<()> {
    let IndexRun {
        paths,
        index,
        config,
        methods,
        force,
        openie_cache,
        estimate,
        selection,
        distribute,
        allow_failed,
        max_attempts,
    } = run;
    let config = config_arg(config.as_deref())?.unwrap_or_default();
    let report = read(&paths, &selection, &config)?;
    let docs = report.docs;
    let mut prefilled = HashMap::new();
    if let Some(path) = &openie_cache {
        for doc in kgrag::openie::read_openie_file(path)? {
            prefilled
                .entry(doc.extraction.chunk_id.clone())
                .or_insert(doc.extraction);
        }
    }
    if estimate {
        return run_estimate(docs, &index, config, &methods, &prefilled);
    }
    let mut options = Index::options()
        .config(config.clone())
        .progress(progress(quiet));
    if distribute {
        options = options.distribute(kgrag::distribute::DistributeOptions {
            allow_failed,
            max_attempts,
            ..Default::default()
        });
    }
    let handle = options.open_or_create(&index)?;
    if let Some(manifest) = handle
        .committed()
        .or_else(|e| if force { Ok(None) } else { Err(e) })?
    {
        if !force {
            handle.check_compatible(&manifest)?;
            let methods_now: Vec<String> = if methods.is_empty() {
                config.index.methods.clone()
            } else {
                methods.clone()
            };
            let same_methods = methods_now.len() == manifest.methods.len()
                && methods_now.iter().all(|m| manifest.methods.contains_key(m));
            // Chunks whose extraction failed in the last build (every attempt at a model call failed) are
            // retried by a rerun: not up to date while there are any. (A reply that holds no usable JSON
            // is not a failure: the chunk is stored with what could be read, and its issues counted.)
            let failed = manifest.extraction.get("failed").copied().unwrap_or(0);
            if same_methods && failed == 0 {
                return sync(&handle, &index, &manifest, docs).await;
            }
            if failed > 0 && same_methods {
                kgrag::progress::say(&format!(
                    "the last build of {} left {failed} chunks unextracted: building again, retrying them \
                     (finished extractions and model replies come from the cache)",
                    index.display()
                ));
            }
        }
    }
    let mut writer = handle.writer()?;
    writer.rebuild(docs, &methods, prefilled).await?;
    let generation = writer.commit().await?;
    drop(writer);
    let searcher = handle.reader_with(ReloadPolicy::Manual)?.searcher();
    println!(
        "indexed {} documents ({} chunks) into {} — generation {generation}",
        searcher.documents().len(),
        searcher.corpus().chunks.len(),
        index.display()
    );
    Ok(())
}

/// A re-run on an index built with the same settings and methods: only what changed — documents new to
/// the index are added, those whose text or file changed are replaced, those no longer among the inputs
/// are deleted (by id; a file's id is its path in the folder).
async fn sync(
    handle: &Index,
    index: &Path,
    manifest: &kgrag::index_dir::Manifest,
    docs: Vec<SourceDoc>,
) -> kgrag::Result<()> {
    let old: BTreeMap<&str, (&kgrag::types::DocId, Option<&str>)> = manifest
        .documents
        .iter()
        .map(|d| {
            (
                d.id.as_str(),
                (&d.doc_id, d.file.as_ref().map(|f| f.digest.as_str())),
            )
        })
        .collect();
    let mut added = Vec::new();
    let mut changed = Vec::new();
    let mut new_ids = std::collections::HashSet::new();
    for d in docs {
        new_ids.insert(d.id.clone());
        let digest = d.origin.as_ref().map(|o| o.digest.as_str());
        match old.get(d.id.as_str()) {
            Some((doc_id, old_digest)) => {
                let same_file = old_digest.is_none() || digest.is_none() || *old_digest == digest;
                if **doc_id != d.document.id || !same_file {
                    changed.push(d);
                }
            }
            None => added.push(d),
        }
    }
    let removed: Vec<String> = manifest
        .documents
        .iter()
        .filter(|d| !new_ids.contains(&d.id))
        .map(|d| d.id.clone())
        .collect();
    if added.is_empty() && changed.is_empty() && removed.is_empty() {
        kgrag::progress::say(&format!(
            "the index in {} is up to date (generation {}, {} documents)",
            index.display(),
            manifest.generation,
            manifest.documents.len()
        ));
        return Ok(());
    }
    let mut writer = handle.writer()?;
    let gone: Vec<String> = removed
        .iter()
        .cloned()
        .chain(changed.iter().map(|d| d.id.clone()))
        .collect();
    if !gone.is_empty() {
        writer.delete_documents(&gone).await?;
    }
    let (n_added, n_changed) = (added.len(), changed.len());
    let mut incoming = added;
    incoming.extend(changed);
    if !incoming.is_empty() {
        writer.add_documents(incoming).await?;
    }
    let generation = writer.commit().await?;
    println!(
        "synced {}: {n_added} added, {n_changed} changed, {} removed — generation {generation}",
        index.display(),
        removed.len()
    );
    Ok(())
}

/// `kgrag index --estimate`: the expected LLM use of building `docs` into `index`, printed; the chat
/// model is built (no request is sent) and nothing is written — not even the cache folder.
fn run_estimate(
    docs: Vec<SourceDoc>,
    index: &Path,
    config: Config,
    methods: &[String],
    prefilled: &HashMap<kgrag::types::ChunkId, kgrag::types::Extraction>,
) -> kgrag::Result<()> {
    let chat: Option<std::sync::Arc<dyn kgrag::types::ChatModel>> = match &config.chat {
        Some(c) => Some(kgrag::llm::build_chat(c, None)?),
        None => None,
    };
    // The estimate embeds nothing: a hashing embedder stands in for loading the configured one.
    let embedder = kgrag::llm::build_embedder(
        &kgrag::llm::EmbedderConfig::Hashing(Default::default()),
        None,
    )?;
    let cache_dir = config.cache_dir_or(&index.join("cache"));
    let handle = Index::options()
        .config(config)
        .models(embedder, chat)
        .cache_dir(cache_dir)
        .in_memory()?;
    let keys: std::collections::HashSet<kgrag::types::ChunkId> =
        prefilled.keys().cloned().collect();
    let e = handle.estimate(docs, methods, &keys)?;
    print!("{}", e.render());
    Ok(())
}

/// `kgrag insert` (with `insert`) or `kgrag delete` (with `delete`).
pub(crate) async fn run_change(
    index: PathBuf,
    config: Option<PathBuf>,
    quiet: bool,
    insert: Option<(Vec<PathBuf>, Selection)>,
    delete: Option<Vec<String>>,
) -> kgrag::Result<()> {
    let config = config_arg(config.as_deref())?;
    let docs = match &insert {
        Some((paths, selection)) => {
            let reading = match &config {
                Some(c) => c.clone(),
                None => Index::built_with(&index).unwrap_or_default(),
            };
            Some(read(paths, selection, &reading)?.docs)
        }
        None => None,
    };
    let handle = open(&index, config, progress(quiet))?;
    let mut writer = handle.writer()?;
    match (docs, delete) {
        (Some(docs), _) => {
            let mut s = writer.add_documents(docs).await?;
            s.generation = writer.commit().await?;
            println!(
                "inserted {} documents ({} new chunks){} — generation {}",
                s.documents,
                s.chunks,
                if s.skipped.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} already present: {}",
                        s.skipped.len(),
                        s.skipped.join(", ")
                    )
                },
                s.generation
            );
        }
        (None, Some(ids)) => {
            let mut s = writer.delete_documents(&ids).await?;
            s.generation = writer.commit().await?;
            println!(
                "deleted {} documents ({} chunks){} — generation {}",
                s.documents,
                s.chunks,
                if s.skipped.is_empty() {
                    String::new()
                } else {
                    format!("; not found: {}", s.skipped.join(", "))
                },
                s.generation
            );
        }
        (None, None) => {}
    }
    Ok(())
}

/// What `kgrag read` prints.
#[derive(Args)]
pub(crate) struct ReadArgs {
    /// Files or folders.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print JSON: per file its text, blocks (with pages and sections), the chunks the configured chunker
    /// cuts with each chunk's pages and section, and the time reading took.
    #[arg(long)]
    json: bool,
    /// Configuration file (its [documents] limits and [index] chunking).
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    selection: Selection,
}

/// `kgrag read`: what kgrag reads from files — their text and where each block came from.
pub(crate) fn run_read(args: ReadArgs) -> kgrag::Result<()> {
    let config = config_arg(args.config.as_deref())?.unwrap_or_default();
    let options = args.selection.options(&config);
    let chunker = kgrag::text::Chunker::new(config.index.chunking)?;
    let mut files = Vec::new();
    for p in &args.paths {
        let t = Instant::now();
        let report = kgrag::documents::read_paths(std::slice::from_ref(p), &options)?;
        let secs = t.elapsed().as_secs_f64();
        if !args.json {
            print!("{}", report.summary());
        }
        for d in &report.docs {
            let origin = d.origin.as_ref();
            let map = origin.and_then(|o| o.map.clone()).unwrap_or_default();
            let chunks: Vec<serde_json::Value> = chunker
                .chunk(&d.document)?
                .iter()
                .map(|c| {
                    let at = map.locate(c.span.byte_start, c.span.byte_end);
                    serde_json::json!({
                        "start": c.span.byte_start,
                        "end": c.span.byte_end,
                        "page": at.page,
                        "page_end": at.page_end,
                        "section": at.section,
                    })
                })
                .collect();
            if args.json {
                files.push(serde_json::json!({
                    "path": p,
                    "id": d.id,
                    "format": origin.map(|o| o.format.clone()),
                    "unit": origin.and_then(|o| o.unit),
                    "units": origin.map(|o| o.units),
                    "title": d.document.title,
                    "text": d.document.text,
                    "blocks": map.blocks,
                    "sections": map.sections,
                    "chunks": chunks,
                    "read_secs": secs,
                }));
                continue;
            }
            println!("=== {} ({} chunks)", d.id, chunks.len());
            for b in &map.blocks {
                let section = b
                    .section
                    .map(|s| map.section_path(s).join(" › "))
                    .unwrap_or_default();
                let text = d.document.text.get(b.start..b.end).unwrap_or("");
                let unit = origin.and_then(|o| o.unit).map_or("", |u| u.label());
                let place = match (b.page, b.page_end) {
                    (0, _) => String::new(),
                    (a, e) if a == e => format!("{unit} {a}"),
                    (a, e) => format!("{unit} {a}–{e}"),
                };
                println!(
                    "[{place}{}{section}] {text}",
                    if section.is_empty() { "" } else { " § " }
                );
            }
            if map.blocks.is_empty() {
                println!("{}", d.document.text);
            }
        }
        if args.json {
            for s in &report.skipped {
                files.push(serde_json::json!({ "path": p, "id": s.path, "error": s.reason }));
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string(&files)?);
    }
    Ok(())
}
