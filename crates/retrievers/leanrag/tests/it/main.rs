//! Integration tests of kgrag-leanrag (one test binary; each module is one test file).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod build;
mod golden;
mod lca;
mod real_server;
