//! lethe: erase a person from an Apache Iceberg lakehouse, and prove it.
//!
//! The library behind the `lethe` command. Its parts, in the order the job runs:
//! governance files ([`governance`]), the catalog and file store ([`catalog`], [`store`],
//! [`table`]), lethe's own data-file writer with metrics modes ([`writer`], [`metrics`]), the
//! commit path ([`snapshot`], [`commit`]) and the operations built on it ([`ops`]).

pub mod catalog;
pub mod clock;
pub mod commit;
pub mod config;
pub mod deletes;
pub mod demo;
pub mod error;
pub mod fixtures;
pub mod governance;
pub mod metrics;
pub mod read;
pub mod snapshot;
pub mod store;
pub mod table;
pub mod tomlfile;
pub mod workspace;
pub mod writer;

pub use error::{Error, Result};
pub mod attest;
pub mod audit;
pub mod batchio;
pub mod consent;
pub mod discover;
pub mod erase;
pub mod explain;
pub mod init;
pub mod inspect;
pub(crate) mod keys;
pub mod mentions;
pub mod ops;
pub mod pipeline;
pub mod plan;
pub mod policy;
pub mod predicate;
pub mod prove;
pub mod query;
pub mod register;
