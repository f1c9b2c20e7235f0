//! The configuration file: the commented sample in the repository parses, every strategy is selectable,
//! unknown keys and bad values are errors naming them.

use kgrag::config::Config;

#[test]
fn the_sample_kgrag_toml_parses_to_the_defaults_it_documents() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kgrag.toml");
    let c = Config::load(&path).unwrap();
    // The sample spells out the defaults (plus a cache folder comment): everything else equal.
    let d = Config::default();
    assert_eq!(c.retriever, d.retriever);
    assert_eq!(c.index, d.index);
    assert_eq!(c.hipporag, d.hipporag);
    assert_eq!(c.dense, d.dense);
    assert_eq!(c.hirag, d.hirag);
    assert_eq!(c.leanrag, d.leanrag);
    assert_eq!(c.openie, d.openie);
    assert_eq!(c.reader, d.reader);
    assert_eq!(c.cite, d.cite);
    assert_eq!(c.documents, d.documents);
    assert!(c.chat.is_none());
}

#[test]
fn every_strategy_is_selectable() {
    for s in kgrag::methods::strategies() {
        let c = Config::parse(&format!("[retriever]\nstrategy = \"{s}\"\n")).unwrap();
        assert_eq!(c.retriever.strategy, s);
    }
}

#[test]
fn unknown_keys_and_bad_values_name_themselves() {
    let cases = [
        ("retrieverr = 1\n", vec!["retrieverr"]),
        ("[hirag]\ntop_kk = 3\n", vec!["top_kk"]),
        ("[retriever]\nstrategy = \"graphrag\"\n", vec!["retriever.strategy", "graphrag", "hipporag2", "leanrag"]),
        ("openie = \"fast\"\n", vec!["openie", "fast", "rules"]),
        ("[index]\nmethods = [\"naive\"]\n", vec!["index.methods", "naive", "dense"]),
        ("[retriever]\ntop_k = 0\n", vec!["top_k"]),
        ("[hipporag]\ndamping = 1.5\n", vec!["damping", "1.5"]),
        ("[index.chunking]\nstrategy = \"token_window\"\nencoding = \"o200k_base\"\nsize = 10\noverlap = 10\n", vec!["overlap"]),
    ];
    for (text, needles) in cases {
        let err = Config::parse(text).err().unwrap().to_string();
        for n in needles {
            assert!(err.contains(n), "{text:?}: {err} lacks {n}");
        }
    }
}

#[test]
fn the_readme_configuration_parses() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let mut blocks = 0;
    for block in readme.split("```toml\n").skip(1) {
        let text = block.split("```").next().unwrap();
        let c = Config::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(kgrag::methods::strategies().contains(&c.retriever.strategy.as_str()));
        blocks += 1;
    }
    assert!(blocks >= 1, "the README shows a kgrag.toml");
}
