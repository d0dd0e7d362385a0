//! MCP prompts: `resume_session`, `recall`, `handoff` (blocking; called on a worker thread).

use std::fmt::Write as _;

use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{Map, Value};

use memstrata::{Memory, SearchFilters};

use crate::error::{ToolError, ToolResult};
use crate::security::auth::{Access, Target};

/// Largest JSON text embedded in a prompt; longer values are cut with a pointer to the tool.
const MAX_JSON_CHARS: usize = 64 * 1024;
/// Episodes / knowledge hits a prompt lists.
const LIST: usize = 10;

/// The prompt list.
pub fn list() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "resume_session",
            Some(
                "Load a saved session (latest or a given version) so the model can continue where it stopped",
            ),
            Some(vec![
                PromptArgument::new("session_id")
                    .with_description("Session id from session_create")
                    .with_required(true),
                PromptArgument::new("version")
                    .with_description("Version number to restore (default: latest)")
                    .with_required(false),
            ]),
        ),
        Prompt::new(
            "recall",
            Some(
                "Gather what memory holds about a topic: matching episodes and knowledge of the active context",
            ),
            Some(vec![
                PromptArgument::new("query")
                    .with_description("Topic or question, in plain words")
                    .with_required(true),
                PromptArgument::new("limit")
                    .with_description("Hits per layer, 1..=50 (default 10)")
                    .with_required(false),
            ]),
        ),
        Prompt::new(
            "handoff",
            Some(
                "A summary for handing the current work to another model: focus, workspace, recent episodes, open tasks, sessions",
            ),
            Some(vec![
                PromptArgument::new("to")
                    .with_description("Who takes over (e.g. another model's name)")
                    .with_required(false),
                PromptArgument::new("note")
                    .with_description("Anything the next model must know that memory does not hold")
                    .with_required(false),
            ]),
        ),
    ]
}

/// What a prompt needs to read, for authorization.
pub fn targets(name: &str, active: &str) -> Vec<Target> {
    match name {
        "resume_session" => vec![Target::Global(Access::Read)],
        "handoff" => vec![
            Target::Context(active.to_owned(), Access::Read),
            Target::Global(Access::Read),
        ],
        _ => vec![Target::Context(active.to_owned(), Access::Read)],
    }
}

fn arg(args: &Map<String, Value>, name: &str) -> Option<String> {
    match args.get(name)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn required(args: &Map<String, Value>, name: &str) -> ToolResult<String> {
    arg(args, name).ok_or_else(|| ToolError::invalid(name, "this prompt argument is required"))
}

fn json_block(v: &Value, tool_hint: &str) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    if text.chars().count() <= MAX_JSON_CHARS {
        format!("```json\n{text}\n```")
    } else {
        let cut: String = text.chars().take(MAX_JSON_CHARS).collect();
        format!(
            "```json\n{cut}\n```\n(truncated at {MAX_JSON_CHARS} characters; call {tool_hint} for the whole value)"
        )
    }
}

/// Build a prompt. `Err(InvalidInput)` for bad arguments, `Ok(None)` for an unknown prompt.
pub fn get(
    mem: &Memory,
    name: &str,
    args: &Map<String, Value>,
) -> ToolResult<Option<GetPromptResult>> {
    Ok(Some(match name {
        "resume_session" => resume_session(mem, args)?,
        "recall" => recall(mem, args)?,
        "handoff" => handoff(mem, args)?,
        _ => return Ok(None),
    }))
}

fn resume_session(mem: &Memory, args: &Map<String, Value>) -> ToolResult<GetPromptResult> {
    let id = required(args, "session_id")?;
    let version = match arg(args, "version") {
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            ToolError::invalid("version", format!("expected a version number, got {v:?}"))
        })?),
        None => None,
    };
    let restored = mem.sessions().restore(&id, version)?;
    let name = mem
        .sessions()
        .list()?
        .into_iter()
        .find(|s| s.session_id == id)
        .map_or_else(String::new, |s| s.name);
    let mut text = format!(
        "Resume the work saved in session {name:?} (id {id}, version {}).\n\nSession metadata:\n{}\n\nSaved state:\n{}\n\n",
        restored.version,
        json_block(&restored.metadata, "session_restore"),
        json_block(&restored.content, "session_restore"),
    );
    text.push_str(
        "Continue from this state. Save progress with session_save (same session_id) so a later model can resume it.",
    );
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).with_description(
            format!("Resume session {name:?} at version {}", restored.version),
        ),
    )
}

