//! Working memory: a bounded focus list and a bounded workspace, persisted per context.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::clock::millis_to_dt;
use crate::engine::{Engine, Scope};
use crate::{Result, storage::codec, util::input};

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct WorkingState {
    pub focus: Vec<String>,
    pub workspace: Vec<WsRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WsRecord {
    pub id: String,
    pub value: Value,
    pub added_at: i64,
}

/// One workspace item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkspaceItem {
    /// Id returned by `add_to_workspace`.
    pub id: String,
    /// The value.
    pub value: Value,
    /// When it was added.
    pub added_at: DateTime<Utc>,
}

/// Handle on the working memory of the active context. Get it from [`Memory::working`](crate::Memory::working).
#[derive(Debug, Clone)]
pub struct Working {
    pub(crate) scope: Scope,
}

fn state_key(ctx: &str) -> Vec<u8> {
    codec::ctx_key(ctx, "state")
}

pub(crate) fn load(e: &Engine, ctx: &str) -> Result<WorkingState> {
    match e.t.working.get(state_key(ctx))? {
        Some(v) => e.codec.decode(&v),
        None => Ok(WorkingState::default()),
    }
}

fn save(e: &Engine, ctx: &str, st: &WorkingState) -> Result<()> {
    e.touch_context(ctx)?;
    e.t.working.insert(state_key(ctx), e.codec.encode(st)?)?;
    e.after_write()
}

/// Clear the working memory of `ctx`.
pub(crate) fn clear_in(e: &Engine, ctx: &str) -> Result<()> {
    let _g = e.rmw_lock()?;
    e.t.working.remove(state_key(ctx))?;
    e.after_write()
}

/// Put `item` in focus in `ctx` (used by [`Working::focus`] and the procedure engine).
pub(crate) fn focus_in(e: &Engine, ctx: &str, item: &str) -> Result<bool> {
    input::key(&e.opts.limits, "item", item)?;
    let _g = e.rmw_lock()?;
    let mut st = load(e, ctx)?;
    if st.focus.iter().any(|f| f == item) {
        return Ok(false);
    }
    st.focus.push(item.to_owned());
    let cap = e.opts.limits.focus_capacity.max(1);
    if st.focus.len() > cap {
        let drop_n = st.focus.len() - cap;
        st.focus.drain(..drop_n);
    }
    save(e, ctx, &st)?;
    Ok(true)
}

/// Add `value` to the workspace of `ctx`; returns its id (used by [`Working::add_to_workspace`]
/// and the procedure engine).
pub(crate) fn add_in(e: &Engine, ctx: &str, value: Value) -> Result<String> {
    input::value(&e.opts.limits, "value", &value)?;
    let _g = e.rmw_lock()?;
    let mut st = load(e, ctx)?;
    let id = uuid::Uuid::now_v7().to_string();
    st.workspace.push(WsRecord {
        id: id.clone(),
        value,
        added_at: e.opts.clock.now().timestamp_millis(),
    });
    let cap = e.opts.limits.workspace_capacity.max(1);
    if st.workspace.len() > cap {
        let drop_n = st.workspace.len() - cap;
        st.workspace.drain(..drop_n);
    }
    save(e, ctx, &st)?;
    Ok(id)
}

impl Working {
    /// Put `item` in focus; `false` when it already was. The oldest item is evicted past capacity.
    pub fn focus(&self, item: &str) -> Result<bool> {
        let e = &self.scope.engine;
        e.timed("working.focus", || {
            focus_in(e, &self.scope.active_ctx(), item)
        })
    }

    /// Items in focus, oldest first.
    pub fn current_focus(&self) -> Result<Vec<String>> {
        let e = &self.scope.engine;
        e.timed("working.current_focus", || {
            Ok(load(e, &self.scope.active_ctx())?.focus)
        })
    }

    /// Add a value to the workspace; returns its id. The oldest item is evicted past capacity.
    pub fn add_to_workspace(&self, value: Value) -> Result<String> {
        let e = &self.scope.engine;
        e.timed("working.add_to_workspace", || {
            add_in(e, &self.scope.active_ctx(), value)
        })
    }

    /// Workspace values, oldest first.
    pub fn workspace(&self) -> Result<Vec<Value>> {
        Ok(self
            .workspace_items()?
            .into_iter()
            .map(|i| i.value)
            .collect())
    }

    /// Workspace items with ids and timestamps, oldest first.
    pub fn workspace_items(&self) -> Result<Vec<WorkspaceItem>> {
        let e = &self.scope.engine;
        e.timed("working.workspace", || {
            Ok(load(e, &self.scope.active_ctx())?
                .workspace
                .into_iter()
                .map(|r| WorkspaceItem {
                    id: r.id,
                    value: r.value,
                    added_at: millis_to_dt(r.added_at),
                })
                .collect())
        })
    }

    /// Empty focus and workspace.
    pub fn clear(&self) -> Result<()> {
        let e = &self.scope.engine;
        e.timed("working.clear", || clear_in(e, &self.scope.active_ctx()))
    }
}
