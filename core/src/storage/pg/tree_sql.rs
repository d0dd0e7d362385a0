//! The SQL of one key/value tree of a PostgreSQL store (its table, point statements and paged range scans).

#[allow(unused_imports)]
use super::*;

/// The SQL of one tree.
#[derive(Debug)]
pub(super) struct TreeSql {
    pub(super) table: String,
    pub(super) get: String,
    pub(super) upsert: String,
    pub(super) delete: String,
    pub(super) count: String,
    pub(super) insert_new: String,
    pub(super) update_if: String,
    pub(super) delete_if: String,
}

impl TreeSql {
    pub(super) fn new(schema: &str, t: Tree) -> Self {
        let table = format!("\"{schema}\".\"{}\"", t.name());
        TreeSql {
            get: format!("SELECT value FROM {table} WHERE key = $1"),
            upsert: format!(
                "INSERT INTO {table} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
            ),
            delete: format!("DELETE FROM {table} WHERE key = $1 RETURNING value"),
            count: format!("SELECT count(*) FROM {table}"),
            insert_new: format!(
                "INSERT INTO {table} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
            ),
            update_if: format!("UPDATE {table} SET value = $3 WHERE key = $1 AND value = $2"),
            delete_if: format!("DELETE FROM {table} WHERE key = $1 AND value = $2"),
            table,
        }
    }

    /// An ordered page within `(lo, hi)`.
    pub(super) fn page(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        descending: bool,
        keys_only: bool,
    ) -> (String, Vec<Vec<u8>>) {
        let mut conds = Vec::new();
        let mut params = Vec::new();
        for (b, incl, excl) in [(lo, ">=", ">"), (hi, "<=", "<")] {
            match b {
                Bound::Included(k) => {
                    params.push(k.clone());
                    conds.push(format!("key {incl} ${}", params.len()));
                }
                Bound::Excluded(k) => {
                    params.push(k.clone());
                    conds.push(format!("key {excl} ${}", params.len()));
                }
                Bound::Unbounded => {}
            }
        }
        let filter = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        let order = if descending { "DESC" } else { "ASC" };
        let value = if keys_only { "''::bytea" } else { "value" };
        (
            format!(
                "SELECT key, {value} FROM {}{filter} ORDER BY key {order} LIMIT {PAGE}",
                self.table
            ),
            params,
        )
    }
}
