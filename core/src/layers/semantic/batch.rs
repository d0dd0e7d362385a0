//! The batch write path of the semantic layer: `store_many`, many entries in
//! one storage transaction and one index batch, all or nothing.

use super::*;

use crate::layers::dedup::OnDuplicate;

/// One entry of [`Semantic::store_many`]: what one [`Semantic::store_with_embedding`]
/// call takes. Build with [`NewKnowledge::new`] and [`NewKnowledge::embedding`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct NewKnowledge {
    /// The key (replaced when it exists, as `store` does).
    pub key: String,
    /// The knowledge (any JSON).
    pub knowledge: Value,
    /// The host's embedding (`None`: the registered embedder's, if any).
    #[serde(default)]
    pub embedding: Option<Vec<f32>>,
    /// What to do when the value duplicates another entry's (or this key's
    /// current value), as [`StoreOptions::on_duplicate`] (default: the context's policy).
    #[serde(default)]
    pub on_duplicate: Option<OnDuplicate>,
    /// When this version starts to hold (default: now), as [`StoreOptions::valid_from`].
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
    /// When it stops holding (exclusive; default: open).
    #[serde(default)]
    pub valid_until: Option<DateTime<Utc>>,
}

impl NewKnowledge {
    /// An entry storing `knowledge` under `key`.
    pub fn new(key: impl Into<String>, knowledge: Value) -> Self {
        NewKnowledge {
            key: key.into(),
            knowledge,
            embedding: None,
            on_duplicate: None,
            valid_from: None,
            valid_until: None,
        }
    }

    /// Set the embedding (1..=4096 finite numbers; the dimension is fixed per context).
    #[must_use]
    pub fn embedding(mut self, v: Vec<f32>) -> Self {
        self.embedding = Some(v);
        self
    }

    /// Set the duplicate policy of this item.
    #[must_use]
    pub fn on_duplicate(mut self, p: OnDuplicate) -> Self {
        self.on_duplicate = Some(p);
        self
    }

    /// Set when this version starts to hold.
    #[must_use]
    pub fn valid_from(mut self, t: DateTime<Utc>) -> Self {
        self.valid_from = Some(t);
        self
    }

    /// Set when this version stops holding (exclusive).
    #[must_use]
    pub fn valid_until(mut self, t: DateTime<Utc>) -> Self {
        self.valid_until = Some(t);
        self
    }
}

