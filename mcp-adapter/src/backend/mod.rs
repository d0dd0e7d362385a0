//! What the server runs on besides the core: the store location (a directory or a
//! PostgreSQL URL), resource changes across instances on one PostgreSQL store
//! (`LISTEN`/`NOTIFY`), and an OpenAI-compatible embeddings endpoint.

pub(crate) mod embeddings;
pub(crate) mod pgnotify;
pub(crate) mod store;

pub use embeddings::HttpEmbedder;
pub use pgnotify::APPLICATION_NAME;
pub use store::PgUrl;
