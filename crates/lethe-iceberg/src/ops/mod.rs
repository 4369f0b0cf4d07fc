//! Operations on tables, each in its own module: plan, then execute, report what was done.

pub mod changes;
pub mod expire;
pub mod history;
pub mod manifests;
pub mod query_tasks;
pub mod rewrite;
pub mod rewrite_tasks;
pub mod sweep;
pub mod twins;
