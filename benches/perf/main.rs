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
//! kgrag-perf embed-int8 DIR       case embed_musique with `precision = "int8"` (its cosines to `embed`'s)
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
//! kgrag-perf umap DIR            case umap_musique: our UMAP on HiRAG's first two rounds' vectors (writes
//!                                 them for benches/python/umap_learn.py)
//! kgrag-perf peak DIR            the machine: f32 matrix-product rate (ndarray's sgemm, one block of rows
//!                                 per core) and memory read bandwidth, for the physical-limit estimates
//! kgrag-perf index-full DIR       case index_musique_full: `kgrag bench` on musique-100, every method, with
//!                                 an empty embedding cache (the full offline index a user waits for)
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use serde_json::Value;

mod cases;
mod inputs;
#[cfg(feature = "linfa")]
mod linfa_case;
mod umap_case;

use cases::{
    gmm, gmm_linfa, hipporag2_index, hipporag2_query, index_full, leiden, method_query, modularity,
    peak, ppr, synonymy,
};
use inputs::{derive, embed, embed_int8, prepare};

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
        "embed-int8" => runtime.block_on(embed_int8(&dir)),
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
        "umap" => runtime.block_on(umap_case::run(&dir, rounds)),
        other => {
            bail!("unknown subcommand {other:?} (see the module docs of benches/perf/main.rs)")
        }
    }
}
