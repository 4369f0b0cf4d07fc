//! Where the heavy per-file work of a command runs: in this process (the default), or on an
//! engine that spreads it over a cluster (`[engine]` in lethe.toml, `--engine` on `lethe scan`,
//! `lethe erase` and `lethe pipeline run`).
//!
//! The engines are traits of the layers that own the work — [`ScanEngine`] (the proof scan's
//! per-file reads), [`RewriteEngine`] (copy-on-write rewrites' per-file work) and
//! [`QueryEngine`] (a pipeline's SQL over tables read as their snapshots' files) — so the
//! library plans, tallies and commits exactly as it does locally: only the reading, searching
//! and writing of single files moves. The binary picks the implementation (crate
//! `lethe-ballista`); the library knows none.

use std::sync::Arc;

pub use lethe_iceberg::ops::query_tasks::QueryEngine;
pub use lethe_iceberg::ops::rewrite_tasks::RewriteEngine;
pub use lethe_scan::ScanEngine;

/// The engines a workspace runs its per-file work on (None: in this process).
#[derive(Debug, Clone, Default)]
pub struct Engines {
    /// The proof scan of the warehouse (folders outside it are scanned here).
    pub scan: Option<Arc<dyn ScanEngine>>,
    /// The rewrites of an erasure's DELETE and REWRITE steps.
    pub rewrite: Option<Arc<dyn RewriteEngine>>,
    /// The SQL of pipelines (the erasure's RECOMPUTE step's too); see [`crate::pipeline`].
    pub query: Option<Arc<dyn QueryEngine>>,
}

impl Engines {
    /// Whether everything runs in this process.
    pub fn is_local(&self) -> bool {
        self.scan.is_none() && self.rewrite.is_none() && self.query.is_none()
    }
}
