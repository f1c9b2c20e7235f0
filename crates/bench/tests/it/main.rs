//! The bench's integration tests: one binary, one module per file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bench;
mod real_server;

/// The bench runs every strategy the registry serves.
#[test]
fn the_bench_runs_every_registered_strategy() {
    assert_eq!(kgrag::methods::strategies(), kgrag_bench::METHODS.to_vec());
}
