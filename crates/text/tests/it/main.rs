//! Integration tests of kgrag-text.
//! One test binary for the crate (`tests/it/`): each module is one former test file.

mod chunker_properties;
mod musique_ids;
