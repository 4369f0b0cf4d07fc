//! lethe: erase a person from an Apache Iceberg lakehouse, and prove it.
//!
//! The erasure library behind the `lethe` command, built on the table mechanics of
//! [`lethe_iceberg`] (catalogs, stores, reading, writing, commits, table operations). Its
//! groups, in the order a user meets them:
//! - [`governance`]: the reviewed files (classifications, retention rules and legal exceptions,
//!   privacy subjects) and what follows from them about identifiers;
//! - [`lifecycle`]: governance applied to tables — retention rules for a given day, table
//!   properties generated from the classifications;
//! - [`pipeline`]: the SQL pipelines DataFusion runs, with their column lineage recorded;
//! - [`erasure`]: plan and explain, erase (journal, case files), prove, attest, mentions and
//!   the register;
//! - [`requests`]: requests as a workflow — kinds (erasure, restriction), due dates, states,
//!   the controller's instruction, a restriction's scope;
//! - [`access`]: consent states, the access policy, the enforced query path and its audit log;
//! - [`onboarding`]: `lethe init` for an existing catalog, and discovery of what its columns
//!   hold;
//! - [`stores`]: the stores outside the warehouse (application databases, Git datasets,
//!   rebuilt indexes, vendor APIs, files), their registry and the delete + probe protocol.
//!
//! It knows nothing of the demo platform (crate `lethe-demo`): tables, columns and subjects
//! come from the configuration and the catalog.

pub mod access;
pub mod batchio;
pub mod config;
pub mod engine;
pub mod erasure;
pub mod error;
pub mod governance;
pub mod keys;
pub mod lifecycle;
pub mod onboarding;
pub mod pipeline;
pub mod requests;
pub mod stores;
pub mod tomlfile;
pub mod workspace;

pub use error::{Error, Result};
