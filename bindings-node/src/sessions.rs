//! Sessions: versioned, compressed snapshots of an agent's state (methods of `Memory`).

use memstrata_bindings_common::{
    JsonValue, SessionCreated, SessionInfo, SessionRestored, SessionSaved, SessionVersionInfo,
    options, records,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use crate::memory::Memory;
use crate::task::with;

/// Options of `sessionCreate`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct SessionCreateOptions {
    /// Any JSON value returned with every restore (default `{}`).
    pub metadata: Option<JsonValue>,
}

/// Options of `sessionSave`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct SessionSaveOptions {
    /// 0: none, 1: lz4 (default), 2: lz4 high, 3: + delta against the previous version.
    pub compression_level: Option<u32>,
}

/// Options of `sessionRestore`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct SessionRestoreOptions {
    /// The version to restore (default: the latest).
    pub version: Option<i64>,
}

#[napi]
impl Memory {
    /// Create a session.
    #[napi]
    pub fn session_create<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: Option<SessionCreateOptions>,
    ) -> Result<PromiseRaw<'env, SessionCreated>> {
        let metadata = options
            .and_then(|o| o.metadata)
            .map_or_else(|| Value::Object(Default::default()), JsonValue::into_inner);
        with(env, &self.h, move |m| {
            Ok(m.sessions().create(&name, metadata)?.into())
        })
    }

    /// Save `content` as the next version of a session.
    #[napi]
    pub fn session_save<'env>(
        &self,
        env: &'env Env,
        session_id: String,
        content: JsonValue,
        options: Option<SessionSaveOptions>,
    ) -> Result<PromiseRaw<'env, SessionSaved>> {
        let level = options.and_then(|o| o.compression_level);
        with(env, &self.h, move |m| {
            let level = options::compression_level(level)?;
            Ok(m.sessions().save(&session_id, content.0, level)?.into())
        })
    }

    /// Restore a session: the latest version, or `version`. `NOT_FOUND` when absent.
    #[napi]
    pub fn session_restore<'env>(
        &self,
        env: &'env Env,
        session_id: String,
        options: Option<SessionRestoreOptions>,
    ) -> Result<PromiseRaw<'env, SessionRestored>> {
        let version = options.and_then(|o| o.version);
        with(env, &self.h, move |m| {
            let version = options::version("version", version)?;
            Ok(m.sessions().restore(&session_id, version)?.into())
        })
    }

    /// Every session, with its latest version and version count.
    #[napi]
    pub fn session_list<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Vec<SessionInfo>>> {
        with(env, &self.h, |m| Ok(records::list(m.sessions().list()?)))
    }

    /// The kept versions of a session, oldest first.
    #[napi]
    pub fn session_versions<'env>(
        &self,
        env: &'env Env,
        session_id: String,
    ) -> Result<PromiseRaw<'env, Vec<SessionVersionInfo>>> {
        with(env, &self.h, move |m| {
            Ok(records::list(m.sessions().versions(&session_id)?))
        })
    }

    /// Delete a session and its versions; true when it existed.
    #[napi]
    pub fn session_delete<'env>(
        &self,
        env: &'env Env,
        session_id: String,
    ) -> Result<PromiseRaw<'env, bool>> {
        with(env, &self.h, move |m| {
            Ok(m.sessions().delete(&session_id)?)
        })
    }
}
