//! lethe-ballista: lethe's heavy per-file work as tasks on a DataFusion Ballista cluster.
//!
//! On one machine the proof scan and a batch's copy-on-write rewrites are bounded by its
//! cores and its link to storage. This crate spreads them over a Ballista cluster whose
//! executors carry lethe's operators:
//!
//! - [`exec`]: the operators — [`exec::ProofScanExec`] (read each object with its format's
//!   reader, search it for the batch's traces, emit hit rows) and
//!   [`exec::RewriteFilesExec`] (read a data file with its delete files applied, drop the
//!   selected rows or null the erased columns, write the new file with lethe's metrics,
//!   emit its metadata);
//! - [`query`]: SQL on the cluster — [`query::SnapshotTable`], a table read as its current
//!   snapshot's data files, and its scan [`query::SnapshotScanExec`] (a pipeline's query);
//! - [`codec`]: the logical and physical extension codecs that carry them through the
//!   scheduler to executors, and [`codec::WorkTable`], the table a job enters a plan as;
//! - [`wire`]: the jobs as plain data, with the traces in the form the search needs;
//! - [`client`]: [`client::BallistaEngine`], the client side — it cuts work into tasks,
//!   submits them, collects results, cleans up after tasks that ran twice; the caller
//!   makes the one commit (executors never commit);
//! - [`security`]: the cluster's shared secret (a token on every call, checked by the
//!   scheduler and the executors' result servers) and TLS;
//! - [`process`]: the scheduler and executor processes (`lethe scheduler`, `lethe executor`)
//!   on the stock `ballista-scheduler` and `ballista-executor` libraries with lethe's codecs.
//!
//! What it must not do: log anything about a subject. Plans display counts only; jobs'
//! `Debug` shows counts only; errors name files and tasks.
//!
//! What it needs from the cluster: every executor reads and writes the store the client's
//! catalog names (a shared folder, or object storage with the executor's own credentials).

pub mod client;
pub mod codec;
pub mod error;
pub mod exec;
pub mod process;
pub mod query;
pub mod security;
pub mod wire;

pub use client::{BallistaEngine, EngineSettings, JobStats};
pub use error::{Error, Result};
