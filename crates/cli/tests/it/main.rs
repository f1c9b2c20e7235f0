//! The `kgrag` binary's integration tests: one binary, one module per file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;
#[cfg(feature = "postgres")]
mod distributed;
mod documents;
mod faults;
#[cfg(feature = "postgres")]
mod postgres;
mod serve;
