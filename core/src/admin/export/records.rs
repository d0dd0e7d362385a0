//! The line records of the export format (field names are the documented format, `docs/export-format.md`).

#[allow(unused_imports)]
use super::*;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Header {
    pub(super) format_version: u32,
    pub(super) exported_at: DateTime<Utc>,
    pub(super) engine_version: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ContextLine {
    pub(super) name: String,
    /// The context's retention policy (absent: none; optional in every format version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) retention: Option<crate::layers::episodic::retention::Retention>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ShortTermLine {
    pub(super) context: String,
    pub(super) key: String,
    pub(super) value: Value,
    pub(super) stored_at: DateTime<Utc>,
    #[serde(default)]
    pub(super) expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkspaceLine {
    pub(super) id: String,
    pub(super) value: Value,
    pub(super) added_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkingLine {
    pub(super) context: String,
    pub(super) focus: Vec<String>,
    pub(super) workspace: Vec<WorkspaceLine>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EpisodeLine {
    pub(super) context: String,
    pub(super) id: String,
    pub(super) timestamp: DateTime<Utc>,
    pub(super) summary: String,
    #[serde(default)]
    pub(super) content: Value,
    #[serde(default)]
    pub(super) participants: Vec<String>,
    #[serde(default)]
    pub(super) tags: Vec<String>,
    pub(super) importance: u8,
    /// The host's embedding (absent in files written before embeddings existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) embedding: Option<Vec<f32>>,
    /// Times recorded, with merged duplicates (written only above 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) seen_count: Option<u32>,
    /// When a duplicate was last merged into it (written only when one was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) last_seen: Option<DateTime<Utc>>,
    /// The episode it duplicates (`link` policy; written only when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) duplicate_of: Option<String>,
    /// When it was recorded (format 2; written only when it differs from
    /// `timestamp`, which it defaults to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) recorded_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryLine {
    pub(super) version: u64,
    pub(super) knowledge: Value,
    pub(super) recorded_at: DateTime<Utc>,
    /// When the version starts to hold (format 2; written only when it differs
    /// from `recorded_at`, which it defaults to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) valid_from: Option<DateTime<Utc>>,
    /// When it stops holding (format 2; absent: open, or in format 1 files the
    /// next version's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) valid_until: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KnowledgeLine {
    pub(super) context: String,
    pub(super) key: String,
    pub(super) knowledge: Value,
    pub(super) version: u64,
    pub(super) created_at: DateTime<Utc>,
    pub(super) updated_at: DateTime<Utc>,
    #[serde(default)]
    pub(super) history: Vec<HistoryLine>,
    /// The host's embedding (absent in files written before embeddings existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) embedding: Option<Vec<f32>>,
    /// The entry it duplicates (`link` policy; written only when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) duplicate_of: Option<String>,
    /// When the current version starts to hold (format 2; written only when it
    /// differs from `updated_at`, which it defaults to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) valid_from: Option<DateTime<Utc>>,
    /// When it stops holding (format 2; absent: open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) valid_until: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProcedureLine {
    pub(super) context: String,
    pub(super) name: String,
    /// The procedure module's stored record, as JSON.
    pub(super) record: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TraceLine {
    pub(super) seq: u64,
    pub(super) entry: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunLine {
    pub(super) run_id: String,
    /// The procedure module's stored run header, as JSON.
    pub(super) record: Value,
    #[serde(default)]
    pub(super) trace: Vec<TraceLine>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionVersionLine {
    pub(super) version: u64,
    pub(super) saved_at: DateTime<Utc>,
    pub(super) compression_level: u8,
    pub(super) content: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionLine {
    pub(super) session_id: String,
    pub(super) name: String,
    pub(super) metadata: Value,
    pub(super) created_at: DateTime<Utc>,
    pub(super) updated_at: DateTime<Utc>,
    pub(super) last_version: u64,
    pub(super) versions: Vec<SessionVersionLine>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskLine {
    pub(super) task_id: String,
    pub(super) llm_name: String,
    pub(super) task_description: String,
    /// The Memstrata context, as on every other line (`Task::namespace`).
    pub(super) context: String,
    /// Free text given at punch-in (`Task::context`); written only when there is some,
    /// absent from exports made before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) context_text: Option<String>,
    pub(super) start_time: DateTime<Utc>,
    #[serde(default)]
    pub(super) end_time: Option<DateTime<Utc>>,
    #[serde(default)]
    pub(super) summary: Option<String>,
    #[serde(default)]
    pub(super) duration_seconds: Option<f64>,
    #[serde(default)]
    pub(super) files_modified: u64,
    #[serde(default)]
    pub(super) files: Vec<String>,
    #[serde(default)]
    pub(super) episode_id: Option<String>,
}
