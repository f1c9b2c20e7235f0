//! kgrag-documents' integration tests: the generated corpus of every format read against what was put
//! into it (`corpus`), and the files a reader must refuse with a clear error (`bad`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bad;
mod corpus;
