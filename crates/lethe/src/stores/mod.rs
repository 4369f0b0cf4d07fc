//! Stores outside the warehouse: the registry (`governance/stores.toml`) and the one delete +
//! probe protocol every connector implements.
//!
//! A person's data lives where the warehouse was loaded from and where it was copied to: the
//! application database, an evaluation set kept in Git, a search index rebuilt every night, a
//! vendor reached through its deletion API, exports and files. Each such place is a *store*
//! registered in [`registry`] with a name, a kind, an owner, a retention, what it is built
//! from (`depends_on`), the field that carries the subject reference, and how it is deleted and
//! probed.
//!
//! The protocol ([`Store`]):
//! - `delete(subjects) -> Deleted { action, mechanism, records }`: remove (or tombstone) every
//!   record of the given subjects, batched where the store's API allows; `records` per subject;
//! - `probe(subjects) -> residual count` per subject: what the store still holds;
//! - `sight(subjects)`: the same count by another path (the field read as text), where the
//!   store has one — the erasure's blind check compares it with the probe before the first
//!   delete, so a probe that can't see the subject is never taken for a clean store;
//! - `last_rebuild()`: for a store rebuilt from a source (`rebuilt_from`), when its last
//!   rebuild ran — a delete there is undone by the next rebuild unless the source went first,
//!   so the store only counts as verified once a rebuild after the delete was probed clean.
//!
//! - `seed(subject, key)` and `unseed(seeded)`: the drill's seeding hook (`lethe drill`) —
//!   writes records of a synthetic subject shaped like the store's own, and removes afterwards
//!   whatever of them the erasure kept (a tombstoned row, an emptied file, the drill's commit).
//!
//! A store that can't be probed says so (`probe = "none"` with a `basis`): it is a residual in
//! every manifest and no verdict over it is COMPLETE. The order of an erasure over stores and
//! the warehouse, and the verify loop, are in [`crate::erasure::erase`]; this module knows
//! nothing of requests beyond the values it is asked to delete.
//!
//! Connectors, one module each: [`database`] (PostgreSQL and SQLite), [`git`] (a versioned
//! dataset), [`index`] (a rebuilt full-text index), [`http`] (a vendor's deletion API),
//! [`files`] (exports and raw files outside the warehouse).
//!
//! Errors and reports name stores, tables, files and counts, never a value of the person;
//! connection secrets come from the environment into `secrecy` types and are never shown.

pub mod database;
pub mod files;
pub mod git;
pub mod http;
pub mod index;
pub mod registry;
mod sql;

use std::path::Path;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use registry::{Basis, Registry, StoreConfig, StoreKind};

use crate::error::Result;

/// One subject as a store is asked about it: the request it belongs to and the values of the
/// identifier the store's subject field holds (usually one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSubject {
    /// The request ID.
    pub request: String,
    /// The subject's values of the store's identifier (e.g. the learner ID, or the email).
    pub values: Vec<String>,
    /// Identifying values (names, emails...) a store that searches text may look for.
    pub traces: Vec<String>,
}

/// How a store removed a subject's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StoreAction {
    /// Records removed.
    Delete,
    /// Records kept (a law keeps them) with the identifier and erased columns overwritten.
    Tombstone,
    /// History rewritten so that no reachable commit or object holds the records.
    RewriteHistory,
    /// A file rewritten without the records, or removed.
    Rewrite,
    /// A deletion request sent to a vendor's API.
    Request,
    /// Nothing deleted now: the store's retention removes the subject by a date.
    Expire,
    /// An artifact (a model) trained on the subject's rows: handed to its owner, never claimed
    /// as erased.
    HandOff,
    /// Nothing lethe can delete or probe: a residual with a basis.
    Residual,
}

impl std::fmt::Display for StoreAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreAction::Delete => "DELETE",
            StoreAction::Tombstone => "TOMBSTONE",
            StoreAction::RewriteHistory => "REWRITE_HISTORY",
            StoreAction::Rewrite => "REWRITE",
            StoreAction::Request => "REQUEST",
            StoreAction::Expire => "EXPIRE",
            StoreAction::HandOff => "HAND_OFF",
            StoreAction::Residual => "RESIDUAL",
        })
    }
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    /// The action taken.
    pub action: StoreAction,
    /// How, in words a reviewer can check ("DELETE in one transaction: tickets, learners").
    pub mechanism: String,
    /// Records affected, per subject (in the order asked).
    pub records: Vec<u64>,
    /// Places the store could not change itself (a Git remote and the force-push it needs).
    pub unreachable: Vec<String>,
}

/// What a store's seeding hook wrote for the drill's synthetic subject.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seeded {
    /// Records written.
    pub records: u64,
    /// Where they went (a table, a file, a commit) and the key that finds each there, so that
    /// `unseed` removes what the erasure kept and nothing else.
    pub places: Vec<SeededPlace>,
}

