//! Index a folder of documents and query it with two strategies, through the index API: a writer commits
//! a generation, a reader's searcher answers from it.
//!
//! ```sh
//! cargo run -p kgrag --example index_and_query -- path/to/folder "your question"
//! ```
//!
//! Without arguments it writes three small documents to a temporary folder and asks about them. It runs
//! offline (local MiniLM embeddings from `cargo xtask fetch-assets`, rule extraction, extractive answers);
//! configure a `[chat]` model in the `Config` to use an LLM.

use std::path::PathBuf;

use kgrag::config::Config;
use kgrag::documents::read_inputs;
use kgrag::Index;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let work = std::env::temp_dir().join(format!("kgrag-example-{}", std::process::id()));
    let folder = match args.next() {
        Some(f) => PathBuf::from(f),
        None => {
            let docs = work.join("docs");
            std::fs::create_dir_all(&docs)?;
            std::fs::write(
                docs.join("curie.txt"),
                "Marie Curie was a physicist born in Warsaw. She won the Nobel Prize in Physics in 1903.",
            )?;
            std::fs::write(
                docs.join("warsaw.md"),
                "# Warsaw\nWarsaw is the capital of Poland. The Vistula river flows through Warsaw.",
            )?;
            std::fs::write(
                docs.join("more.jsonl"),
                "{\"id\": \"pierre\", \"title\": \"Pierre Curie\", \"text\": \"Pierre Curie was a French physicist who married Marie Curie.\"}\n",
            )?;
            docs
        }
    };
    let question = args
        .next()
        .unwrap_or_else(|| "Which river flows through the city where Marie Curie was born?".into());

    // Two methods are enough here; the default builds all four.
    let mut config = Config::default();
    config.index.methods = vec!["dense".into(), "hipporag2".into()];
    let index_dir = work.join("index");
    let index = Index::create(&index_dir, config)?;
    let mut writer = index.writer()?;
    let added = writer.add_documents(read_inputs(&[folder])?).await?;
    let generation = writer.commit().await?;
    drop(writer);
    println!(
        "indexed {} documents (generation {generation})",
        added.documents
    );

    // Reopen it as `kgrag query` would: nothing is embedded or rebuilt.
    let searcher = Index::open(&index_dir)?.reader()?.searcher();
    for strategy in ["dense", "hipporag2"] {
        let a = searcher.answer(&question, strategy, 3).await?;
        println!("\n[{strategy}] {}", a.answer.unwrap_or_default());
        for p in &a.passages {
            println!("  {}. {:.4} {:?}", p.rank, p.score, p.documents);
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
