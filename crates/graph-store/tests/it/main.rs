//! Integration tests of kgrag-graph-store.
//! One test binary for the crate (`tests/it/`): each module is one former test file.

mod musique_graph;
mod ppr_exact;
mod synonymy;
mod vectors;
