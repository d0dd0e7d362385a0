//! Health and maintenance: `status` and `optimize` (methods of `Memory`).

use memstrata_bindings_common::{
    BindingError, OptimizeReport, Status, defaults, options, progress_sink,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::callbacks::JsProgress;
use crate::error;
use crate::memory::Memory;
use crate::task::with;

/// Options of `status`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct StatusOptions {
    /// Count active sessions (default true).
    pub include_sessions: Option<bool>,
    /// Per-operation latency, item counts, disk and index figures (default false).
    pub include_metrics: Option<bool>,
}

/// `options.onProgress`, converted on the JS thread.
pub(crate) fn on_progress(env: &Env, options: Option<&Object<'_>>) -> Result<Option<JsProgress>> {
    let Some(obj) = options else { return Ok(None) };
    let bad = |e: Error| error::to_napi(env, BindingError::invalid("onProgress", e.reason.clone()));
    match obj
        .get::<Function<'_, memstrata_bindings_common::ProgressEvent, Unknown<'static>>>(
            "onProgress",
        )
        .map_err(bad)?
    {
        None => Ok(None),
        Some(f) => JsProgress::new(&f)
            .map(Some)
            .map_err(|e| error::to_napi(env, e)),
    }
}

#[napi]
impl Memory {
    /// Health, version, uptime; session count and metrics when asked for.
    #[napi]
    pub fn status<'env>(
        &self,
        env: &'env Env,
        options: Option<StatusOptions>,
    ) -> Result<PromiseRaw<'env, Status>> {
        let o = options.unwrap_or_default();
        let sessions = o
            .include_sessions
            .unwrap_or(defaults::DEFAULT_INCLUDE_SESSIONS);
        let metrics = o
            .include_metrics
            .unwrap_or(defaults::DEFAULT_INCLUDE_METRICS);
        with(env, &self.h, move |m| {
            Ok(m.admin().status(sessions, metrics)?.into())
        })
    }

    /// Maintenance: `"light"` (default) purges expired items; `"medium"` also prunes
    /// session versions past the retention and recompresses; `"aggressive"` also merges
    /// index segments. `onProgress({ stage, done, total })` follows it.
    #[napi(
        ts_args_type = "options?: { level?: 'light' | 'medium' | 'aggressive'; targetSession?: string | null; onProgress?: ProgressCallback }"
    )]
    pub fn optimize<'env>(
        &self,
        env: &'env Env,
        options: Option<Object<'env>>,
    ) -> Result<PromiseRaw<'env, OptimizeReport>> {
        let progress = on_progress(env, options.as_ref())?;
        let (level, target) = match &options {
            None => (None, None),
            Some(o) => {
                let bad = |f: &str, e: Error| {
                    error::to_napi(env, BindingError::invalid(f, e.reason.clone()))
                };
                (
                    o.get::<String>("level").map_err(|e| bad("level", e))?,
                    o.get::<String>("targetSession")
                        .map_err(|e| bad("targetSession", e))?,
                )
            }
        };
        with(env, &self.h, move |m| {
            let level = options::optimize_level(level.as_deref())?;
            let sink = progress_sink(|ev| {
                if let Some(p) = &progress {
                    p.report(ev);
                }
            });
            Ok(m.admin()
                .optimize_with_progress(level, target.as_deref(), &sink)?
                .into())
        })
    }
}
