//! Import of the MCP reference memory server's knowledge graph (entities and relations) as knowledge entries.

#[allow(unused_imports)]
use super::*;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct KgEntity {
    name: String,
    #[serde(default)]
    entity_type: Option<String>,
    #[serde(default)]
    observations: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct KgRelation {
    from: String,
    to: String,
    relation_type: String,
}

/// Semantic key of a knowledge-graph entity.
pub const ENTITY_KEY_PREFIX: &str = "entity:";

pub(super) fn entity_value(
    entity_type: Option<&str>,
    observations: &[String],
    relations: &[(String, String)],
) -> Value {
    json!({
        "entityType": entity_type,
        "observations": observations,
        "relations": relations
            .iter()
            .map(|(rt, to)| json!({"relationType": rt, "to": to}))
            .collect::<Vec<_>>(),
    })
}

pub(super) fn relations_of(v: &Value) -> Vec<(String, String)> {
    v.get("relations")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    Some((
                        r.get("relationType")?.as_str()?.to_owned(),
                        r.get("to")?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Admin {
    /// Import the knowledge graph of the MCP reference memory server (its `memory.jsonl`:
    /// `{"type":"entity","name","entityType","observations"}` and
    /// `{"type":"relation","from","to","relationType"}` lines) into the semantic layer of
    /// the active context: entity `X` becomes key `entity:X` holding
    /// `{entityType, observations, relations: [{relationType, to}]}`.
    ///
    /// Entities in the file replace stored entries of the same name; relations from an
    /// entity not in the file are added to the stored entry (created with
    /// `entityType: null` if absent). The file is validated before anything is written.
    pub fn import_knowledge_graph(&self, reader: &mut dyn BufRead) -> Result<ImportStats> {
        let e = &self.scope.engine;
        e.timed("import_knowledge_graph", || {
            let lim = &e.opts.limits;
            let ctx = self.scope.active_context();
            let mut entities: BTreeMap<String, KgSlot> = BTreeMap::new();
            let mut outside: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
            let mut stats = ImportStats::default();
            let mut relations: Vec<KgRelation> = Vec::new();
            let mut buf = String::new();
            let mut n = 0usize;
            loop {
                n += 1;
                if next_line(reader, &mut buf, n)?.is_none() {
                    break;
                }
                if buf.trim().is_empty() {
                    continue;
                }
                let (ty, v) = split_type(n, &buf)?;
                match ty.as_str() {
                    "entity" => {
                        let ent: KgEntity = fields(n, "entity", v)?;
                        check(
                            n,
                            "entity",
                            input::key(lim, "name", &format!("{ENTITY_KEY_PREFIX}{}", ent.name)),
                        )?;
                        let slot = entities
                            .entry(ent.name)
                            .or_insert_with(|| (None, Vec::new(), Vec::new()));
                        if ent.entity_type.is_some() {
                            slot.0 = ent.entity_type;
                        }
                        for o in ent.observations {
                            if !slot.1.contains(&o) {
                                slot.1.push(o);
                            }
                        }
                        stats.add("entity", 1);
                    }
                    "relation" => {
                        let rel: KgRelation = fields(n, "relation", v)?;
                        check(
                            n,
                            "relation",
                            input::key(lim, "from", &format!("{ENTITY_KEY_PREFIX}{}", rel.from)),
                        )?;
                        check(n, "relation", input::key(lim, "to", &rel.to))?;
                        check(
                            n,
                            "relation",
                            input::key(lim, "relationType", &rel.relation_type),
                        )?;
                        relations.push(rel);
                        stats.add("relation", 1);
                    }
                    other => {
                        return Err(line_err(
                            n,
                            format!("expected type \"entity\" or \"relation\", got {other:?}"),
                        ));
                    }
                }
            }
            for rel in relations {
                let pair = (rel.relation_type, rel.to);
                let list = match entities.get_mut(&rel.from) {
                    Some(slot) => &mut slot.2,
                    None => outside.entry(rel.from).or_default(),
                };
                if !list.contains(&pair) {
                    list.push(pair);
                }
            }
            let mut values: Vec<(String, Value)> =
                Vec::with_capacity(entities.len() + outside.len());
            for (name, (et, obs, rels)) in &entities {
                values.push((
                    format!("{ENTITY_KEY_PREFIX}{name}"),
                    entity_value(et.as_deref(), obs, rels),
                ));
            }
            for (name, rels) in outside {
                let key = format!("{ENTITY_KEY_PREFIX}{name}");
                let v = match semantic::get_in(e, &ctx, &key)? {
                    Some(k) => {
                        let mut cur = relations_of(&k.knowledge);
                        for r in rels {
                            if !cur.contains(&r) {
                                cur.push(r);
                            }
                        }
                        let mut v = k.knowledge;
                        if let Value::Object(m) = &mut v {
                            m.insert(
                                "relations".into(),
                                Value::Array(
                                    cur.iter()
                                        .map(|(rt, to)| json!({"relationType": rt, "to": to}))
                                        .collect(),
                                ),
                            );
                            v
                        } else {
                            entity_value(None, &[], &cur)
                        }
                    }
                    None => entity_value(None, &[], &rels),
                };
                values.push((key, v));
            }
            for (key, v) in &values {
                input::value(lim, "knowledge", v)
                    .map_err(|err| Error::invalid(key.as_str(), err.to_string()))?;
            }
            for (key, v) in values {
                semantic::store_in(e, &ctx, &key, v)?;
            }
            Ok(stats)
        })
    }
}
