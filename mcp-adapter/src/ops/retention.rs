//! Retention tools: a context's retention policy (forgetting by utility) and
//! the audit of what it evicted.

use memstrata_bindings_common as common;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Cx, Done, Op, ctx_target};
use crate::error::ToolResult;
use crate::security::auth::{Access, Target};

/// Arguments of `context_set_retention`. With no limit, the context's policy is cleared.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextSetRetention {
    /// Most episodes the context keeps (≥ 1); past it, the lowest-utility episodes are evicted.
    #[serde(default)]
    pub max_episodes: Option<i64>,
    /// Most bytes its episodes may occupy as stored (≥ 1).
    #[serde(default)]
    pub max_bytes: Option<i64>,
    /// Oldest an episode may be, in seconds (> 0): older ones are evicted.
    #[serde(default)]
    pub max_age: Option<f64>,
    /// Context to set it for (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `context_set_retention`: the policy now in force (all null: none).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RetentionSet {
    /// Always true when returned.
    pub success: bool,
    /// Most episodes kept (null: no limit).
    pub max_episodes: Option<i64>,
    /// Most stored bytes (null: no limit).
    pub max_bytes: Option<i64>,
    /// Oldest age in seconds (null: no limit).
    pub max_age: Option<f64>,
    /// Episodes evicted from the context so far (this call's enforcement included).
    pub evicted: i64,
}

impl Op for ContextSetRetention {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let p = common::retention(self.max_episodes, self.max_bytes, self.max_age)?;
        let contexts = cx.mem.contexts();
        contexts.set_retention(p, self.namespace.as_deref())?;
        let ctx = self.namespace.clone().unwrap_or_else(|| cx.active());
        let evicted = cx
            .mem
            .admin()
            .status(false, false)?
            .retention
            .into_iter()
            .find(|s| s.context == ctx)
            .map_or(0, |s| i64::try_from(s.evicted).unwrap_or(i64::MAX));
        let r = common::Retention::from(p);
        Done::of(&RetentionSet {
            success: true,
            max_episodes: r.max_episodes,
            max_bytes: r.max_bytes,
            max_age: r.max_age,
            evicted,
        })
    }
}

/// Arguments of `context_evictions`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextEvictions {
    /// Most entries, newest first (default 10, at most 100).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `context_evictions`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Evictions {
    /// Audited evictions, newest first.
    pub evictions: Vec<common::Eviction>,
}

impl Op for ContextEvictions {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let limit = common::defaults::page_limit(self.limit);
        let list = cx
            .mem
            .contexts()
            .evictions(self.namespace.as_deref(), limit)?;
        Done::of(&Evictions {
            evictions: list.into_iter().map(Into::into).collect(),
        })
    }
}
