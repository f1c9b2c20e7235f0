//! Integration tests of kgrag-openie.
//! One test binary for the crate (`tests/it/`): each module is one former test file.

mod extractors;
mod musique_import;
mod real_server;
mod resume;