fn recall(mem: &Memory, args: &Map<String, Value>) -> ToolResult<GetPromptResult> {
    let query = required(args, "query")?;
    let limit = match arg(args, "limit") {
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=50).contains(l))
            .ok_or_else(|| ToolError::invalid("limit", format!("expected 1..=50, got {l:?}")))?,
        None => LIST,
    };
    let ctx = mem.active_context();
    let episodes = mem
        .episodic()
        .search(&query, &SearchFilters::default(), limit)?;
    let knowledge = mem.semantic().query(&query, limit)?;
    let mut text = format!("What memory (context {ctx:?}) holds about {query:?}:\n\n");
    if episodes.is_empty() && knowledge.is_empty() {
        text.push_str("Nothing matched. Say so rather than guessing.\n");
    }
    if !episodes.is_empty() {
        text.push_str("Episodes, best match first:\n");
        for h in &episodes {
            let e = &h.episode;
            let _ = write!(
                text,
                "- [{}] {} (importance {}",
                e.timestamp.to_rfc3339(),
                e.summary,
                e.importance
            );
            if !e.tags.is_empty() {
                let _ = write!(text, ", tags: {}", e.tags.join(", "));
            }
            let _ = writeln!(text, "; id {})", e.id);
        }
        text.push('\n');
    }
    if !knowledge.is_empty() {
        text.push_str("Knowledge entries, best match first:\n");
        for h in &knowledge {
            let mut v = h.knowledge.to_string();
            if v.chars().count() > 500 {
                v = v.chars().take(500).collect::<String>()
                    + "… (knowledge_retrieve for all of it)";
            }
            let _ = writeln!(text, "- {}: {v}", h.key);
        }
        text.push('\n');
    }
    text.push_str(
        "Use these facts in the answer and cite episode ids or keys when relying on them.",
    );
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("Recall {query:?} from context {ctx:?}")),
    )
}

fn handoff(mem: &Memory, args: &Map<String, Value>) -> ToolResult<GetPromptResult> {
    let ctx = mem.active_context();
    let to = arg(args, "to");
    let note = arg(args, "note");
    let w = mem.working();
    let focus = w.current_focus()?;
    let workspace = w.workspace_items()?;
    let recent = mem.episodic().recent(LIST)?;
    let mut text = match &to {
        Some(to) => {
            format!("Handoff to {to}. You are taking over work in memory context {ctx:?}.\n\n")
        }
        None => format!("Handoff. You are taking over work in memory context {ctx:?}.\n\n"),
    };
    if let Some(n) = note {
        let _ = writeln!(text, "Note from the previous model: {n}\n");
    }
    if focus.is_empty() {
        text.push_str("Nothing is in focus.\n");
    } else {
        let _ = writeln!(text, "In focus (oldest first): {}", focus.join("; "));
    }
    if !workspace.is_empty() {
        text.push_str("\nWorkspace (most recent last):\n");
        for item in workspace.iter().rev().take(LIST).rev() {
            let mut v = item.value.to_string();
            if v.chars().count() > 300 {
                v = v.chars().take(300).collect::<String>() + "…";
            }
            let _ = writeln!(text, "- {v}");
        }
    }
    if !recent.is_empty() {
        let mut ids: Vec<String> = recent.iter().map(|e| e.id.clone()).collect();
        ids.reverse();
        let _ = writeln!(
            text,
            "\nRecent episodes (chronological):\n{}",
            mem.episodic().summarize(&ids)?
        );
    }
    let open = mem.timesheet().tasks(&memstrata::timesheet::TaskFilter {
        namespace: Some(ctx.clone()),
        status: memstrata::timesheet::TaskStatusFilter::Open,
        limit: Some(LIST),
        ..Default::default()
    })?;
    if !open.is_empty() {
        text.push_str("\nOpen timesheet tasks (close them with llm_punch_out when done):\n");
        for t in &open {
            let _ = writeln!(
                text,
                "- {} by {} since {} (task_id {})",
                t.task_description,
                t.llm_name,
                t.start_time.to_rfc3339(),
                t.task_id
            );
        }
    }
    let mut sessions = mem.sessions().list()?;
    sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_at));
    if !sessions.is_empty() {
        text.push_str("\nMost recently saved sessions (resume with the resume_session prompt or session_restore):\n");
        for s in sessions.iter().take(5) {
            let _ = writeln!(
                text,
                "- {:?} id {} latest version {} (updated {})",
                s.name,
                s.session_id,
                s.latest_version
                    .map_or_else(|| "none".to_owned(), |v| v.to_string()),
                s.updated_at.to_rfc3339()
            );
        }
    }
    text.push_str(
        "\nContinue the work. Record what you do with episode_record and keep shared state in sessions or knowledge.",
    );
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("Handoff of context {ctx:?}")),
    )
}
