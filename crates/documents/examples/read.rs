//! Reads a document and prints its text with each block's page and section (`--json`: the whole
//! `Extracted` as JSON; `--time N`: reads it N times and prints pages per second).
//!
//! ```sh
//! cargo run -p kgrag-documents --example read -- report.pdf
//! ```

use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut path: Option<PathBuf> = None;
    let mut json = false;
    let mut times = 0usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json = true,
            "--time" => times = args.next().and_then(|n| n.parse().ok()).unwrap_or(10),
            _ => path = Some(PathBuf::from(a)),
        }
    }
    let path = path.ok_or("usage: read FILE [--json] [--time N]")?;
    let limits = kgrag_documents::Limits::default();
    let doc = kgrag_documents::read_path(&path, &limits)?;
    if times > 0 {
        let bytes = std::fs::read(&path)?;
        let format = kgrag_documents::Format::of_path(&path).ok_or("unknown extension")?;
        let t = Instant::now();
        for _ in 0..times {
            kgrag_documents::read(&bytes, format, &limits)?;
        }
        let secs = t.elapsed().as_secs_f64() / times as f64;
        println!(
            "{}: {} units in {:.2} ms: {:.0} units/s",
            path.display(),
            doc.units,
            secs * 1e3,
            doc.units as f64 / secs
        );
        return Ok(());
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    for b in &doc.map.blocks {
        let section = b
            .section
            .map(|s| doc.section_path(s).join(" > "))
            .unwrap_or_default();
        println!("--- [{}-{}] {:?} § {}", b.page, b.page_end, b.kind, section);
        println!("{}", &doc.text[b.start..b.end]);
    }
    for n in &doc.notes {
        eprintln!("note: {n}");
    }
    Ok(())
}
