//! Export to and import from JSON Lines files (methods of `Memory`).

use std::path::PathBuf;

use memstrata_bindings_common::{ExportStats, ImportStats, files, progress_sink};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::memory::Memory;
use crate::status::on_progress;
use crate::task::with;

#[napi]
impl Memory {
    /// Write every layer of the store to `path` (JSON Lines), fsynced before the Promise resolves.
    #[napi]
    pub fn export<'env>(
        &self,
        env: &'env Env,
        path: String,
    ) -> Result<PromiseRaw<'env, ExportStats>> {
        with(env, &self.h, move |m| {
            files::export_to_path(&m, &PathBuf::from(path))
        })
    }

    /// Import an export written by `export` (every line is checked before anything is
    /// written). `onProgress({ stage: "validate" | "apply", done, total })` follows it.
    #[napi(ts_args_type = "path: string, options?: { onProgress?: ProgressCallback }")]
    pub fn import<'env>(
        &self,
        env: &'env Env,
        path: String,
        options: Option<Object<'env>>,
    ) -> Result<PromiseRaw<'env, ImportStats>> {
        let progress = on_progress(env, options.as_ref())?;
        with(env, &self.h, move |m| {
            let sink = progress_sink(|ev| {
                if let Some(p) = &progress {
                    p.report(ev);
                }
            });
            files::import_from_path(&m, &PathBuf::from(path), &sink)
        })
    }

    /// Import the knowledge graph of the MCP reference memory server (`memory.jsonl`).
    #[napi]
    pub fn import_knowledge_graph<'env>(
        &self,
        env: &'env Env,
        path: String,
    ) -> Result<PromiseRaw<'env, ImportStats>> {
        with(env, &self.h, move |m| {
            files::import_knowledge_graph_from_path(&m, &PathBuf::from(path))
        })
    }
}
