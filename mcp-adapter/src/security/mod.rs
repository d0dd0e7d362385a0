//! Who may do what and what is kept of it: API keys and their principals, OAuth
//! bearer tokens, rate and concurrency limits, the audit trail, and the one check
//! for the endpoints the server itself calls.

pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod limits;
pub(crate) mod oauth;
pub(crate) mod outbound;

pub use audit::{AuditEntry, tail as audit_tail};
pub use auth::{Access, Auth, Principal};
pub use limits::{Limits, LimitsConfig};
pub use oauth::{
    DEFAULT_LEEWAY_SECS, JWKS_REREAD_SECS, JwksSource, OAuth, OAuthConfig, fetch_jwks,
};
