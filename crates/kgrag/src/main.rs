//! The `kgrag` command line.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kgrag::bench::{run, BenchArgs, METHODS};

#[derive(Parser)]
#[command(
    name = "kgrag",
    version,
    about = "Knowledge-graph RAG: HippoRAG 2, HiRAG, LeanRAG and dense retrieval, side by side"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build one index for a dataset, run the methods on every question, write report.json and print a table.
    Bench {
        /// Dataset name (musique-100, kgrag-fixture); default: musique-100 if present under the data folder,
        /// else the bundled fixture.
        #[arg(long)]
        dataset: Option<String>,
        /// Comma-separated methods (default: all available).
        #[arg(long, value_delimiter = ',')]
        methods: Vec<String>,
        /// Configuration file (TOML); default: offline (local MiniLM, no LLM).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Only the first N questions.
        #[arg(long)]
        limit: Option<usize>,
        /// Keep only the passages the selected questions list (their paragraphs and gold passages): a small,
        /// easier corpus for smoke runs such as CI's; not comparable with full-corpus figures.
        #[arg(long)]
        question_corpus: bool,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Bench {
        dataset,
        methods,
        config,
        limit,
        question_corpus,
        out,
        data_dir,
        no_progress,
    } = cli.command;
    let args = BenchArgs {
        dataset,
        methods,
        limit,
        question_corpus,
        out,
        config,
        data_dir: data_dir.unwrap_or_else(kgrag::eval::data_dir),
        progress: !no_progress && std::io::stderr().is_terminal(),
    };
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
    match runtime.block_on(run(&args)) {
        Ok(outcome) => {
            println!("{}", outcome.report.to_markdown());
            println!("report: {}", outcome.path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kgrag bench: error: {e}");
            if args.methods.is_empty() {
                eprintln!("(methods available: {})", METHODS.join(", "));
            }
            ExitCode::FAILURE
        }
    }
}
