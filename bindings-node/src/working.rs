//! `mem.working`: focus items and the workspace.

use std::sync::Arc;

use memstrata_bindings_common::{Handle, JsonValue, WorkspaceItem, records};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::task::with;

/// Working memory of the active context (`mem.working`).
#[napi]
#[derive(Debug)]
pub struct Working {
    pub(crate) h: Arc<Handle>,
}

#[napi]
impl Working {
    /// Put `item` in focus (the oldest item leaves past the capacity); false if it already was.
    #[napi]
    pub fn focus<'env>(&self, env: &'env Env, item: String) -> Result<PromiseRaw<'env, bool>> {
        with(env, &self.h, move |m| Ok(m.working().focus(&item)?))
    }

    /// Items in focus, oldest first.
    #[napi]
    pub fn current_focus<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Vec<String>>> {
        with(env, &self.h, |m| Ok(m.working().current_focus()?))
    }

    /// Add `value` to the workspace; returns its id.
    #[napi]
    pub fn add_to_workspace<'env>(
        &self,
        env: &'env Env,
        value: JsonValue,
    ) -> Result<PromiseRaw<'env, String>> {
        with(env, &self.h, move |m| {
            Ok(m.working().add_to_workspace(value.0)?)
        })
    }

    /// The workspace values, oldest first.
    #[napi]
    pub fn workspace<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Vec<JsonValue>>> {
        with(env, &self.h, |m| {
            Ok(m.working()
                .workspace()?
                .into_iter()
                .map(JsonValue)
                .collect())
        })
    }

    /// The workspace items with their ids and timestamps, oldest first.
    #[napi]
    pub fn workspace_items<'env>(
        &self,
        env: &'env Env,
    ) -> Result<PromiseRaw<'env, Vec<WorkspaceItem>>> {
        with(env, &self.h, |m| {
            Ok(records::list(m.working().workspace_items()?))
        })
    }

    /// Empty focus and workspace.
    #[napi]
    pub fn clear<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        with(env, &self.h, |m| Ok(m.working().clear()?))
    }
}
