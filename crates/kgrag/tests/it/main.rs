//! The facade's integration tests: one binary, one module per file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bench;
mod cli;
mod config_file;
mod faults;
mod fixture_methods;
mod index_api;
mod pipeline;
#[cfg(feature = "postgres")]
mod postgres;
mod real_server;
