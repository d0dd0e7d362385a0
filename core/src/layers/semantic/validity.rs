//! Facts with validity: each version of a knowledge entry holds from
//! `valid_from` (default: when it was written) until `valid_until` (exclusive;
//! default open). A new version closes the one it supersedes at its own
//! `valid_from`, which stays in history; reads and queries `as_of` a time
//! pick the version that held then.

#[allow(unused_imports)]
use super::*;

/// Optional arguments of [`Semantic::update_with`].
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct UpdateOptions {
    /// When the new version starts to hold (default: now).
    pub valid_from: Option<DateTime<Utc>>,
    /// When it stops holding (exclusive; default: open).
    pub valid_until: Option<DateTime<Utc>>,
}

impl UpdateOptions {
    /// Set when the new version starts to hold.
    #[must_use]
    pub fn valid_from(mut self, t: DateTime<Utc>) -> Self {
        self.valid_from = Some(t);
        self
    }
    /// Set when the new version stops holding (exclusive).
    #[must_use]
    pub fn valid_until(mut self, t: DateTime<Utc>) -> Self {
        self.valid_until = Some(t);
        self
    }
}

/// Optional arguments of the history-aware reads ([`Semantic::get_with`],
/// [`Semantic::query_with`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Read what held at this time: each entry's version whose validity
    /// contains it (entries with none then are left out). Default: now, the
    /// current versions.
    pub as_of: Option<DateTime<Utc>>,
    /// `query` without `as_of`: also return entries whose current version has
    /// expired (`valid_until` in the past). Default false.
    pub include_expired: bool,
}

impl ReadOptions {
    /// Read as of `t`.
    #[must_use]
    pub fn as_of(mut self, t: DateTime<Utc>) -> Self {
        self.as_of = Some(t);
        self
    }
    /// Include expired entries in a query.
    #[must_use]
    pub fn include_expired(mut self, yes: bool) -> Self {
        self.include_expired = yes;
        self
    }
}

/// The validity a write asked for, in ms (`None`: the default).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Span {
    pub from: Option<i64>,
    pub until: Option<i64>,
}

impl Span {
    /// The span of the given times, checked: `valid_until` after `valid_from`
    /// (or after now, when `valid_from` is not given).
    pub(crate) fn new(
        from: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
        now_ms: i64,
    ) -> Result<Span> {
        let s = Span {
            from: from.map(|t| t.timestamp_millis()),
            until: until.map(|t| t.timestamp_millis()),
        };
        if let Some(u) = s.until {
            let f = s.from.unwrap_or(now_ms);
            if u <= f {
                return Err(Error::invalid(
                    "valid_until",
                    if s.from.is_some() {
                        "must be after `valid_from`"
                    } else {
                        "must be after `valid_from` (now, when not given)"
                    },
                ));
            }
        }
        Ok(s)
    }
}

/// Start of a record's validity (ms).
pub(crate) fn from_of(r: &KnowledgeRecord) -> i64 {
    r.valid_from.unwrap_or(r.updated_at)
}

/// The end of validity of `cur` once a version starting at `new_from`
/// supersedes it: `new_from`, never before `cur`'s own start (a version
/// written with an earlier start than the one it supersedes leaves that one
/// an empty span) and never after its own end.
pub(crate) fn closed_until(cur: &KnowledgeRecord, new_from: i64) -> i64 {
    let c = new_from.max(from_of(cur));
    cur.valid_until.map_or(c, |u| u.min(c))
}

/// Whether `[from, until)` holds at `t`.
pub(crate) fn holds(from: i64, until: Option<i64>, t: i64) -> bool {
    from <= t && until.is_none_or(|u| t < u)
}

/// Kept versions of an entry with their effective validity, oldest first:
/// `(version, record, valid_from, valid_until)`. Versions written before
/// validity existed hold from when they were written until the next kept
/// version's start.
pub(crate) fn spans(
    hist: Vec<(u64, HistoryRecord)>,
) -> Vec<(u64, HistoryRecord, i64, Option<i64>)> {
    let froms: Vec<i64> = hist
        .iter()
        .map(|(_, h)| h.valid_from.unwrap_or(h.recorded_at))
        .collect();
    hist.into_iter()
        .enumerate()
        .map(|(i, (v, h))| {
            let until = h.valid_until.or_else(|| froms.get(i + 1).copied());
            (v, h, froms[i], until)
        })
        .collect()
}

/// State every superseded version's end of validity: a version without one
/// (written before validity existed, or read from an export of format 1)
/// held until the next version's start (never before its own).
pub(crate) fn close_history(hist: &mut [(u64, HistoryRecord)]) {
    for i in 1..hist.len() {
        let next = &hist[i].1;
        let next_from = next.valid_from.unwrap_or(next.recorded_at);
        let h = &mut hist[i - 1].1;
        if h.valid_until.is_none() {
            h.valid_until = Some(next_from.max(h.valid_from.unwrap_or(h.recorded_at)));
        }
    }
}

