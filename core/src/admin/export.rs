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

use crate::admin::Admin;
use crate::admin::optimize::{PROGRESS_EVERY, Progress, no_progress};
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
use crate::util::clock::millis_to_dt;
use crate::{Error, Result, storage::codec, util::input};

/// Version of the export format this build writes and the newest it reads.
pub const EXPORT_FORMAT_VERSION: u32 = 1;

/// The `type` of the header line.
const HEADER_TYPE: &str = "memstrata_export";

/// Record counts of an export.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExportStats {
    /// Lines written after the header.
    pub records: u64,
    /// Lines per record `type`.
    pub counts: BTreeMap<String, u64>,
}

/// Record counts of an import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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

// ---------------------------------------------------------------------------
// Line records (field names are the documented format)

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format_version: u32,
    exported_at: DateTime<Utc>,
    engine_version: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextLine {
    name: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShortTermLine {
    context: String,
    key: String,
    value: Value,
    stored_at: DateTime<Utc>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceLine {
    id: String,
    value: Value,
    added_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkingLine {
    context: String,
    focus: Vec<String>,
    workspace: Vec<WorkspaceLine>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EpisodeLine {
    context: String,
    id: String,
    timestamp: DateTime<Utc>,
    summary: String,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    participants: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
    importance: u8,
    /// The host's embedding (absent in files written before embeddings existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    embedding: Option<Vec<f32>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryLine {
    version: u64,
    knowledge: Value,
    recorded_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KnowledgeLine {
    context: String,
    key: String,
    knowledge: Value,
    version: u64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    #[serde(default)]
    history: Vec<HistoryLine>,
    /// The host's embedding (absent in files written before embeddings existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    embedding: Option<Vec<f32>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcedureLine {
    context: String,
    name: String,
    /// The procedure module's stored record, as JSON.
    record: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceLine {
    seq: u64,
    entry: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunLine {
    run_id: String,
    /// The procedure module's stored run header, as JSON.
    record: Value,
    #[serde(default)]
    trace: Vec<TraceLine>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionVersionLine {
    version: u64,
    saved_at: DateTime<Utc>,
    compression_level: u8,
    content: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionLine {
    session_id: String,
    name: String,
    metadata: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    last_version: u64,
    versions: Vec<SessionVersionLine>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskLine {
    task_id: String,
    llm_name: String,
    task_description: String,
    /// The Memstrata context, as on every other line (`Task::namespace`).
    context: String,
    /// Free text given at punch-in (`Task::context`); written only when there is some,
    /// absent from exports made before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context_text: Option<String>,
    start_time: DateTime<Utc>,
    #[serde(default)]
    end_time: Option<DateTime<Utc>>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    duration_seconds: Option<f64>,
    #[serde(default)]
    files_modified: u64,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    episode_id: Option<String>,
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
        write_line(w, "context", &ContextLine { name })?;
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
        let (context, _) = codec::split_ctx_key(&k)?;
        let r: EpisodeRecord = e.codec.decode(&v)?;
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
        };
        write_line(w, "episode", &line)?;
        stats.add("episode");
    }

    for item in e.t.semantic.iter() {
        let (k, v) = item?;
        let (context, key) = codec::split_ctx_key(&k)?;
        let r: KnowledgeRecord = e.codec.decode(&v)?;
        let history = semantic::history_in(e, &context, &key)?
            .into_iter()
            .map(|(version, h)| HistoryLine {
                version,
                knowledge: h.value,
                recorded_at: millis_to_dt(h.recorded_at),
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

// ---------------------------------------------------------------------------
// Import: parse and validate everything, then apply

/// One knowledge entry to import: context, key, record, history.
type KnowledgeImport = (String, String, KnowledgeRecord, Vec<(u64, HistoryRecord)>);
/// One run to import: id, header, trace entries by sequence.
type RunImport = (String, Value, Vec<(u64, Value)>);
/// A knowledge-graph entity being assembled: entityType, observations, (relationType, to).
type KgSlot = (Option<String>, Vec<String>, Vec<(String, String)>);

/// Everything an import will write, validated.
#[derive(Default)]
struct Plan {
    contexts: Vec<String>,
    short_term: Vec<(String, String, StRecord)>,
    working: Vec<(String, WorkingState)>,
    episodes: Vec<(String, EpisodeRecord)>,
    knowledge: Vec<KnowledgeImport>,
    procedures: Vec<(String, String, Value)>,
    runs: Vec<RunImport>,
    sessions: Vec<(String, SessionRecord, Vec<ImportedVersion>)>,
    tasks: Vec<TaskRecord>,
    /// Embedding dimension per context (the store's, or the file's first).
    dims: HashMap<String, usize>,
}

/// Check an imported embedding and its context's dimension (fixed by the store or the file).
fn check_embedding(
    x: &Line<'_>,
    plan: &mut Plan,
    ctx: &str,
    v: &Option<Vec<f32>>,
) -> Result<Option<VecBytes>> {
    let Some(v) = v else { return Ok(None) };
    x.check(embedder::check("embedding", v))?;
    let fixed = match plan.dims.get(ctx) {
        Some(d) => Some(*d),
        None => vectors::dim_of(x.e, ctx)?,
    };
    match fixed {
        Some(d) if d != v.len() => {
            x.check(Err(vectors::mismatch("embedding", ctx, v.len(), d)))?;
        }
        _ => {
            plan.dims.insert(ctx.to_owned(), v.len());
        }
    }
    Ok(Some(VecBytes::from_f32(v)))
}

fn line_err(n: usize, reason: impl std::fmt::Display) -> Error {
    Error::invalid(format!("line {n}"), reason.to_string())
}

/// Read the next line (without its newline); `None` at end of input.
fn next_line(r: &mut dyn BufRead, buf: &mut String, n: usize) -> Result<Option<()>> {
    buf.clear();
    match r.read_line(buf) {
        Ok(0) => Ok(None),
        Ok(_) => {
            while buf.ends_with('\n') || buf.ends_with('\r') {
                buf.pop();
            }
            Ok(Some(()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(line_err(n, "not valid UTF-8"))
        }
        Err(e) => Err(Error::Io(e)),
    }
}

/// Parse one line into (type, remaining object).
fn split_type(n: usize, text: &str) -> Result<(String, Value)> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| line_err(n, format!("not valid JSON: {e}")))?;
    let Value::Object(mut m) = v else {
        return Err(line_err(n, "expected a JSON object"));
    };
    let ty = match m.remove("type") {
        Some(Value::String(t)) => t,
        Some(_) => return Err(line_err(n, "`type` must be a string")),
        None => return Err(line_err(n, "missing `type`")),
    };
    Ok((ty, Value::Object(m)))
}

fn fields<T: DeserializeOwned>(n: usize, ty: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| line_err(n, format!("{ty} record: {e}")))
}

/// Run a validator and re-label its error with the line.
fn check(n: usize, ty: &str, r: Result<()>) -> Result<()> {
    r.map_err(|e| line_err(n, format!("{ty} record: {e}")))
}

fn read_header(r: &mut dyn BufRead, buf: &mut String) -> Result<()> {
    if next_line(r, buf, 1)?.is_none() || buf.trim().is_empty() {
        return Err(line_err(
            1,
            "empty input: expected the memstrata_export header line",
        ));
    }
    let (ty, rest) = split_type(1, buf)?;
    if ty != HEADER_TYPE {
        return Err(line_err(
            1,
            format!("expected the header (type {HEADER_TYPE:?}), found type {ty:?}"),
        ));
    }
    let version = rest.get("format_version").and_then(Value::as_u64);
    match version {
        Some(v) if v > u64::from(EXPORT_FORMAT_VERSION) => {
            return Err(Error::invalid(
                "format_version",
                format!(
                    "line 1: export format version {v} is newer than this build reads ({EXPORT_FORMAT_VERSION}); upgrade memstrata"
                ),
            ));
        }
        Some(0) | None => {
            return Err(line_err(1, "`format_version` must be a positive integer"));
        }
        Some(_) => {}
    }
    let _: Header = fields(1, HEADER_TYPE, rest)?;
    Ok(())
}

/// Lines read between two `validate` progress reports.
const LINES_PER_REPORT: u64 = PROGRESS_EVERY * 16;

fn parse_export(e: &Engine, r: &mut dyn BufRead, progress: &dyn Fn(Progress)) -> Result<Plan> {
    let mut plan = Plan::default();
    let mut buf = String::new();
    progress(Progress::new(
        "validate",
        0,
        None,
        "reading and validating the export",
    ));
    read_header(r, &mut buf)?;
    let mut n = 1usize;
    loop {
        n += 1;
        if (n as u64 - 1).is_multiple_of(LINES_PER_REPORT) {
            progress(Progress::new(
                "validate",
                n as u64 - 1,
                None,
                format!("{} lines read", n - 1),
            ));
        }
        if next_line(r, &mut buf, n)?.is_none() {
            break;
        }
        if buf.trim().is_empty() {
            continue;
        }
        let (ty, v) = split_type(n, &buf)?;
        if ty == HEADER_TYPE {
            return Err(line_err(n, "a second header line"));
        }
        let Some(parse) = record_parser(&ty) else {
            return Err(line_err(n, format!("unknown record type {ty:?}")));
        };
        parse(&Line { e, n, ty: &ty }, v, &mut plan)?;
    }
    let lines = n as u64 - 1;
    progress(Progress::new(
        "validate",
        lines,
        Some(lines),
        format!("{lines} lines valid"),
    ));
    Ok(plan)
}

/// One line being parsed: the engine (for its limits), the line number and the record type.
struct Line<'a> {
    e: &'a Engine,
    n: usize,
    ty: &'a str,
}

impl Line<'_> {
    /// The record's fields (everything but `type`).
    fn fields<T: DeserializeOwned>(&self, v: Value) -> Result<T> {
        fields(self.n, self.ty, v)
    }

    /// Run a validator and re-label its error with the line and record type.
    fn check(&self, r: Result<()>) -> Result<()> {
        check(self.n, self.ty, r)
    }

    /// Check the record's `context` field.
    fn context(&self, c: &str) -> Result<()> {
        self.check(input::context_name("context", c))
    }

    /// An error about this line.
    fn err(&self, reason: impl std::fmt::Display) -> Error {
        line_err(self.n, reason)
    }
}

/// Parses and validates the fields of one record into the plan.
type RecordParser = fn(&Line<'_>, Value, &mut Plan) -> Result<()>;

/// Every record type the format has after the header, with its parser.
const RECORD_PARSERS: &[(&str, RecordParser)] = &[
    ("context", parse_context),
    ("short_term", parse_short_term),
    ("working", parse_working),
    ("episode", parse_episode),
    ("knowledge", parse_knowledge),
    ("procedure", parse_procedure),
    ("run", parse_run),
    ("session", parse_session),
    ("task", parse_task),
];

/// The parser of record type `ty`, if the format has that type.
fn record_parser(ty: &str) -> Option<RecordParser> {
    RECORD_PARSERS
        .iter()
        .find(|(name, _)| *name == ty)
        .map(|&(_, parse)| parse)
}

/// A `context` line: a context name.
fn parse_context(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let l: ContextLine = x.fields(v)?;
    x.check(input::context_name("name", &l.name))?;
    plan.contexts.push(l.name);
    Ok(())
}

/// A `short_term` line: one short-term entry.
fn parse_short_term(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: ShortTermLine = x.fields(v)?;
    x.context(&l.context)?;
    x.check(input::key(lim, "key", &l.key))?;
    x.check(input::value(lim, "value", &l.value))?;
    plan.short_term.push((
        l.context,
        l.key,
        StRecord {
            value: l.value,
            stored_at: ms(l.stored_at),
            expires_at: l.expires_at.map(ms),
        },
    ));
    Ok(())
}

/// A `working` line: the focus list and workspace of one context.
fn parse_working(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: WorkingLine = x.fields(v)?;
    x.context(&l.context)?;
    for (i, f) in l.focus.iter().enumerate() {
        x.check(input::key(lim, &format!("focus[{i}]"), f))?;
    }
    let mut workspace = Vec::with_capacity(l.workspace.len());
    for (i, item) in l.workspace.into_iter().enumerate() {
        x.check(input::key(lim, &format!("workspace[{i}].id"), &item.id))?;
        x.check(input::value(
            lim,
            &format!("workspace[{i}].value"),
            &item.value,
        ))?;
        workspace.push(WsRecord {
            id: item.id,
            value: item.value,
            added_at: ms(item.added_at),
        });
    }
    plan.working.push((
        l.context,
        WorkingState {
            focus: l.focus,
            workspace,
        },
    ));
    Ok(())
}

/// An `episode` line: one episode.
fn parse_episode(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: EpisodeLine = x.fields(v)?;
    x.context(&l.context)?;
    x.check(input::key(lim, "id", &l.id))?;
    let ep = NewEpisode {
        summary: l.summary,
        content: l.content,
        participants: l.participants,
        tags: l.tags,
        importance: Some(l.importance),
        timestamp: Some(l.timestamp),
        embedding: None,
    };
    x.check(episodic::validate_new(x.e, &ep).map(|_| ()))?;
    let embedding = check_embedding(x, plan, &l.context, &l.embedding)?;
    plan.episodes.push((
        l.context,
        EpisodeRecord {
            id: l.id,
            timestamp: ms(l.timestamp),
            summary: ep.summary,
            content: ep.content,
            participants: ep.participants,
            tags: ep.tags,
            importance: l.importance,
            embedding,
        },
    ));
    Ok(())
}

/// A `knowledge` line: one semantic entry with its history.
fn parse_knowledge(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: KnowledgeLine = x.fields(v)?;
    x.context(&l.context)?;
    x.check(input::key(lim, "key", &l.key))?;
    x.check(input::value(lim, "knowledge", &l.knowledge))?;
    if l.version == 0 {
        return Err(x.err("knowledge record: `version` must be at least 1"));
    }
    let mut history = Vec::with_capacity(l.history.len());
    let mut last = 0u64;
    for (i, h) in l.history.into_iter().enumerate() {
        if h.version <= last || h.version > l.version {
            return Err(x.err(format!(
                "knowledge record: history[{i}].version must ascend and not exceed `version` ({})",
                l.version
            )));
        }
        last = h.version;
        x.check(input::value(
            lim,
            &format!("history[{i}].knowledge"),
            &h.knowledge,
        ))?;
        history.push((
            h.version,
            HistoryRecord {
                value: h.knowledge,
                recorded_at: ms(h.recorded_at),
            },
        ));
    }
    let embedding = check_embedding(x, plan, &l.context, &l.embedding)?;
    plan.knowledge.push((
        l.context,
        l.key,
        KnowledgeRecord {
            value: l.knowledge,
            version: l.version,
            created_at: ms(l.created_at),
            updated_at: ms(l.updated_at),
            embedding,
        },
        history,
    ));
    Ok(())
}

/// A `procedure` line: a stored procedure record (its steps are re-validated).
fn parse_procedure(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: ProcedureLine = x.fields(v)?;
    x.context(&l.context)?;
    x.check(input::key(lim, "name", &l.name))?;
    let steps = l
        .record
        .get("steps")
        .cloned()
        .ok_or_else(|| x.err("procedure record: `record.steps` is missing"))?;
    x.check(crate::layers::procedural::steps_from_json(steps).map(|_| ()))?;
    plan.procedures.push((l.context, l.name, l.record));
    Ok(())
}

/// A `run` line: a run header and its trace entries.
fn parse_run(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: RunLine = x.fields(v)?;
    x.check(input::key(lim, "run_id", &l.run_id))?;
    if l.record.get("run_id").and_then(Value::as_str) != Some(l.run_id.as_str()) {
        return Err(x.err("run record: `record.run_id` must equal `run_id`"));
    }
    let mut trace = Vec::with_capacity(l.trace.len());
    for (i, t) in l.trace.into_iter().enumerate() {
        if !t.entry.is_object() {
            return Err(x.err(format!("run record: trace[{i}].entry must be an object")));
        }
        trace.push((t.seq, t.entry));
    }
    plan.runs.push((l.run_id, l.record, trace));
    Ok(())
}

/// A `session` line: a session with every version, decoded.
fn parse_session(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: SessionLine = x.fields(v)?;
    x.check(input::key(lim, "session_id", &l.session_id))?;
    x.check(input::key(lim, "name", &l.name))?;
    x.check(input::value(lim, "metadata", &l.metadata))?;
    let mut versions = Vec::with_capacity(l.versions.len());
    let mut last = 0u64;
    for (i, sv) in l.versions.into_iter().enumerate() {
        if sv.version <= last || sv.version > l.last_version {
            return Err(x.err(format!(
                    "session record: versions[{i}].version must ascend and not exceed `last_version` ({})",
                    l.last_version
                ),
            ));
        }
        if sv.compression_level > sessions::MAX_COMPRESSION_LEVEL {
            return Err(x.err(format!(
                "session record: versions[{i}].compression_level must be in 0..=3, got {}",
                sv.compression_level
            )));
        }
        last = sv.version;
        x.check(input::value(
            lim,
            &format!("versions[{i}].content"),
            &sv.content,
        ))?;
        versions.push(ImportedVersion {
            version: sv.version,
            saved_at: ms(sv.saved_at),
            level: sv.compression_level,
            content: sv.content,
        });
    }
    plan.sessions.push((
        l.session_id,
        SessionRecord {
            name: l.name,
            metadata: l.metadata,
            created_at: ms(l.created_at),
            updated_at: ms(l.updated_at),
            last_version: l.last_version,
        },
        versions,
    ));
    Ok(())
}

/// A `task` line: one timesheet task.
fn parse_task(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let lim = &x.e.opts.limits;
    let l: TaskLine = x.fields(v)?;
    x.check(input::key(lim, "task_id", &l.task_id))?;
    x.check(input::key(lim, "llm_name", &l.llm_name))?;
    x.context(&l.context)?;
    if let Some(t) = &l.context_text
        && t.len() > lim.max_value_bytes
    {
        return Err(x.err(format!(
            "task record: `context_text` is {} bytes, more than the {} allowed",
            t.len(),
            lim.max_value_bytes
        )));
    }
    if l.end_time.is_some_and(|t| t < l.start_time) {
        return Err(x.err("task record: `end_time` is before `start_time`"));
    }
    if l.end_time.is_some() != l.duration_seconds.is_some() {
        return Err(x.err("task record: `end_time` and `duration_seconds` go together"));
    }
    plan.tasks.push(TaskRecord {
        task_id: l.task_id,
        llm_name: l.llm_name,
        description: l.task_description,
        context: l.context,
        context_text: l.context_text,
        start_time: ms(l.start_time),
        end_time: l.end_time.map(ms),
        summary: l.summary,
        duration_seconds: l.duration_seconds,
        files_modified: l.files_modified,
        files: l.files,
        episode_id: l.episode_id,
    });
    Ok(())
}

/// Counts records written during `apply` and reports every [`PROGRESS_EVERY`] of them and
/// at each record type's end. Never called with a lock held.
struct Applied<'a> {
    progress: &'a dyn Fn(Progress),
    total: u64,
    done: u64,
    reported: u64,
}

impl Applied<'_> {
    fn add(&mut self, n: u64, what: &str, end_of_type: bool) {
        self.done += n;
        if self.done > self.reported && (end_of_type || self.done - self.reported >= PROGRESS_EVERY)
        {
            self.reported = self.done;
            (self.progress)(Progress::new(
                "apply",
                self.done,
                Some(self.total),
                format!("{}/{} records written ({what})", self.done, self.total),
            ));
        }
    }
}

fn apply(e: &Engine, plan: Plan, progress: &dyn Fn(Progress)) -> Result<ImportStats> {
    let total = [
        plan.contexts.len(),
        plan.short_term.len(),
        plan.working.len(),
        plan.episodes.len(),
        plan.knowledge.len(),
        plan.procedures.len(),
        plan.runs.len(),
        plan.sessions.len(),
        plan.tasks.len(),
    ]
    .iter()
    .sum::<usize>() as u64;
    progress(Progress::new(
        "apply",
        0,
        Some(total),
        format!("writing {total} records"),
    ));
    let mut ap = Applied {
        progress,
        total,
        done: 0,
        reported: 0,
    };
    let mut stats = ImportStats::default();
    for c in &plan.contexts {
        e.touch_context(c)?;
    }
    stats.add("context", plan.contexts.len() as u64);
    ap.add(plan.contexts.len() as u64, "context", true);

    let mut batch = crate::storage::Batch::default();
    for (ctx, key, rec) in &plan.short_term {
        e.touch_context(ctx)?;
        batch.insert(codec::ctx_key(ctx, key), e.codec.encode(rec)?);
    }
    let written = e.t.short_term.apply_batch(batch);
    // After the store write (see `decoded_cache`), whatever its outcome.
    for (ctx, key, _) in &plan.short_term {
        e.short_term_cache.invalidate(&codec::ctx_key(ctx, key));
    }
    written?;
    stats.add("short_term", plan.short_term.len() as u64);
    ap.add(plan.short_term.len() as u64, "short_term", true);

    {
        let _g = e.rmw_lock()?;
        for (ctx, st) in &plan.working {
            e.touch_context(ctx)?;
            // Key layout of the working tree: `ctx 0x00 "state"` (docs/format.md).
            e.t.working
                .insert(codec::ctx_key(ctx, "state"), e.codec.encode(st)?)?;
        }
    }
    stats.add("working", plan.working.len() as u64);
    ap.add(plan.working.len() as u64, "working", true);

    // `insert_records_in` writes 256 episodes per batch; report between its calls.
    for chunk in plan.episodes.chunks(256) {
        episodic::insert_records_in(e, chunk)?;
        ap.add(chunk.len() as u64, "episode", false);
    }
    stats.add("episode", plan.episodes.len() as u64);
    ap.add(0, "episode", true);

    for (ctx, key, rec, history) in &plan.knowledge {
        semantic::insert_record_in(e, ctx, key, rec, history)?;
        ap.add(1, "knowledge", false);
    }
    stats.add("knowledge", plan.knowledge.len() as u64);
    ap.add(0, "knowledge", true);

    let mut batch = crate::storage::Batch::default();
    for (ctx, name, record) in &plan.procedures {
        e.touch_context(ctx)?;
        batch.insert(codec::ctx_key(ctx, name), e.codec.encode(record)?);
    }
    e.t.procedures.apply_batch(batch)?;
    stats.add("procedure", plan.procedures.len() as u64);
    ap.add(plan.procedures.len() as u64, "procedure", true);

    for (run_id, record, trace) in &plan.runs {
        let mut prefix = run_id.as_bytes().to_vec();
        prefix.push(0);
        let mut batch = crate::storage::Batch::default();
        for k in e.t.runs.scan_prefix(&prefix).keys() {
            batch.remove(k?);
        }
        for (seq, entry) in trace {
            let mut k = prefix.clone();
            k.extend_from_slice(&seq.to_be_bytes());
            batch.insert(k, e.codec.encode(entry)?);
        }
        batch.insert(run_id.as_bytes(), e.codec.encode(record)?);
        e.t.runs.apply_batch(batch)?;
        ap.add(1, "run", false);
    }
    stats.add("run", plan.runs.len() as u64);
    ap.add(0, "run", true);

    for (sid, rec, versions) in &plan.sessions {
        sessions::import_session(e, sid, rec, versions)?;
        ap.add(1, "session", false);
    }
    stats.add("session", plan.sessions.len() as u64);
    ap.add(0, "session", true);

    for t in &plan.tasks {
        timesheet::put_task(e, t)?;
        ap.add(1, "task", false);
    }
    stats.add("task", plan.tasks.len() as u64);
    ap.add(0, "task", true);

    e.flush()?;
    Ok(stats)
}

// ---------------------------------------------------------------------------
// MCP reference memory server knowledge graph

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KgEntity {
    name: String,
    #[serde(default)]
    entity_type: Option<String>,
    #[serde(default)]
    observations: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KgRelation {
    from: String,
    to: String,
    relation_type: String,
}

/// Semantic key of a knowledge-graph entity.
pub const ENTITY_KEY_PREFIX: &str = "entity:";

fn entity_value(
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

fn relations_of(v: &Value) -> Vec<(String, String)> {
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

    /// [`Memory::import`](crate::Memory::import), calling `progress` as it goes: stage `"validate"` (lines read;
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
