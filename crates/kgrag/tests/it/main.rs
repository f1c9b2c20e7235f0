//! The facade's integration tests: one binary, one module per file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod config_file;
mod estimate;
mod fixture_methods;
mod index_api;
mod pipeline;
#[cfg(feature = "postgres")]
mod postgres;
mod together;
