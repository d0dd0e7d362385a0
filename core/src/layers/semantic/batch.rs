//! The batch write path of the semantic layer: `store_many`, many entries in
//! one storage transaction and one index batch, all or nothing.

use super::*;

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
}

impl NewKnowledge {
    /// An entry storing `knowledge` under `key`.
    pub fn new(key: impl Into<String>, knowledge: Value) -> Self {
        NewKnowledge {
            key: key.into(),
            knowledge,
            embedding: None,
        }
    }

    /// Set the embedding (1..=4096 finite numbers; the dimension is fixed per context).
    #[must_use]
    pub fn embedding(mut self, v: Vec<f32>) -> Self {
        self.embedding = Some(v);
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
    let mut total = 0usize;
    for (i, it) in items.iter().enumerate() {
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
    let rows: Vec<(Vec<u8>, Option<VecBytes>)> = items
        .iter()
        .map(|it| {
            (
                codec::ctx_key(ctx, &it.key),
                it.embedding.as_deref().map(VecBytes::from_f32),
            )
        })
        .collect();
    let now = e.opts.clock.now().timestamp_millis();
    let keep = lim.semantic_history.max(1) as u64;
    e.touch_context(ctx)?;
    let recs = e.indexed_write_prepared(
        &[&e.t.semantic, &e.t.semantic_history, &e.t.meta],
        || match dim {
            Some((i, d)) => vectors::claim_dim(e, &format!("items[{i}].embedding"), ctx, d),
            None => Ok(None),
        },
        |t, claim| {
            let mut recs = Vec::with_capacity(items.len());
            let mut ops = Vec::with_capacity(items.len());
            for (it, (dkey, emb)) in items.iter().zip(&rows) {
                // Read inside the transaction: a key given twice sees its first write.
                let cur: Option<KnowledgeRecord> = match t[0].get(dkey.as_slice())? {
                    Some(v) => Some(e.codec.decode(&v)?),
                    None => None,
                };
                let rec = KnowledgeRecord {
                    version: cur.as_ref().map_or(1, |c| c.version + 1),
                    created_at: cur.as_ref().map_or(now, |c| c.created_at),
                    updated_at: now,
                    value: it.knowledge.clone(),
                    embedding: emb.clone(),
                };
                t[0].insert(dkey.as_slice(), e.codec.encode(&rec)?)?;
                let hist = HistoryRecord {
                    value: rec.value.clone(),
                    recorded_at: now,
                };
                t[1].insert(
                    history_key(ctx, &it.key, rec.version),
                    e.codec.encode(&hist)?,
                )?;
                if rec.version > keep {
                    t[1].remove(history_key(ctx, &it.key, rec.version - keep))?;
                }
                ops.push(IndexOp::Upsert(index_doc(ctx, &it.key, &rec)));
                recs.push(rec);
            }
            if let (Some(k), Some((_, d))) = (claim, dim) {
                t[2].insert(k.as_slice(), vectors::dim_value(d))?;
            }
            Ok((recs, ops))
        },
    )?;
    Ok(items
        .iter()
        .zip(recs)
        .map(|(it, r)| to_public(&it.key, r))
        .collect())
}
