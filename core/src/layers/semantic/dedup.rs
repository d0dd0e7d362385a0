//! Duplicates of a knowledge entry caught on `store`: the fingerprint of a
//! value, the decision each `on_duplicate` policy makes, and the upkeep of the
//! entry's dedup keys (see `layers::dedup`).

#[allow(unused_imports)]
use super::*;

use crate::layers::dedup::{self as policy, Candidate, OnDuplicate, Want};
use crate::search::dedup::{self, DupKind, Fingerprint};

/// Optional arguments of [`Semantic::store_with`].
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct StoreOptions {
    /// The host's embedding of the entry (`None`: the registered embedder's, if any).
    pub embedding: Option<Vec<f32>>,
    /// What to do when another entry of the context (or this key's current
    /// value) duplicates the new value (default: the context's policy).
    pub on_duplicate: Option<OnDuplicate>,
    /// When the new version starts to hold (default: now). The version it
    /// supersedes stays in history, closed at this time.
    pub valid_from: Option<DateTime<Utc>>,
    /// When the new version stops holding (exclusive; default: open).
    pub valid_until: Option<DateTime<Utc>>,
}

impl StoreOptions {
    /// Set the embedding.
    #[must_use]
    pub fn embedding(mut self, v: Vec<f32>) -> Self {
        self.embedding = Some(v);
        self
    }
    /// Set the duplicate policy of this write.
    #[must_use]
    pub fn on_duplicate(mut self, p: OnDuplicate) -> Self {
        self.on_duplicate = Some(p);
        self
    }
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

/// The exact text of a value: its JSON.
fn exact_text(v: &Value) -> String {
    v.to_string()
}

fn value_text(v: &Value) -> String {
    let mut body = String::new();
    input::json_text(v, &mut body);
    body
}

/// The dedup fingerprint of a value: none for a value whose normalised text is
/// shorter than `MIN_NEAR_CHARS` (`true`, `3`, `"dark"` are too common to call
/// two entries duplicates).
pub(crate) fn fingerprint(seed: u64, v: &Value) -> Fingerprint {
    let text = value_text(v);
    if dedup::normalise(&text).chars().count() < dedup::MIN_NEAR_CHARS {
        return Fingerprint::default();
    }
    Fingerprint::of(seed, &exact_text(v), &text, true)
}

/// Whether a write of `ctx` under policy `p` runs detection (building the
/// context's dedup index from every stored entry the first time a policy
/// other than `keep` is used; see `layers::dedup::detects`). Under the writer lock.
pub(crate) fn detects(e: &Engine, ctx: &str, p: OnDuplicate) -> Result<bool> {
    policy::detects(e, ctx, DupKind::Knowledge, p, |f| {
        let seed = e.codec.hash_seed();
        for item in e.t.semantic.scan_prefix(codec::ctx_prefix(ctx)) {
            let (k, v) = item?;
            let (_, key) = codec::split_ctx_key(&k)?;
            let r: KnowledgeRecord = e.codec.decode(&v)?;
            f(&key, &fingerprint(seed, &r.value))?;
        }
        Ok(())
    })
}

/// Whether (`ctx`, knowledge) has a dedup index to keep up to date. Under the writer lock.
pub(crate) fn is_indexed(e: &Engine, ctx: &str) -> Result<bool> {
    policy::is_indexed(e, ctx, DupKind::Knowledge)
}

/// The nearest stored embedding of `ctx` to a new value's (other than `key`'s),
/// when the write may run detection (found before the writer lock, as a search is).
pub(crate) fn cosine_hint(
    e: &Engine,
    ctx: &str,
    key: &str,
    embedding: Option<&[f32]>,
    explicit: Option<OnDuplicate>,
) -> Result<Option<(String, f32)>> {
    match embedding {
        Some(v) if policy::may_detect(e, ctx, DupKind::Knowledge, explicit)? => {
            policy::nearest_vector(e, Kind::Knowledge, ctx, v, Some(key))
        }
        _ => Ok(None),
    }
}

/// The values a batch has written so far, seen by its later items' duplicate
/// checks (`None`: no batch, the stored entries only).
#[derive(Default)]
pub(crate) struct Overlay {
    /// Key to its value after the batch's earlier items.
    values: std::collections::HashMap<String, Value>,
    /// Dedup keys of those values (with an empty record id) to their keys.
    keys: std::collections::HashMap<Vec<u8>, Vec<String>>,
}

impl Overlay {
    /// The value the batch wrote under `key`, if any.
    pub(crate) fn value(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// Record that the batch wrote `value` under `key` of `ctx`.
    pub(crate) fn wrote(&mut self, seed: u64, ctx: &str, key: &str, value: Value) {
        for k in dedup::keys(ctx, DupKind::Knowledge, "", &fingerprint(seed, &value)) {
            let v = self.keys.entry(k).or_default();
            if !v.iter().any(|x| x == key) {
                v.push(key.to_owned());
            }
        }
        self.values.insert(key.to_owned(), value);
    }
}

/// What a `store` writes, decided under the index writer lock.
#[derive(Debug, Clone)]
pub(crate) struct Decision {
    /// The key written (or returned, when `write` is false).
    pub target: String,
    /// Whether a new version is written.
    pub write: bool,
    /// Apply the value as a merge patch to the target's value (`merge`).
    pub patch: bool,
    /// The duplicate found, reported in the result.
    pub duplicate_of: Option<String>,
    /// The link stored on the new version (`link`).
    pub link: Option<String>,
    /// Whether the context has a dedup index (the write keeps its keys up to date).
    pub indexed: bool,
}

impl Decision {
    /// A plain write of `key` (no duplicate policy: `update`, import).
    pub(crate) fn plain(key: &str) -> Self {
        Decision {
            target: key.to_owned(),
            write: true,
            patch: false,
            duplicate_of: None,
            link: None,
            indexed: false,
        }
    }
}

/// Decide what storing `value` under `key` of `ctx` does. `cosine`: the
/// nearest stored embedding of the context and its similarity.
pub(crate) fn decide(
    e: &Engine,
    ctx: &str,
    key: &str,
    value: &Value,
    explicit: Option<OnDuplicate>,
    cosine: Option<(String, f32)>,
    overlay: &Overlay,
) -> Result<Decision> {
    let on_duplicate = policy::effective(e, ctx, explicit)?;
    let mut d = Decision::plain(key);
    d.indexed = detects(e, ctx, on_duplicate)?;
    if !d.indexed {
        return Ok(d);
    }
    let seed = e.codec.hash_seed();
    // A key's value: the batch's, else the stored one.
    let current = |k: &str| -> Result<Option<Value>> {
        if let Some(v) = overlay.values.get(k) {
            return Ok(Some(v.clone()));
        }
        Ok(match e.t.semantic.get(codec::ctx_key(ctx, k))? {
            Some(v) => Some(e.codec.decode::<KnowledgeRecord>(&v)?.value),
            None => None,
        })
    };
    // The same value again under the same key.
    let same = current(key)?.is_some_and(|v| v == *value);
    let found = if same {
        Some(key.to_owned())
    } else {
        let fp = fingerprint(seed, value);
        let exact = exact_text(value);
        // The value's text is given whatever `want` says: the test of short
        // values needs it.
        let mut load = |k: &str, want: Want| -> Result<Option<Candidate>> {
            Ok(current(k)?.and_then(|v| {
                // Short values are never near-duplicates of anything (they
                // have no fingerprint: `fingerprint`'s test, without the hashing).
                let text = value_text(&v);
                (dedup::normalise(&text).chars().count() >= dedup::MIN_NEAR_CHARS).then(|| {
                    Candidate {
                        exact: want.exact.then(|| exact_text(&v)),
                        text: Some(text),
                    }
                })
            }))
        };
        let stored = policy::find(
            e,
            ctx,
            DupKind::Knowledge,
            &fp,
            &exact,
            Some(key),
            cosine,
            // A batch's earlier value of a key is not the one indexed.
            overlay.values.is_empty(),
            &mut load,
        )?;
        // The batch's earlier values: exact, else the most similar by shingles.
        let mut best: Option<(String, f32)> = None;
        for k in dedup::keys(ctx, DupKind::Knowledge, "", &fp) {
            for cand in overlay
                .keys
                .get(&k)
                .into_iter()
                .flatten()
                .take(dedup::MAX_CANDIDATES)
            {
                if cand == key {
                    continue;
                }
                let want = Want {
                    exact: true,
                    text: true,
                };
                let Some(c) = load(cand, want)? else {
                    continue;
                };
                let sim = if c.exact.as_deref() == Some(exact.as_str()) {
                    1.0
                } else {
                    dedup::jaccard(
                        &fp.shingles,
                        dedup::shingles(
                            seed,
                            &dedup::normalise(c.text.as_deref().unwrap_or_default()),
                        )
                        .as_slice(),
                    )
                };
                if sim >= dedup::NEAR_JACCARD && best.as_ref().is_none_or(|b| sim > b.1) {
                    best = Some((cand.clone(), sim));
                }
            }
        }
        match (stored, best) {
            (Some(s), Some(b)) if b.1 > s.similarity => Some(b.0),
            (Some(s), _) => Some(s.id),
            (None, b) => b.map(|b| b.0),
        }
    };
    let Some(found) = found else {
        return Ok(d);
    };
    d.duplicate_of = Some(found.clone());
    match on_duplicate {
        OnDuplicate::Keep => {}
        OnDuplicate::Link => {
            if found != key {
                d.link = Some(found);
            }
        }
        OnDuplicate::Skip => {
            d.target = found;
            d.write = false;
        }
        OnDuplicate::Merge => {
            d.write = found != key;
            d.patch = true;
            d.target = found;
        }
    }
    Ok(d)
}

/// The duplicate check of a `store`: the call's policy, the new value, the
/// nearest stored embedding.
pub(crate) struct DupCheck<'a> {
    pub explicit: Option<OnDuplicate>,
    pub value: &'a Value,
    pub cosine: Option<(String, f32)>,
}

/// The value a `store` writes (its `next` ignores the current record).
pub(crate) fn check_value(
    next: &impl Fn(Option<&KnowledgeRecord>) -> Result<Value>,
) -> Result<Option<Value>> {
    next(None).map(Some)
}

/// Store (replace) an entry with an optional embedding (`None`: the entry has none).
pub(crate) fn store_embedded_in(
    e: &Engine,
    ctx: &str,
    key: &str,
    knowledge: Value,
    embedding: Option<Vec<f32>>,
    on_duplicate: Option<OnDuplicate>,
    span: Span,
) -> Result<Knowledge> {
    input::key(&e.opts.limits, "key", key)?;
    input::value(&e.opts.limits, "knowledge", &knowledge)?;
    // The nearest stored vector, found before the writer lock as a search is.
    if let Some(v) = &embedding {
        embedder::check("embedding", v)?;
    }
    let cosine = cosine_hint(e, ctx, key, embedding.as_deref(), on_duplicate)?;
    write_version(
        e,
        ctx,
        key,
        |_| Ok(knowledge.clone()),
        EmbeddingChange::Set(embedding),
        Some(DupCheck {
            explicit: on_duplicate,
            value: &knowledge,
            cosine,
        }),
        span,
    )
}

/// Replace the dedup keys of `key` (value `old`, if any) by those of `new`, in a
/// transaction (rows) or in the in-memory index.
pub(crate) fn rekey(
    e: &Engine,
    t: &crate::storage::TxTree<'_>,
    ctx: &str,
    key: &str,
    old: Option<&Value>,
    new: Option<&Value>,
) -> crate::storage::TxResult<()> {
    let seed = e.codec.hash_seed();
    if policy::in_memory(e) {
        // Under the writer lock, before the commit: a failed transaction
        // leaves keys that lead to a value it does not hold (candidates are
        // always read back), or a key missing (a duplicate not found).
        match new {
            Some(v) => policy::mem_insert(e, ctx, DupKind::Knowledge, key, &fingerprint(seed, v)),
            None => policy::mem_remove(e, ctx, DupKind::Knowledge, key),
        }
        return Ok(());
    }
    let old_keys = old.map(|v| dedup::keys(ctx, DupKind::Knowledge, key, &fingerprint(seed, v)));
    let new_keys = new.map(|v| dedup::keys(ctx, DupKind::Knowledge, key, &fingerprint(seed, v)));
    for k in old_keys.iter().flatten() {
        if !new_keys.iter().flatten().any(|n| n == k) {
            t.remove(k.as_slice())?;
        }
    }
    for k in new_keys.iter().flatten() {
        t.insert(k.as_slice(), &[][..])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A knowledge record as versions before duplicate detection wrote it.
    #[derive(Serialize)]
    struct OldRecord {
        value: Value,
        version: u64,
        created_at: i64,
        updated_at: i64,
    }

    #[test]
    fn an_old_record_decodes_with_defaults() {
        let old = OldRecord {
            value: Value::from("v"),
            version: 2,
            created_at: 1,
            updated_at: 2,
        };
        let bytes = codec::encode(&old).unwrap();
        let r: KnowledgeRecord = codec::decode(&bytes).unwrap();
        assert_eq!(r.duplicate_of, None);
        assert_eq!(r.version, 2);
        assert_eq!(codec::encode(&r).unwrap(), bytes);
    }

    #[test]
    fn short_values_have_no_fingerprint() {
        assert!(fingerprint(0, &Value::from("dark")).exact.is_none());
        assert!(fingerprint(0, &Value::Bool(true)).bands.is_empty());
        let long = fingerprint(0, &Value::from("a value long enough to compare"));
        assert!(long.exact.is_some());
        assert_eq!(long.bands.len(), dedup::MINHASH_BANDS);
    }
}
