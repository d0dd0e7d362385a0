//! The options of facts with validity and as-of reads: `semantic.update`'s
//! validity, the `as_of` of `get` / `retrieve`, and `query`'s read options.

use crate::options::{QueryOptions, UpdateOptions};
use crate::types::Timestamp;

impl UpdateOptions {
    /// The core's options of `update_with`.
    pub fn core(self) -> memstrata::semantic::UpdateOptions {
        let mut o = memstrata::semantic::UpdateOptions::default();
        o.valid_from = self.valid_from.map(|t| t.0);
        o.valid_until = self.valid_until.map(|t| t.0);
        o
    }
}

/// The core's read options of `get` / `retrieve` (`as_of`).
pub fn as_of(t: Option<Timestamp>) -> memstrata::semantic::ReadOptions {
    let mut o = memstrata::semantic::ReadOptions::default();
    o.as_of = t.map(|t| t.0);
    o
}

impl QueryOptions {
    /// The read options (`as_of`, `include_expired`) of `query_with`.
    pub fn read(&self) -> memstrata::semantic::ReadOptions {
        let mut o = as_of(self.as_of);
        o.include_expired = self.include_expired.unwrap_or(false);
        o
    }
}