/// One place a seed wrote to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeededPlace {
    /// The table, file or ref.
    pub place: String,
    /// The column (or other locator) and value that find the record there, when it has one.
    pub key: Option<(String, String)>,
}

/// The synthetic text a seeded record's text field gets: names the drill's request and the
/// field, never a person.
pub fn synthetic_text(subject: &StoreSubject, field: &str) -> String {
    format!("{} {field}", synthetic_prefix(subject))
}

/// The start of every synthetic text of a subject's seeded records.
pub fn synthetic_prefix(subject: &StoreSubject) -> String {
    format!("lethe drill {}", subject.request)
}

/// The protocol every store implements.
#[async_trait]
pub trait Store: Send + Sync {
    /// The store's name in the registry.
    fn name(&self) -> &str;

    /// Removes (or tombstones) every record of `subjects`, batched where the API allows.
    async fn delete(&self, subjects: &[StoreSubject]) -> Result<Deleted>;

    /// How many records of each subject the store still holds.
    async fn probe(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>>;

    /// How many records of each subject the store holds, read by a path other than
    /// [`Store::probe`]'s: the subject field compared by its text form with the value's text
    /// (`CAST(field AS TEXT)` in SQLite, `field::text` in PostgreSQL), no typed parameter.
    /// `None` (the default) when the store has no such second path. Before a store's first
    /// delete, the erasure compares the two: a probe that finds nothing where this finds
    /// records is blind (`crate::erasure::erase::stores`).
    async fn sight(&self, subjects: &[StoreSubject]) -> Result<Option<Vec<u64>>> {
        let _ = subjects;
        Ok(None)
    }

    /// When the store's last rebuild ran (stores rebuilt from a source); `None` when it never
    /// ran or the store isn't rebuilt.
    async fn last_rebuild(&self) -> Result<Option<DateTime<Utc>>> {
        Ok(None)
    }

    /// Every value of the subject field the store holds, for `lethe register replay` (which
    /// finds erased subjects by their keyed hash); `None` when the store can't be listed.
    async fn subject_values(&self) -> Result<Option<Vec<String>>> {
        Ok(None)
    }

    /// The drill's seeding hook: writes records of `subject` (a synthetic subject from the
    /// reserved range of `subjects.toml`) shaped like the store's own — a copy of one of its
    /// records with the subject field set to the subject's value, a key set to the synthetic
    /// `key`, text set to [`synthetic_text`] and other personal fields emptied, so no real
    /// person's value is copied. An error names why the store can't be seeded.
    async fn seed(&self, subject: &StoreSubject, key: i64) -> Result<Seeded> {
        let _ = (subject, key);
        Err(error(self.name(), "this kind of store has no seeding hook"))
    }

    /// Removes what `seed` wrote and the erasure kept (a tombstoned row, an emptied file, the
    /// drill's own commit); nothing else. Returns the records (or files, commits) removed.
    async fn unseed(&self, seeded: &Seeded) -> Result<u64> {
        let _ = seeded;
        Ok(0)
    }
}

/// Opens the connector of a registered store. `root` is the folder relative paths are
/// resolved against (lethe.toml's).
pub fn open(root: &Path, name: &str, config: &StoreConfig) -> Result<Box<dyn Store>> {
    open_with(root, name, config, &process_env)
}

/// Where a store reads the environment variables its configuration names (`url_env`): the
/// process environment ([`process_env`]) in lethe, a map in tests (changing the process
/// environment while other threads read it is undefined behaviour).
pub type Vars<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A variable of the process environment (unset or not Unicode: `None`).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// [`open`], a database or index store reading its `url_env` through `vars`.
pub fn open_with(
    root: &Path,
    name: &str,
    config: &StoreConfig,
    vars: Vars<'_>,
) -> Result<Box<dyn Store>> {
    Ok(match config.kind {
        StoreKind::Database => Box::new(database::DatabaseStore::open(root, name, config, vars)?),
        StoreKind::Index => Box::new(index::IndexStore::open(root, name, config, vars)?),
        StoreKind::Git => Box::new(git::GitStore::open(root, name, config)?),
        StoreKind::Http => Box::new(http::HttpStore::open(name, config)?),
        StoreKind::Files => Box::new(files::FilesStore::open(root, name, config)?),
        StoreKind::Model | StoreKind::Backup | StoreKind::Manual => {
            return Err(crate::Error::Internal(format!(
                "store `{name}` ({}) has no connector",
                config.kind
            )));
        }
    })
}

/// A store error: names the store, never a value of the person.
pub(crate) fn error(store: &str, message: impl Into<String>) -> crate::Error {
    crate::Error::Store {
        store: store.to_string(),
        message: message.into(),
    }
}

/// Runs a store's blocking work (rusqlite, git2, the file system) off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| crate::Error::Internal(format!("a blocking task failed: {e}")))?
}
