//! Defaults every binding applies the same way, and pagination for list results.

use crate::error::BindingError;

/// Results of `episodic.search`, `episodic.recent` and `semantic.query` when no `limit` is given.
pub const DEFAULT_SEARCH_LIMIT: u32 = 10;
/// Largest page a paginated list returns (MCP tools; larger `limit`s are capped).
pub const MAX_PAGE_LIMIT: u32 = 100;
/// `compression_level` of `session_save` when none is given (lz4).
pub const DEFAULT_COMPRESSION_LEVEL: u8 = 1;
/// `durability` when none is given.
pub const DEFAULT_DURABILITY: &str = "periodic";
/// `optimize` level when none is given.
pub const DEFAULT_OPTIMIZE_LEVEL: &str = "light";
/// `status(include_sessions)` when not given.
pub const DEFAULT_INCLUDE_SESSIONS: bool = true;
/// `status(include_metrics)` when not given.
pub const DEFAULT_INCLUDE_METRICS: bool = false;
/// `switch_context(preserve_current)` when not given.
pub const DEFAULT_PRESERVE_CURRENT: bool = true;
/// `punch_out(detect_files)` when not given.
pub const DEFAULT_DETECT_FILES: bool = false;
/// Most ids `summarize` takes from an MCP client in one call.
pub const MAX_SUMMARIZE_IDS: usize = 100;

/// `limit`, or [`DEFAULT_SEARCH_LIMIT`].
pub fn search_limit(limit: Option<u32>) -> usize {
    limit.unwrap_or(DEFAULT_SEARCH_LIMIT) as usize
}

/// A page `limit` clamped to `1..=MAX_PAGE_LIMIT` (default [`DEFAULT_SEARCH_LIMIT`]).
pub fn page_limit(limit: Option<u32>) -> usize {
    limit.map_or(DEFAULT_SEARCH_LIMIT, |l| l.clamp(1, MAX_PAGE_LIMIT)) as usize
}

/// Parse an opaque pagination cursor (as returned in `next_cursor`); `None` is the first page.
pub fn parse_cursor(cursor: Option<&str>) -> Result<usize, BindingError> {
    match cursor {
        None => Ok(0),
        Some(c) => c
            .strip_prefix('o')
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                BindingError::invalid(
                    "cursor",
                    format!(
                        "{c:?} is not a cursor returned by this server; omit it to start from the first page"
                    ),
                )
            }),
    }
}

/// The cursor of the page after `offset + taken`, when there is one.
pub fn make_cursor(offset: usize, taken: usize, more: bool) -> Option<String> {
    more.then(|| format!("o{}", offset + taken))
}

/// One page of `items` starting at `offset`, and the cursor of the next page.
pub fn page<T>(items: Vec<T>, offset: usize, limit: usize) -> (Vec<T>, Option<String>) {
    let more = items.len() > offset.saturating_add(limit);
    let page: Vec<T> = items.into_iter().skip(offset).take(limit).collect();
    let n = page.len();
    (page, make_cursor(offset, n, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_a_list_to_its_end() {
        let items: Vec<u32> = (0..25).collect();
        let (p1, c1) = page(items.clone(), 0, 10);
        assert_eq!(p1, (0..10).collect::<Vec<_>>());
        let off = parse_cursor(c1.as_deref()).unwrap();
        let (p2, c2) = page(items.clone(), off, 10);
        assert_eq!(p2[0], 10);
        let (p3, c3) = page(items, parse_cursor(c2.as_deref()).unwrap(), 10);
        assert_eq!(p3, (20..25).collect::<Vec<_>>());
        assert_eq!(c3, None);
    }

    #[test]
    fn bad_cursors_name_the_field() {
        let e = parse_cursor(Some("zz")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("cursor"));
    }

    #[test]
    fn limits_are_clamped() {
        assert_eq!(page_limit(None), 10);
        assert_eq!(page_limit(Some(0)), 1);
        assert_eq!(page_limit(Some(1000)), 100);
        assert_eq!(search_limit(Some(1000)), 1000);
    }
}
