//! Export / import in a versioned JSON Lines format (see `docs/export-format.md`), and import
//! of the MCP reference memory server's knowledge graph.
//!
//! Import reads, parses and validates the whole input before writing anything, so a bad
//! file leaves the store unchanged; errors name the line.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::admin::handle::Admin;
use crate::admin::optimize::{PROGRESS_EVERY, Progress, no_progress};
use crate::config::clock::millis_to_dt;
use crate::continuity::sessions::{self, ImportedVersion, SessionRecord};
use crate::continuity::timesheet::{self, TaskRecord};
use crate::engine::Engine;
use crate::engine::vectors;
use crate::layers::episodic::{self, EpisodeRecord, NewEpisode};
use crate::layers::semantic::{self, HistoryRecord, KnowledgeRecord};
use crate::layers::short_term::StRecord;
use crate::layers::working::{WorkingState, WsRecord};
use crate::search::embedder;
use crate::search::vector::VecBytes;
use crate::{Error, Result, storage::codec, util::input};

pub(crate) mod graph;
#[allow(unused_imports)]
use graph::*;

mod import;
#[allow(unused_imports)]
use import::*;

mod records;
#[allow(unused_imports)]
use records::*;

/// Version of the export format this build writes and the newest it reads.
pub const EXPORT_FORMAT_VERSION: u32 = 2;

/// The `type` of the header line.
const HEADER_TYPE: &str = "memstrata_export";

/// Record counts of an export.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExportStats {
    /// Lines written after the header.
    pub records: u64,
    /// Lines per record `type`.
    pub counts: BTreeMap<String, u64>,
}

/// Record counts of an import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ImportStats {
    /// Records applied.
    pub records: u64,
    /// Records per `type`.
    pub counts: BTreeMap<String, u64>,
}

impl ExportStats {
    fn add(&mut self, t: &str) {
        self.records += 1;
        *self.counts.entry(t.to_owned()).or_insert(0) += 1;
    }
}

impl ImportStats {
    fn add(&mut self, t: &str, n: u64) {
        self.records += n;
        *self.counts.entry(t.to_owned()).or_insert(0) += n;
    }
}

fn write_line<T: Serialize>(w: &mut dyn Write, ty: &str, rec: &T) -> Result<()> {
    let mut v =
        serde_json::to_value(rec).map_err(|e| Error::unencodable(format!("export: {e}")))?;
    let Value::Object(m) = &mut v else {
        return Err(Error::unencodable("export: record is not an object"));
    };
    let mut line = Map::new();
    line.insert("type".into(), Value::String(ty.to_owned()));
    line.append(m);
    serde_json::to_writer(&mut *w, &line).map_err(|e| Error::Io(std::io::Error::other(e)))?;
    w.write_all(b"\n")?;
    Ok(())
}

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn trace_suffix(k: &[u8], run_id: &str) -> Result<u64> {
    k.get(run_id.len() + 1..)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| {
            Error::corrupted(format!("run {run_id}: trace key is not `run_id 0x00 u64`"))
        })
}

