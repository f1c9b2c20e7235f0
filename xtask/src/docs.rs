//! `cargo xtask docs-corpus`: the test documents, made from texts we hold by `xtask/docs_corpus.py` (Python
//! from PyPI, pinned, in a venv under `target/docs-corpus/venv`), and with `--measure` the readers'
//! fidelity, page attribution and speed beside pypdf, pdfminer.six and pypdfium2 (`xtask/docs_measure.py`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{cargo_command, data_dir, fail, run_step, target_dir, workspace_root, TaskResult};

/// The generator's and the measurement's packages, pinned.
const PACKAGES: &[&str] = &[
    "fpdf2==2.8.9",
    "python-docx==1.2.0",
    "python-pptx==1.0.2",
    "openpyxl==3.1.5",
    "EbookLib==0.20",
    "xlwt==1.3.0",
    "odfpy==1.4.1",
    "pypdf==7.1.1",
    "pdfminer.six==20260107",
    "pypdfium2==5.15.2",
];

/// What `docs-corpus` makes and measures.
#[derive(clap::Args, Debug)]
pub struct Options {
    /// Remake the small corpus committed as kgrag-documents' test data (from our fixture) instead.
    #[arg(long)]
    fixture: bool,
    /// Where the corpus goes (default target/docs-corpus/corpus).
    #[arg(long)]
    out: Option<PathBuf>,
    /// UltraDomain documents to render (default all 61).
    #[arg(long)]
    docs: Option<u32>,
    /// Formats (pdf, pdf2, docx, pptx, xlsx, xls, ods, html, epub; default all).
    #[arg(long)]
    formats: Option<String>,
    /// Then measure the readers (release `kgrag`) on it, beside pypdf, pdfminer.six and pypdfium2; writes
    /// measure.json and prints the table.
    #[arg(long)]
    measure: bool,
    /// Times each reader is timed (the best counts).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Then index UltraDomain Mix from the rendered PDFs and from the same text as plain files, every
    /// method offline, ask both its 130 questions with every strategy, and compare the passages and the
    /// citations' pages (`xtask/docs_e2e.py`; writes e2e.json beside the corpus).
    #[arg(long)]
    e2e: bool,
    /// Which PDFs `--e2e` indexes: `two-column` (running headers and footers, hyphenation) or `one-column`.
    #[arg(long, default_value = "two-column")]
    variant: String,
    /// Questions `--e2e` asks (default all 130).
    #[arg(long)]
    limit: Option<u32>,
}

/// The venv's Python with the pinned packages (made once).
fn venv(python: &str) -> TaskResult<PathBuf> {
    let venv = target_dir().join("docs-corpus").join("venv");
    let py = venv.join("bin").join("python");
    let stamp = venv.join("kgrag-packages.txt");
    let want = PACKAGES.join("\n");
    if py.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        return Ok(py);
    }
    let _ = std::fs::remove_dir_all(&venv);
    run_step(
        "python venv for the document corpus",
        Command::new(python).args(["-m", "venv"]).arg(&venv),
    )?;
    run_step(
        "pip install the corpus generator's packages",
        crate::pip_install(&py).args(PACKAGES),
    )?;
    std::fs::write(&stamp, want).map_err(|e| fail(format!("{}: {e}", stamp.display())))?;
    Ok(py)
}

pub fn run(o: &Options, python: &str) -> TaskResult {
    let root = workspace_root();
    let py = venv(python)?;
    let script = root.join("xtask").join("docs_corpus.py");
    let mut generate = Command::new(&py);
    generate.arg(&script).current_dir(&root);
    let out = if o.fixture {
        let out = o
            .out
            .clone()
            .unwrap_or_else(|| root.join("crates/documents/tests/data"));
        let _ = std::fs::remove_dir_all(&out);
        generate
            .arg("--out")
            .arg(&out)
            .args(["--source", "fixture", "--bad"]);
        out
    } else {
        let data = data_dir()?;
        if !data.join("ultradomain-mix").is_dir() {
            return Err(fail(format!(
                "the corpus is rendered from UltraDomain Mix and MuSiQue: no {} (set KGRAG_DATA_DIR, or \
                 `cargo xtask fetch-data ultradomain-mix`); --fixture makes the small corpus from our fixture",
                data.join("ultradomain-mix").display()
            )));
        }
        let out = o
            .out
            .clone()
            .unwrap_or_else(|| target_dir().join("docs-corpus").join("corpus"));
        let _ = std::fs::remove_dir_all(&out);
        generate
            .arg("--out")
            .arg(&out)
            .args(["--source", "ultradomain", "--source", "musique", "--bad"])
            .arg("--data-dir")
            .arg(&data);
        if let Some(n) = o.docs {
            generate.arg("--docs").arg(n.to_string());
        }
        out
    };
    if let Some(f) = &o.formats {
        generate.arg("--formats").arg(f);
    }
    run_step("render the document corpus", &mut generate)?;
    if !o.measure && !o.e2e {
        println!("xtask: the corpus is in {}", out.display());
        return Ok(());
    }
    run_step(
        "cargo build --release -p kgrag-cli",
        cargo_command().args(["build", "--release", "-p", "kgrag-cli"]),
    )?;
    let kgrag = target_dir().join("release").join("kgrag");
    if o.measure {
        measure(o, &py, &out, &kgrag)?;
    }
    if o.e2e {
        e2e(o, &py, &out, &kgrag)?;
    }
    Ok(())
}

/// `--e2e`: both indexes built and asked (see `xtask/docs_e2e.py`).
fn e2e(o: &Options, py: &Path, corpus: &Path, kgrag: &Path) -> TaskResult {
    let root = workspace_root();
    let questions = data_dir()?
        .join("ultradomain-mix")
        .join("mix_hi_result_deepseek.jsonl");
    let report = corpus.join("e2e.json");
    let mut command = Command::new(py);
    command
        .arg(root.join("xtask").join("docs_e2e.py"))
        .arg("--kgrag")
        .arg(kgrag)
        .arg("--corpus")
        .arg(corpus)
        .arg("--variant")
        .arg(&o.variant)
        .arg("--questions")
        .arg(&questions)
        .arg("--work")
        .arg(target_dir().join("docs-corpus").join("e2e"))
        .arg("--out")
        .arg(&report);
    if let Some(n) = o.limit {
        command.arg("--limit").arg(n.to_string());
    }
    run_step(
        "UltraDomain Mix from PDFs and from text, every strategy",
        &mut command,
    )?;
    println!("xtask: end-to-end figures in {}", report.display());
    Ok(())
}

/// `--measure`: the readers beside pypdf, pdfminer.six and pypdfium2 (see `xtask/docs_measure.py`).
fn measure(o: &Options, py: &Path, out: &Path, kgrag: &Path) -> TaskResult {
    let root = workspace_root();
    let report = out.join("measure.json");
    // One core: the readers are timed as they run on one.
    let mut measure = taskset(py);
    measure
        .arg(root.join("xtask").join("docs_measure.py"))
        .arg("--corpus")
        .arg(out)
        .arg("--kgrag")
        .arg(kgrag)
        .arg("--repeat")
        .arg(o.repeat.to_string())
        .arg("--out")
        .arg(&report);
    run_step("measure the readers", &mut measure)?;
    println!("xtask: measurements in {}", report.display());
    Ok(())
}

/// `py` pinned to the first core when `taskset` is there (the readers' speed is per core).
fn taskset(py: &Path) -> Command {
    let has = Command::new("taskset")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if has {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(py);
        c
    } else {
        Command::new(py)
    }
}
