//! The items of the batch writes (`record_many`, `store_many`): one record per
//! item carrying what the single call takes, and their conversion to the
//! core's items. An error in item `i` names it: `items[3].importance`.

use memstrata::NewEpisode;
use memstrata::semantic::NewKnowledge;

use crate::error::BindingError;
use crate::options::{RecordOptions, embedding, on_duplicate};
use crate::types::{Embedding, JsonValue, Timestamp};

/// One episode of `episodic.record_many`: the summary and the options of `record`.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
pub struct EpisodeItem {
    /// One-line summary (required, not empty).
    pub summary: String,
    /// Arbitrary JSON content (default null).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub content: Option<JsonValue>,
    /// Who took part.
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub participants: Option<Vec<String>>,
    /// Tags.
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub tags: Option<Vec<String>>,
    /// Importance 1..=10 (default 5).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub importance: Option<u32>,
    /// When it happened (default now).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub timestamp: Option<Timestamp>,
    /// The host's embedding (1..=4096 finite numbers; dimension fixed per context).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub embedding: Option<Embedding>,
    /// What to do when an earlier episode (stored, or an earlier item of the batch)
    /// duplicates this one: `"keep"`, `"skip"`, `"merge"` or `"link"` (default: the
    /// context's policy).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    #[cfg_attr(feature = "napi", napi(ts_type = "'keep' | 'skip' | 'merge' | 'link'"))]
    pub on_duplicate: Option<String>,
}

/// One entry of `semantic.store_many`: what one `store` call takes.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
pub struct KnowledgeItem {
    /// The key (replaced when it exists).
    pub key: String,
    /// The knowledge (JSON-like).
    pub knowledge: JsonValue,
    /// The host's embedding of the entry (without it, the registered embedder's, if any).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub embedding: Option<Embedding>,
    /// What to do when another entry (stored, or an earlier item of the batch)
    /// or this key's current value duplicates the value (default: the context's policy).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    #[cfg_attr(feature = "napi", napi(ts_type = "'keep' | 'skip' | 'merge' | 'link'"))]
    pub on_duplicate: Option<String>,
    /// When this version starts to hold (default: now).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub valid_from: Option<Timestamp>,
    /// When it stops holding (exclusive; default: open).
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub valid_until: Option<Timestamp>,
}

impl BindingError {
    /// The same error about item `i` of the list argument `list`: its field
    /// (and the field named in its message) becomes `list[i].field`.
    #[must_use]
    pub fn in_item(mut self, list: &str, i: usize) -> Self {
        if let Some(f) = self.field.take() {
            let named = format!("{list}[{i}].{f}");
            self.message = self
                .message
                .replacen(&format!("`{f}`"), &format!("`{named}`"), 1);
            self.field = Some(named);
        }
        self
    }
}

/// The core's episodes for `items` (errors name `items[i].field`).
pub fn episodes(items: Vec<EpisodeItem>) -> Result<Vec<NewEpisode>, BindingError> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, it)| {
            RecordOptions {
                content: it.content,
                participants: it.participants,
                tags: it.tags,
                importance: it.importance,
                timestamp: it.timestamp,
                embedding: it.embedding,
                on_duplicate: it.on_duplicate,
            }
            .episode(it.summary)
            .map_err(|e| e.in_item("items", i))
        })
        .collect()
}

/// The core's knowledge items for `items` (errors name `items[i].field`).
pub fn knowledge(items: Vec<KnowledgeItem>) -> Result<Vec<NewKnowledge>, BindingError> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, it)| {
            let mut k = NewKnowledge::new(it.key, it.knowledge.into_inner());
            if let Some(v) = it.embedding {
                k = k.embedding(embedding(&v.0).map_err(|e| e.in_item("items", i))?);
            }
            if let Some(p) =
                on_duplicate(it.on_duplicate.as_deref()).map_err(|e| e.in_item("items", i))?
            {
                k = k.on_duplicate(p);
            }
            k.valid_from = it.valid_from.map(|t| t.0);
            k.valid_until = it.valid_until.map(|t| t.0);
            Ok(k)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_errors_name_the_item_and_the_field() {
        let e = episodes(vec![
            EpisodeItem {
                summary: "ok".into(),
                ..Default::default()
            },
            EpisodeItem {
                summary: "bad".into(),
                importance: Some(300),
                ..Default::default()
            },
        ])
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("items[1].importance"));
        assert!(e.message.contains("`items[1].importance`"), "{}", e.message);
        let e = knowledge(vec![KnowledgeItem {
            key: "k".into(),
            knowledge: JsonValue::NULL,
            embedding: Some(vec![f64::MAX].into()),
            ..Default::default()
        }])
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("items[0].embedding"));
        let e = knowledge(vec![KnowledgeItem {
            key: "k".into(),
            knowledge: JsonValue::NULL,
            on_duplicate: Some("drop".into()),
            ..Default::default()
        }])
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("items[0].on_duplicate"));
        let ok = episodes(vec![EpisodeItem {
            summary: "s".into(),
            tags: Some(vec!["t".into()]),
            importance: Some(3),
            ..Default::default()
        }])
        .unwrap();
        assert_eq!(
            (ok[0].tags.clone(), ok[0].importance),
            (vec!["t".into()], Some(3))
        );
    }
}
