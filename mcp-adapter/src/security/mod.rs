//! Who may do what and what is kept of it: API keys and their principals, OAuth
//! bearer tokens, rate and concurrency limits, the audit trail, and the one check
//! for the endpoints the server itself calls.

pub mod audit;
pub mod auth;
pub mod limits;
pub mod oauth;
pub mod outbound;

pub use audit::{AuditEntry, tail as audit_tail};
pub use auth::{Access, Auth, Principal};
pub use limits::{Limits, LimitsConfig};
pub use oauth::{
    DEFAULT_LEEWAY_SECS, JWKS_REREAD_SECS, JwksSource, OAuth, OAuthConfig, fetch_jwks,
};
