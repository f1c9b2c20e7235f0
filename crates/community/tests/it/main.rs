//! Integration tests of kgrag-community.
//! One test binary for the crate (`tests/it/`): each module is one former test file.

mod leiden;
mod musique;
mod reports;
