//! Integration tests of kgrag-hirag (one test binary; each module is one test file).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod aliases;
mod bridge;
mod common;
mod data;
mod golden;
mod modes;
mod real_server;
