//! The crate's error type.

/// Errors of hierarchy building.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HierarchyError {
    /// A configuration value is unusable (names the key and the value).
    #[error("invalid hierarchy configuration: {0}")]
    Config(String),
    /// The input is malformed (names what and where).
    #[error("invalid hierarchy input: {0}")]
    Input(String),
    /// Embedding texts failed.
    #[error("embedding {what} failed: {source}")]
    Embedding {
        /// What was being embedded.
        what: String,
        /// The embedder's error.
        #[source]
        source: kgrag_types::Error,
    },
    /// The numerical fit failed (a covariance that stays singular after regularisation).
    #[error("Gaussian mixture fit failed: {0}")]
    Numerical(String),
    /// Writing the hierarchy into the graph store failed.
    #[error("graph store: {0}")]
    Store(#[from] kgrag_graph_store::StoreError),
    /// Token counting failed.
    #[error("text: {0}")]
    Text(#[from] kgrag_text::Error),
}

/// Result alias of this crate.
pub type Result<T, E = HierarchyError> = std::result::Result<T, E>;
