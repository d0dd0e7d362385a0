//! Search: the text index (tantivy), the in-memory vector index, and the
//! fusion of their two ranked lists. Search is derived from the store and
//! names nothing above it.
//!
//! Public here: the embedder hook, vector queries, and the fusion of the BM25
//! and vector lists with its tuning constants.

pub(crate) mod dedup;
pub(crate) mod embedder;
pub(crate) mod evidence;
pub(crate) mod fusion;
pub(crate) mod index;
#[cfg(feature = "postgres")]
pub(crate) mod lexer;
pub(crate) mod vector;

pub use self::dedup::{
    MIN_NEAR_CHARS, MINHASH_BANDS, MINHASH_ROWS, NEAR_COSINE, NEAR_JACCARD, SHINGLE_CHARS,
};
pub use self::embedder::Embedder;
pub use self::fusion::{
    ADAPTIVE_PEAK_DEPTH, ADAPTIVE_SHARE_POWER, ADAPTIVE_TAIL_FROM, DEFAULT_BM25_WEIGHT,
    DEFAULT_RRF_K, DEFAULT_VECTOR_WEIGHT, FUSION_DEPTH_FACTOR, FUSION_MIN_DEPTH, Fusion,
    FusionMethod,
};
pub use self::vector::{MAX_EMBEDDING_DIM, VectorQuery};
