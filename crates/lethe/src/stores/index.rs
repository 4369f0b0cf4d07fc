//! A full-text index rebuilt from a source by a job: SQLite FTS5 or a PostgreSQL table with a
//! `tsvector` column, over documents that carry the subject reference.
//!
//! Delete removes the subject's documents from the index; but the job rebuilds the index from
//! its source (`rebuilt_from`) on its schedule, which undoes the delete unless the source went
//! first. So after a delete the store is *pending rebuild*: lethe reads when the job last ran
//! (`max(built_at)` of the `builds_table` the job appends to), and only a probe after a rebuild
//! that ran after the delete verifies it. A hit then means the source still holds the subject.
//! The subject field is compared in the type it holds: an FTS5 column has no type and holds
//! the IDs as they were written (integers or text), so both forms are matched; `sight` reads
//! the same documents by the field's text form, for the erasure's blind check.
//! Seed (the drill): one document copied from the index's first, with the subject field set to
//! the synthetic subject and its text to synthetic text; the erasure deletes it.

use std::path::Path;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::registry::StoreConfig;
use super::sql::{Change, Target};
use super::{Deleted, Seeded, SeededPlace, Store, StoreAction, StoreSubject, error};
use crate::error::Result;

/// The index connector.
#[derive(Debug)]
pub struct IndexStore {
    name: String,
    target: Target,
    table: String,
    field: String,
    builds: String,
}

impl IndexStore {
    /// From a registered `index` store, its `url_env` read through `vars`.
    pub fn open(
        root: &Path,
        name: &str,
        c: &StoreConfig,
        vars: super::Vars<'_>,
    ) -> Result<IndexStore> {
        Ok(IndexStore {
            name: name.to_string(),
            target: Target::from_config(
                name,
                root,
                c.engine.as_deref(),
                c.path.as_deref(),
                c.url_env.as_deref(),
                vars,
            )?,
            table: c.table.clone().unwrap_or_default(),
            field: c.subject_field.clone().unwrap_or_default(),
            builds: c.builds_table.clone().unwrap_or_default(),
        })
    }

    fn values(subjects: &[StoreSubject]) -> Vec<String> {
        let mut v: Vec<String> = subjects.iter().flat_map(|s| s.values.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    fn per_subject(subjects: &[StoreSubject], c: &super::sql::Counts) -> Vec<u64> {
        subjects
            .iter()
            .map(|s| {
                s.values
                    .iter()
                    .map(|v| c.get(v).copied().unwrap_or(0))
                    .sum()
            })
            .collect()
    }
}

#[async_trait]
impl Store for IndexStore {
    fn name(&self) -> &str {
        &self.name
    }

    async fn delete(&self, subjects: &[StoreSubject]) -> Result<Deleted> {
        let counts = self
            .target
            .apply(
                &self.name,
                &[Change::Delete {
                    table: self.table.clone(),
                    column: self.field.clone(),
                }],
                &Self::values(subjects),
            )
            .await?;
        Ok(Deleted {
            action: StoreAction::Delete,
            mechanism: format!(
                "{}: documents deleted from index table {}; verified after the next rebuild",
                self.target.describe(),
                self.table
            ),
            records: Self::per_subject(subjects, &counts[0]),
            unreachable: Vec::new(),
        })
    }

    async fn probe(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
        let counts = self
            .target
            .counts(
                &self.name,
                &[(self.table.clone(), self.field.clone())],
                &Self::values(subjects),
            )
            .await?;
        Ok(Self::per_subject(subjects, &counts[0]))
    }

    async fn sight(&self, subjects: &[StoreSubject]) -> Result<Option<Vec<u64>>> {
        let counts = self
            .target
            .text_counts(
                &self.name,
                &[(self.table.clone(), self.field.clone())],
                &Self::values(subjects),
            )
            .await?;
        Ok(Some(Self::per_subject(subjects, &counts[0])))
    }

    async fn last_rebuild(&self) -> Result<Option<DateTime<Utc>>> {
        let Some(t) = self
            .target
            .max_text(&self.name, &self.builds, "built_at")
            .await?
        else {
            return Ok(None);
        };
        DateTime::parse_from_rfc3339(&t)
            .map(|d| Some(d.with_timezone(&Utc)))
            .map_err(|_| {
                error(
                    &self.name,
                    format!(
                        "{}.built_at holds `{t}`, not an RFC 3339 timestamp",
                        self.builds
                    ),
                )
            })
    }

    async fn subject_values(&self) -> Result<Option<Vec<String>>> {
        Ok(Some(
            self.target
                .distinct(&self.name, &[(self.table.clone(), self.field.clone())])
                .await?,
        ))
    }

    async fn seed(&self, subject: &StoreSubject, key: i64) -> Result<Seeded> {
        let value = subject.values.first().ok_or_else(|| {
            error(
                &self.name,
                "the synthetic subject has no value for this store",
            )
        })?;
        let done = self
            .target
            .seed(
                &self.name,
                &[(self.table.clone(), self.field.clone())],
                value,
                key,
                &super::synthetic_prefix(subject),
            )
            .await?;
        let (n, found) = done.into_iter().next().unwrap_or((0, None));
        if n == 0 {
            return Err(error(
                &self.name,
                format!(
                    "the index table {} is empty: there is no document to copy a synthetic one from",
                    self.table
                ),
            ));
        }
        Ok(Seeded {
            records: n,
            places: vec![SeededPlace {
                place: self.table.clone(),
                key: found,
            }],
        })
    }

    async fn unseed(&self, seeded: &Seeded) -> Result<u64> {
        let keys: Vec<(String, String, String)> = seeded
            .places
            .iter()
            .filter_map(|p| {
                p.key
                    .as_ref()
                    .map(|(c, v)| (p.place.clone(), c.clone(), v.clone()))
            })
            .collect();
        self.target.delete_keys(&self.name, &keys).await
    }
}