/// Store `items` in `ctx` in one transaction (see [`Semantic::store_many`]).
pub(crate) fn store_many_in(
    e: &Engine,
    ctx: &str,
    mut items: Vec<NewKnowledge>,
    embedder: Option<&dyn Embedder>,
) -> Result<Vec<Knowledge>> {
    let lim = &e.opts.limits;
    input::batch_items(lim, "items", items.len())?;
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let now = e.opts.clock.now().timestamp_millis();
    let mut spans = Vec::with_capacity(items.len());
    let mut total = 0usize;
    for (i, it) in items.iter().enumerate() {
        spans.push(
            Span::new(it.valid_from, it.valid_until, now).map_err(|err| err.in_item("items", i))?,
        );
        let check = || -> Result<()> {
            input::key(lim, "key", &it.key)?;
            input::value(lim, "knowledge", &it.knowledge)?;
            if let Some(v) = &it.embedding {
                embedder::check("embedding", v)?;
            }
            Ok(())
        };
        check().map_err(|err| err.in_item("items", i))?;
        total += it.key.len() + input::json_size(&it.knowledge);
        input::batch_bytes(lim, "items", total)?;
    }
    let dim = embedder::fill_batch(
        &mut items,
        embedder,
        |it| &mut it.embedding,
        |it| embed_text(&it.key, &it.knowledge),
    )?;
    let mut cosines = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        cosines.push(
            dedup::cosine_hint(e, ctx, &it.key, it.embedding.as_deref(), it.on_duplicate)
                .map_err(|err| err.in_item("items", i))?,
        );
    }
    let keep = lim.semantic_history.max(1) as u64;
    let seed = e.codec.hash_seed();
    e.touch_context(ctx)?;
    let recs = e.indexed_write_prepared(
        &[&e.t.semantic, &e.t.semantic_history, &e.t.meta, &e.t.dedup],
        || {
            // Every item's duplicate decision, in order: the batch's earlier
            // writes are seen through the overlay.
            let mut overlay = dedup::Overlay::default();
            // Items written without detection (the context had no dedup index
            // and their policy was keep): added to the overlay only if a later
            // item detects.
            let mut backlog: Vec<usize> = Vec::new();
            let mut decisions: Vec<dedup::Decision> = Vec::with_capacity(items.len());
            for (i, (it, cosine)) in items.iter().zip(cosines).enumerate() {
                let detect = crate::layers::dedup::may_detect(
                    e,
                    ctx,
                    crate::search::dedup::DupKind::Knowledge,
                    it.on_duplicate,
                )
                .map_err(|err| err.in_item("items", i))?;
                if detect {
                    for j in backlog.drain(..) {
                        let t = &decisions[j].target;
                        overlay.wrote(seed, ctx, t, items[j].knowledge.clone());
                    }
                }
                let d = dedup::decide(
                    e,
                    ctx,
                    &it.key,
                    &it.knowledge,
                    it.on_duplicate,
                    cosine,
                    &overlay,
                )
                .map_err(|err| err.in_item("items", i))?;
                if d.write && !d.indexed {
                    backlog.push(i);
                } else if d.write {
                    let value = if d.patch {
                        let mut v = match overlay_value(e, ctx, &overlay, &d.target)? {
                            Some(v) => v,
                            None => Value::Null,
                        };
                        json_patch::merge(&mut v, &it.knowledge);
                        v
                    } else {
                        it.knowledge.clone()
                    };
                    overlay.wrote(seed, ctx, &d.target, value);
                }
                decisions.push(d);
            }
            // Once an item built the context's dedup index, the earlier items'
            // writes keep it up to date too.
            if decisions.iter().any(|d| d.indexed) {
                for d in &mut decisions {
                    d.indexed = true;
                }
            }
            let claim = match dim {
                Some((i, d)) if decisions.iter().any(|x| x.write && !x.patch) => {
                    vectors::claim_dim(e, &format!("items[{i}].embedding"), ctx, d)?
                }
                _ => None,
            };
            Ok((decisions, claim))
        },
        |t, (decisions, claim)| {
            let mut recs = Vec::with_capacity(items.len());
            let mut ops = Vec::with_capacity(items.len());
            for (i, (it, d)) in items.iter().zip(decisions).enumerate() {
                let target = d.target.as_str();
                let dkey = codec::ctx_key(ctx, target);
                // Read inside the transaction: a key given twice sees its first write.
                let cur: Option<KnowledgeRecord> = match t[0].get(dkey.as_slice())? {
                    Some(v) => Some(e.codec.decode(&v)?),
                    None => None,
                };
                if !d.write {
                    let cur = cur.ok_or_else(|| {
                        Error::not_found(format!("semantic key {target:?} in context {ctx:?}"))
                            .in_item("items", i)
                    })?;
                    let mut k = to_public(target, cur);
                    k.duplicate_of = d.duplicate_of.clone();
                    recs.push(k);
                    continue;
                }
                let value = match (&cur, d.patch) {
                    (Some(c), true) => {
                        let mut v = c.value.clone();
                        json_patch::merge(&mut v, &it.knowledge);
                        v
                    }
                    _ => it.knowledge.clone(),
                };
                input::value(lim, "knowledge", &value).map_err(|err| err.in_item("items", i))?;
                let rec = KnowledgeRecord {
                    version: cur.as_ref().map_or(1, |c| c.version + 1),
                    created_at: cur.as_ref().map_or(now, |c| c.created_at),
                    updated_at: now,
                    value,
                    embedding: if d.patch {
                        cur.as_ref().and_then(|c| c.embedding.clone())
                    } else {
                        it.embedding.as_deref().map(VecBytes::from_f32)
                    },
                    duplicate_of: if d.patch {
                        cur.as_ref().and_then(|c| c.duplicate_of.clone())
                    } else {
                        d.link.clone()
                    },
                    valid_from: spans[i].from.filter(|f| *f != now),
                    valid_until: spans[i].until,
                };
                ops.push(put_version(
                    e,
                    t,
                    ctx,
                    target,
                    cur.as_ref(),
                    &rec,
                    d.indexed,
                    keep,
                )?);
                let mut k = to_public(target, rec);
                k.duplicate_of = d.duplicate_of.clone();
                recs.push(k);
            }
            if let (Some(k), Some((_, d))) = (claim, dim) {
                t[2].insert(k.as_slice(), vectors::dim_value(d))?;
            }
            Ok((recs, ops))
        },
    )?;
    Ok(recs)
}

/// The value of `key` after the batch's earlier items, else the stored one.
fn overlay_value(
    e: &Engine,
    ctx: &str,
    overlay: &dedup::Overlay,
    key: &str,
) -> Result<Option<Value>> {
    if let Some(v) = overlay.value(key) {
        return Ok(Some(v.clone()));
    }
    Ok(match e.t.semantic.get(codec::ctx_key(ctx, key))? {
        Some(v) => Some(e.codec.decode::<KnowledgeRecord>(&v)?.value),
        None => None,
    })
}
