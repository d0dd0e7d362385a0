//! The document type the index writer queues for its indexing thread.
//!
//! tantivy's writer passes documents to its indexing thread through a bounded
//! channel of 10,000 slots (`PIPELINE_MAX_SIZE_IN_DOCS`, not configurable),
//! created anew at every commit with every slot's stamp written, so all of
//! it is resident. A slot holds up to four documents inline: with tantivy's
//! own `TantivyDocument` that is about 500 bytes a slot, 5 MB for the channel
//! for as long as the writer lives, and 10 MB while a commit hands over from
//! one channel to the next (heaptrack of a `low_memory` ingest: 4.96 MB live
//! at the peak, the third-largest item). A [`QueuedDoc`] is one pointer: the
//! slot is 80 bytes, the channel 0.8 MB; the cost is one more allocation per
//! document indexed.

use tantivy::schema::document::Document;
use tantivy::{IndexWriter, TantivyDocument, doc};

use super::{Fields, IndexDoc, scope_hash};

/// A `TantivyDocument` behind one pointer.
pub(crate) struct QueuedDoc(Box<TantivyDocument>);

/// The index writer, queueing [`QueuedDoc`]s.
pub(crate) type Writer = IndexWriter<QueuedDoc>;

impl From<TantivyDocument> for QueuedDoc {
    fn from(doc: TantivyDocument) -> Self {
        QueuedDoc(Box::new(doc))
    }
}

impl Document for QueuedDoc {
    type Value<'a> = <TantivyDocument as Document>::Value<'a>;
    type FieldsValuesIter<'a> = <TantivyDocument as Document>::FieldsValuesIter<'a>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        self.0.iter_fields_and_values()
    }

    fn into_tantivy_document(self) -> TantivyDocument {
        *self.0
    }
}

impl QueuedDoc {
    /// The index document of `d`.
    pub(super) fn new(f: &Fields, d: &IndexDoc) -> Self {
        let mut doc = doc!(
            f.uid => d.uid.as_str(),
            f.kind => d.kind.tag(),
            f.ctx => d.ctx.as_str(),
            f.summary => d.summary.as_str(),
            f.body => d.body.as_str(),
            f.ts => d.ts_ms,
            f.importance => d.importance,
            f.scope => scope_hash(d.kind, &d.ctx),
            f.uid_bucket => super::delete::uid_bucket(&d.uid),
        );
        for p in &d.participants {
            doc.add_text(f.participants, p);
            doc.add_text(f.participant_raw, p);
        }
        for t in &d.tags {
            doc.add_text(f.tags, t);
            doc.add_text(f.tag_raw, t);
        }
        doc.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::schema::{STORED, Schema, TEXT, Value};

    #[test]
    fn a_queued_document_is_one_pointer_and_yields_the_same_fields() {
        // What keeps the writer's channel small (module docs).
        assert_eq!(
            std::mem::size_of::<QueuedDoc>(),
            std::mem::size_of::<usize>()
        );
        assert!(std::mem::size_of::<TantivyDocument>() > 4 * std::mem::size_of::<usize>());
        let mut schema = Schema::builder();
        let body = schema.add_text_field("body", TEXT | STORED);
        let n = schema.add_u64_field("n", STORED);
        let mut doc = TantivyDocument::new();
        doc.add_text(body, "a short chat turn");
        doc.add_u64(n, 7);
        let queued = QueuedDoc::from(doc.clone());
        let fields: Vec<_> = queued
            .iter_fields_and_values()
            .map(|(f, v)| (f, v.as_str().map(str::to_owned), v.as_u64()))
            .collect();
        assert_eq!(
            fields,
            vec![
                (body, Some("a short chat turn".to_owned()), None),
                (n, None, Some(7)),
            ]
        );
        assert_eq!(queued.into_tantivy_document(), doc);
    }
}
