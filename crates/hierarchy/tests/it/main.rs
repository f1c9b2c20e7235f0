//! Integration tests of kgrag-hierarchy.
//! One test binary for the crate (`tests/it/`): each module is one former test file.

mod builders;
mod musique;
mod summaries;
