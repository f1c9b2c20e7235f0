//! A folder as people keep it — a PDF, a Word file, a slide deck, a spreadsheet, a web page, Markdown, a
//! scanned and an encrypted PDF, a file of a type kgrag does not read — indexed, queried with the
//! citations printed to the page, and kept in sync by running `kgrag index` again.

use std::path::Path;

use crate::cli::{json, kgrag, tmp};

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../documents/tests/data")
        .join(name)
}

#[test]
fn a_mixed_folder_is_indexed_cited_to_the_page_and_synced() {
    let work = tmp("mixed");
    let docs = work.join("docs");
    std::fs::create_dir_all(docs.join("reports")).unwrap();
    for name in [
        "guilds.docx",
        "guilds.pptx",
        "guilds-passages.xlsx",
        "guilds.html",
        "encrypted.pdf",
        "scanned.pdf",
    ] {
        std::fs::copy(data(name), docs.join(name)).unwrap();
    }
    std::fs::copy(data("guilds.pdf"), docs.join("reports/history.pdf")).unwrap();
    std::fs::write(
        docs.join("notes.md"),
        "# Notes\n\nThe Tide Lamp dims with the tide.\n",
    )
    .unwrap();
    std::fs::write(docs.join("table.csv"), "a,b\n1,2\n").unwrap();
    // Windows of about a page, so that a citation names one or two pages.
    std::fs::write(
        work.join("kgrag.toml"),
        "[index]\nmethods = [\"dense\", \"hipporag2\"]\n[index.chunking]\nstrategy = \"token_window\"\n\
         encoding = \"o200k_base\"\nsize = 160\noverlap = 16\n",
    )
    .unwrap();
    let out = kgrag(&work)
        .args(["index", "docs", "--index", "idx"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 docx")
            && stderr.contains("1 pdf (7 pages)")
            && stderr.contains("1 pptx"),
        "{stderr}"
    );
    assert!(stderr.contains("skipped 2 file(s)"), "{stderr}");
    assert!(
        stderr.contains("encrypted.pdf: the file is encrypted"),
        "{stderr}"
    );
    assert!(stderr.contains("scanned.pdf: no text layer"), "{stderr}");
    assert!(
        stderr.contains("1 .csv") && stderr.contains("table.csv"),
        "{stderr}"
    );

    // The answer's passages, cited to the file and page (the sentence is on page 2 of the PDF).
    let q = "When did Yselle Marrowind retire ashore after her long life under sail?";
    let out = kgrag(&work)
        .args([
            "query",
            q,
            "--index",
            "idx",
            "--strategy",
            "dense",
            "--top-k",
            "3",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("answer: Yselle Marrowind retired ashore in 1760"),
        "{text}"
    );
    assert!(text.contains("cited:\n  [1] "), "{text}");
    assert!(
        text.lines().any(
            |l| l.starts_with('[') && l.contains("reports/history.pdf p. 2 § Yselle Marrowind")
        ),
        "{text}"
    );
    let v = json(
        &work,
        &[
            "query",
            q,
            "--index",
            "idx",
            "--strategy",
            "dense",
            "--top-k",
            "5",
            "--json",
        ],
    );
    let pdf = v["passages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["source"]["file"] == "reports/history.pdf")
        .unwrap_or_else(|| panic!("the PDF's passage is among the top 5: {v}"));
    let (first, last) = (
        pdf["source"]["page"].as_u64().unwrap(),
        pdf["source"]["page_end"].as_u64().unwrap(),
    );
    assert!(first <= 2 && 2 <= last && last - first <= 1, "{pdf}");
    assert!(
        pdf["source"]["label"]
            .as_str()
            .unwrap()
            .starts_with("reports/history.pdf p. "),
        "{pdf}"
    );
    assert_eq!(pdf["source"]["original"], true);
    let cited = &v["citations"][0];
    assert_eq!(cited["number"], 1, "{v}");
    assert!(cited["source"]["label"].is_string(), "{v}");

    // The same folder again: nothing to do; a file removed and one changed: synced.
    let again = kgrag(&work)
        .args(["index", "docs", "--index", "idx"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stderr).contains("up to date"));
    std::fs::remove_file(docs.join("guilds.html")).unwrap();
    std::fs::write(
        docs.join("notes.md"),
        "# Notes\n\nThe Tide Lamp brightens with the rising tide.\n",
    )
    .unwrap();
    let synced = kgrag(&work)
        .args(["index", "docs", "--index", "idx"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&synced.stdout);
    assert!(
        out.contains("0 added, 1 changed, 1 removed"),
        "{out}\n{}",
        String::from_utf8_lossy(&synced.stderr)
    );
    let stats = json(&work, &["stats", "--index", "idx", "--json", "--documents"]);
    let ids: Vec<&str> = stats["document_list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert!(
        !ids.contains(&"guilds.html") && ids.contains(&"notes.md"),
        "{ids:?}"
    );
    // What `kgrag read` shows of a file: its blocks with their pages and sections.
    let read = kgrag(&work)
        .args(["read", "docs/reports/history.pdf"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&read.stdout);
    assert!(shown.contains("[p. 2 § The Coastal Guilds: a Fixture History › Yselle Marrowind] Yselle Marrowind retired"), "{shown}");
    let _ = std::fs::remove_dir_all(&work);
}
