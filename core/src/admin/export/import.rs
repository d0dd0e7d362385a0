//! Import: read, parse and validate the whole input into a plan (naming the line of any error), then apply it in one pass, so a bad file leaves the store unchanged.

#[allow(unused_imports)]
use super::*;

/// One knowledge entry to import: context, key, record, history.
pub(super) type KnowledgeImport = (String, String, KnowledgeRecord, Vec<(u64, HistoryRecord)>);

/// One run to import: id, header, trace entries by sequence.
pub(super) type RunImport = (String, Value, Vec<(u64, Value)>);

/// A knowledge-graph entity being assembled: entityType, observations, (relationType, to).
pub(super) type KgSlot = (Option<String>, Vec<String>, Vec<(String, String)>);

/// Everything an import will write, validated.
#[derive(Default)]
pub(super) struct Plan {
    contexts: Vec<String>,
    retention: Vec<(String, crate::layers::episodic::retention::Retention)>,
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
pub(super) fn check_embedding(
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

pub(super) fn line_err(n: usize, reason: impl std::fmt::Display) -> Error {
    Error::invalid(format!("line {n}"), reason.to_string())
}

/// Read the next line (without its newline); `None` at end of input.
pub(super) fn next_line(r: &mut dyn BufRead, buf: &mut String, n: usize) -> Result<Option<()>> {
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
pub(super) fn split_type(n: usize, text: &str) -> Result<(String, Value)> {
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

pub(super) fn fields<T: DeserializeOwned>(n: usize, ty: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| line_err(n, format!("{ty} record: {e}")))
}

/// Run a validator and re-label its error with the line.
pub(super) fn check(n: usize, ty: &str, r: Result<()>) -> Result<()> {
    r.map_err(|e| line_err(n, format!("{ty} record: {e}")))
}

pub(super) fn read_header(r: &mut dyn BufRead, buf: &mut String) -> Result<()> {
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
pub(super) const LINES_PER_REPORT: u64 = PROGRESS_EVERY * 16;

pub(super) fn parse_export(
    e: &Engine,
    r: &mut dyn BufRead,
    progress: &dyn Fn(Progress),
) -> Result<Plan> {
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
pub(super) struct Line<'a> {
    e: &'a Engine,
    n: usize,
    ty: &'a str,
}

impl Line<'_> {
    /// The record's fields (everything but `type`).
    pub(super) fn fields<T: DeserializeOwned>(&self, v: Value) -> Result<T> {
        fields(self.n, self.ty, v)
    }

    /// Run a validator and re-label its error with the line and record type.
    pub(super) fn check(&self, r: Result<()>) -> Result<()> {
        check(self.n, self.ty, r)
    }

    /// Check the record's `context` field.
    pub(super) fn context(&self, c: &str) -> Result<()> {
        self.check(input::context_name("context", c))
    }

    /// An error about this line.
    pub(super) fn err(&self, reason: impl std::fmt::Display) -> Error {
        line_err(self.n, reason)
    }
}

/// Parses and validates the fields of one record into the plan.
pub(super) type RecordParser = fn(&Line<'_>, Value, &mut Plan) -> Result<()>;

/// Every record type the format has after the header, with its parser.
pub(super) const RECORD_PARSERS: &[(&str, RecordParser)] = &[
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
pub(super) fn record_parser(ty: &str) -> Option<RecordParser> {
    RECORD_PARSERS
        .iter()
        .find(|(name, _)| *name == ty)
        .map(|&(_, parse)| parse)
}

/// A `context` line: a context name.
pub(super) fn parse_context(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
    let l: ContextLine = x.fields(v)?;
    x.check(input::context_name("name", &l.name))?;
    if let Some(p) = l.retention.filter(|p| !p.is_unlimited()) {
        x.check(p.validate())?;
        plan.retention.push((l.name.clone(), p));
    }
    plan.contexts.push(l.name);
    Ok(())
}

/// A `short_term` line: one short-term entry.
pub(super) fn parse_short_term(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
pub(super) fn parse_working(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
pub(super) fn parse_episode(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
        on_duplicate: None,
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
            seen_count: l.seen_count.unwrap_or(1).max(1),
            last_seen: l.last_seen.map(ms),
            duplicate_of: l.duplicate_of,
            recorded_at: l.recorded_at.map(ms).filter(|r| *r != ms(l.timestamp)),
        },
    ));
    Ok(())
}

/// A `knowledge` line: one semantic entry with its history.
pub(super) fn parse_knowledge(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
                valid_from: h.valid_from.map(ms),
                valid_until: h.valid_until.map(ms),
            },
        ));
    }
    // Format 1 (no validity): each version but the last held until the next
    // one's start; stated explicitly, as a format 2 file does.
    semantic::close_history(&mut history);
    let valid_from = l.valid_from.map(ms).filter(|f| *f != ms(l.updated_at));
    let valid_until = l.valid_until.map(ms);
    if let Some(u) = valid_until
        && u <= valid_from.unwrap_or(ms(l.updated_at))
    {
        return Err(x.err("knowledge record: `valid_until` must be after `valid_from`"));
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
            duplicate_of: l.duplicate_of,
            valid_from,
            valid_until,
        },
        history,
    ));
    Ok(())
}

/// A `procedure` line: a stored procedure record (its steps are re-validated).
pub(super) fn parse_procedure(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
pub(super) fn parse_run(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
pub(super) fn parse_session(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
pub(super) fn parse_task(x: &Line<'_>, v: Value, plan: &mut Plan) -> Result<()> {
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
pub(super) struct Applied<'a> {
    progress: &'a dyn Fn(Progress),
    total: u64,
    done: u64,
    reported: u64,
}

impl Applied<'_> {
    pub(super) fn add(&mut self, n: u64, what: &str, end_of_type: bool) {
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

pub(super) fn apply(e: &Engine, plan: Plan, progress: &dyn Fn(Progress)) -> Result<ImportStats> {
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
    // Policies are stored, not enforced: the next write or optimize does that.
    for (c, p) in &plan.retention {
        crate::layers::episodic::retention::store_policy(e, c, *p)?;
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
        e.short_term_cache().invalidate(&codec::ctx_key(ctx, key));
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
    // Episodes written outside the write path: the next write recounts.
    crate::layers::episodic::retention::reset_estimates(e);
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
