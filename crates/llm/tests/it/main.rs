//! Integration tests of kgrag-llm.
//! One test binary for the crate (`tests/it/`): each module is one former test file.

mod common;
mod local_models;
mod providers;
mod real_server;