/// The entry `key` of `ctx` as it held at `t` (ms): the newest kept version
/// whose validity contains `t`, or `None`.
pub(crate) fn get_as_of_in(e: &Engine, ctx: &str, key: &str, t: i64) -> Result<Option<Knowledge>> {
    input::key(&e.opts.limits, "key", key)?;
    let Some(cur) = e.t.semantic.get(codec::ctx_key(ctx, key))? else {
        return Ok(None);
    };
    let cur: KnowledgeRecord = e.codec.decode(&cur)?;
    // The current version answers without reading history when it holds at
    // `t` and nothing newer exists (it is the newest).
    if holds(from_of(&cur), cur.valid_until, t) {
        return Ok(Some(to_public(key, cur)));
    }
    // Newest first, stopping at the first version that held: a version
    // without a stored end (written before validity existed) held until the
    // start of the one after it.
    let mut newer_from = from_of(&cur);
    for item in
        e.t.semantic_history
            .scan_prefix(history_prefix(ctx, key))
            .rev()
    {
        let (k, v) = item?;
        let version = k
            .len()
            .checked_sub(8)
            .and_then(|p| k[p..].try_into().ok())
            .map(u64::from_be_bytes)
            .ok_or_else(|| Error::corrupted("bad history key"))?;
        if version >= cur.version {
            continue;
        }
        let h: HistoryRecord = e.codec.decode(&v)?;
        let from = h.valid_from.unwrap_or(h.recorded_at);
        let until = h.valid_until.or(Some(newer_from));
        if holds(from, until, t) {
            return Ok(Some(Knowledge {
                key: key.to_owned(),
                knowledge: h.value,
                version,
                created_at: millis_to_dt(cur.created_at),
                updated_at: millis_to_dt(h.recorded_at),
                duplicate_of: None,
                valid_from: millis_to_dt(from),
                valid_until: until.map(millis_to_dt),
            }));
        }
        newer_from = from;
    }
    Ok(None)
}

/// Whether a query without `as_of` leaves this entry out: its current version
/// expired at or before `now`.
pub(crate) fn expired(k: &Knowledge, now: DateTime<Utc>) -> bool {
    k.valid_until.is_some_and(|u| u <= now)
}

impl Semantic {
    /// Apply an RFC 7386 JSON Merge Patch to an existing entry (`NotFound`
    /// otherwise), the new version holding from `opts.valid_from` (default
    /// now) until `opts.valid_until` (default open). The version it
    /// supersedes stays in history, closed at the new one's `valid_from`.
    pub fn update_with(&self, key: &str, patch: Value, opts: UpdateOptions) -> Result<Knowledge> {
        let e = &self.scope.engine;
        e.timed("semantic.update", || {
            input::value(&e.opts.limits, "patch", &patch)?;
            let now = e.opts.clock.now().timestamp_millis();
            let span = Span::new(opts.valid_from, opts.valid_until, now)?;
            let ctx = self.scope.active_ctx();
            write_version(
                e,
                &ctx,
                key,
                |cur| {
                    let Some(cur) = cur else {
                        return Err(Error::not_found(format!(
                            "semantic key {key:?} in context {ctx:?}"
                        )));
                    };
                    let mut v = cur.value.clone();
                    json_patch::merge(&mut v, &patch);
                    Ok(v)
                },
                EmbeddingChange::Keep,
                None,
                span,
            )
        })
    }

    /// The entry under `key` as it held at `opts.as_of` (its version whose
    /// validity contains that time, from the kept history), or `None`;
    /// without `as_of`, [`Semantic::get`].
    pub fn get_with(&self, key: &str, opts: &ReadOptions) -> Result<Option<Knowledge>> {
        let e = &self.scope.engine;
        let ctx = self.scope.active_ctx();
        match opts.as_of {
            Some(t) => e.timed("semantic.retrieve_as_of", || {
                get_as_of_in(e, &ctx, key, t.timestamp_millis())
            }),
            None => self.get(key),
        }
    }

    /// Query with read options: `as_of` (each matching entry's version that
    /// held then; entries with none are left out) and `include_expired`
    /// (without `as_of`: also entries whose current version expired). The text
    /// matched is each entry's current text.
    pub fn query_with(
        &self,
        text: &str,
        limit: usize,
        vq: &VectorQuery,
        opts: &ReadOptions,
    ) -> Result<Vec<KnowledgeHit>> {
        let e = &self.scope.engine;
        let embedder = self.scope.embedder();
        e.timed("semantic.query", || {
            query_in(
                e,
                &self.scope.active_ctx(),
                text,
                limit,
                vq,
                embedder.as_deref(),
                opts,
            )
        })
    }
}