fn export_all(e: &Engine, w: &mut dyn Write) -> Result<ExportStats> {
    let mut stats = ExportStats::default();
    write_line(
        w,
        HEADER_TYPE,
        &json!({
            "format_version": EXPORT_FORMAT_VERSION,
            "exported_at": e.opts.clock.now(),
            "engine_version": env!("CARGO_PKG_VERSION"),
        }),
    )?;

    for k in e.t.contexts.iter().keys() {
        let k = k?;
        let name = String::from_utf8(k.to_vec())
            .map_err(|_| Error::corrupted("non-UTF-8 context name"))?;
        let retention = Some(crate::layers::episodic::retention::policy(e, &name)?)
            .filter(|p| !p.is_unlimited());
        write_line(w, "context", &ContextLine { name, retention })?;
        stats.add("context");
    }

    let now = e.opts.clock.now().timestamp_millis();
    for item in e.t.short_term.iter() {
        let (k, v) = item?;
        let (context, key) = codec::split_ctx_key(&k)?;
        let r: StRecord = e.codec.decode(&v)?;
        if r.expires_at.is_some_and(|t| t <= now) {
            continue; // expired: already invisible, not part of the store's content
        }
        let line = ShortTermLine {
            context,
            key,
            value: r.value,
            stored_at: millis_to_dt(r.stored_at),
            expires_at: r.expires_at.map(millis_to_dt),
        };
        write_line(w, "short_term", &line)?;
        stats.add("short_term");
    }

    for item in e.t.working.iter() {
        let (k, v) = item?;
        let (context, _) = codec::split_ctx_key(&k)?;
        let st: WorkingState = e.codec.decode(&v)?;
        let line = WorkingLine {
            context,
            focus: st.focus,
            workspace: st
                .workspace
                .into_iter()
                .map(|r| WorkspaceLine {
                    id: r.id,
                    value: r.value,
                    added_at: millis_to_dt(r.added_at),
                })
                .collect(),
        };
        write_line(w, "working", &line)?;
        stats.add("working");
    }

    for item in e.t.episodes.iter() {
        let (k, v) = item?;
        let (context, id) = codec::split_ctx_key(&k)?;
        let r = EpisodeRecord::decode(&e.codec, &id, &v)?;
        let line = EpisodeLine {
            context,
            id: r.id,
            timestamp: millis_to_dt(r.timestamp),
            summary: r.summary,
            content: r.content,
            participants: r.participants,
            tags: r.tags,
            importance: r.importance,
            embedding: r.embedding.as_ref().map(|b| b.to_f32()).transpose()?,
            seen_count: (r.seen_count > 1).then_some(r.seen_count),
            last_seen: r.last_seen.map(millis_to_dt),
            duplicate_of: r.duplicate_of,
            recorded_at: r.recorded_at.map(millis_to_dt),
        };
        write_line(w, "episode", &line)?;
        stats.add("episode");
    }

    for item in e.t.semantic.iter() {
        let (k, v) = item?;
        let (context, key) = codec::split_ctx_key(&k)?;
        let r: KnowledgeRecord = e.codec.decode(&v)?;
        // Every version's validity as it reads (derived for versions written
        // before validity existed), so the file states it.
        let history = semantic::validity_spans(semantic::history_in(e, &context, &key)?)
            .into_iter()
            .map(|(version, h, from, until)| HistoryLine {
                version,
                knowledge: h.value,
                recorded_at: millis_to_dt(h.recorded_at),
                valid_from: (from != h.recorded_at).then(|| millis_to_dt(from)),
                valid_until: until.map(millis_to_dt),
            })
            .collect();
        let line = KnowledgeLine {
            context,
            key,
            knowledge: r.value,
            version: r.version,
            created_at: millis_to_dt(r.created_at),
            updated_at: millis_to_dt(r.updated_at),
            history,
            embedding: r.embedding.as_ref().map(|b| b.to_f32()).transpose()?,
            duplicate_of: r.duplicate_of,
            valid_from: r.valid_from.map(millis_to_dt),
            valid_until: r.valid_until.map(millis_to_dt),
        };
        write_line(w, "knowledge", &line)?;
        stats.add("knowledge");
    }

    for item in e.t.procedures.iter() {
        let (k, v) = item?;
        let (context, name) = codec::split_ctx_key(&k)?;
        let record: Value = e.codec.decode(&v)?;
        write_line(
            w,
            "procedure",
            &ProcedureLine {
                context,
                name,
                record,
            },
        )?;
        stats.add("procedure");
    }

    // The runs tree holds `run_id` -> header and `run_id 0x00 seq` -> trace entry.
    let mut headers: Vec<(String, Value)> = Vec::new();
    for item in e.t.runs.iter() {
        let (k, v) = item?;
        if k.contains(&0) {
            continue;
        }
        let run_id =
            String::from_utf8(k.to_vec()).map_err(|_| Error::corrupted("non-UTF-8 run id"))?;
        headers.push((run_id, e.codec.decode(&v)?));
    }
    for (run_id, record) in headers {
        let mut prefix = run_id.as_bytes().to_vec();
        prefix.push(0);
        let mut trace = Vec::new();
        for item in e.t.runs.scan_prefix(&prefix) {
            let (k, v) = item?;
            trace.push(TraceLine {
                seq: trace_suffix(&k, &run_id)?,
                entry: e.codec.decode(&v)?,
            });
        }
        write_line(
            w,
            "run",
            &RunLine {
                run_id,
                record,
                trace,
            },
        )?;
        stats.add("run");
    }

    for (sid, rec) in sessions::all_sessions(e)? {
        let versions = sessions::export_versions(e, &sid)?
            .into_iter()
            .map(|(version, saved_at, level, content)| SessionVersionLine {
                version,
                saved_at: millis_to_dt(saved_at),
                compression_level: level,
                content,
            })
            .collect();
        let line = SessionLine {
            session_id: sid,
            name: rec.name,
            metadata: rec.metadata,
            created_at: millis_to_dt(rec.created_at),
            updated_at: millis_to_dt(rec.updated_at),
            last_version: rec.last_version,
            versions,
        };
        write_line(w, "session", &line)?;
        stats.add("session");
    }

    for r in timesheet::all_tasks(e)? {
        let line = TaskLine {
            task_id: r.task_id,
            llm_name: r.llm_name,
            task_description: r.description,
            context: r.context,
            context_text: r.context_text,
            start_time: millis_to_dt(r.start_time),
            end_time: r.end_time.map(millis_to_dt),
            summary: r.summary,
            duration_seconds: r.duration_seconds,
            files_modified: r.files_modified,
            files: r.files,
            episode_id: r.episode_id,
        };
        write_line(w, "task", &line)?;
        stats.add("task");
    }
    w.flush()?;
    Ok(stats)
}

impl Admin {
    /// Write every layer, every context, sessions (all versions, decoded), procedures, runs
    /// and tasks as JSON Lines (`docs/export-format.md`). Expired short-term items are left out.
    ///
    /// The export is not a point-in-time snapshot: writes made while it runs may or may not
    /// be included.
    pub fn export(&self, writer: &mut dyn Write) -> Result<ExportStats> {
        let e = &self.scope.engine;
        e.timed("export", || export_all(e, writer))
    }

    /// Import an export. The whole input is parsed and validated first; a malformed line,
    /// an unknown record type or a newer `format_version` fails with `InvalidInput` naming
    /// the line and nothing is written. Records keep their ids, versions and timestamps
    /// and replace records with the same key.
    pub fn import(&self, reader: &mut dyn BufRead) -> Result<ImportStats> {
        self.import_with_progress(reader, &no_progress)
    }

    /// [`Admin::import`](crate::Admin::import), calling `progress` as it goes: stage `"validate"` (lines read;
    /// nothing is written yet) then `"apply"` (records written out of the total). See
    /// [`Progress`].
    ///
    /// `progress` runs on the calling thread, never while the engine holds a lock, so it may
    /// call back into the engine; it should still be quick: the import waits for it.
    pub fn import_with_progress(
        &self,
        reader: &mut dyn BufRead,
        progress: &dyn Fn(Progress),
    ) -> Result<ImportStats> {
        let e = &self.scope.engine;
        e.timed("import", || {
            let plan = parse_export(e, reader, progress)?;
            apply(e, plan, progress)
        })
    }
}
