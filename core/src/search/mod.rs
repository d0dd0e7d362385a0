//! Search: the text index (tantivy), the in-memory vector index, and the
//! fusion of their two ranked lists. Search is derived from the store and
//! names nothing above it.

pub(crate) mod embedder;
pub(crate) mod fusion;
pub(crate) mod index;
pub(crate) mod vector;
