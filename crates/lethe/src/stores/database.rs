//! A relational database store (PostgreSQL, or SQLite for the embedded demo).
//!
//! Delete: per configured table, `DELETE` the rows whose reference column holds the subject, or
//! tombstone them (the reference set to NULL or a tombstone value, `erase_columns` set to
//! NULL) for records a law keeps — children before parents by the database's own foreign keys,
//! all in one transaction, values bound as typed parameters in the type the column holds. Probe:
//! the rows of every configured table whose reference column still holds the subject (a
//! tombstoned row no longer does); sight: the same rows read by the column's text form. Seed (the drill): one row per configured table, parents first, copied from the
//! table's first row with the reference set to the synthetic subject, a single-column primary
//! key set to the synthetic key and text columns to synthetic text; unseed deletes those rows
//! by their key (a tombstoned one is still there after the erasure).

use std::path::Path;

use async_trait::async_trait;

use super::registry::StoreConfig;
use super::sql::{Change, Target, children_first};
use super::{Deleted, Seeded, SeededPlace, Store, StoreAction, StoreSubject, error};
use crate::error::Result;

/// A configured table.
#[derive(Debug, Clone)]
struct Table {
    name: String,
    column: String,
    tombstone: bool,
    erase: Vec<String>,
    value: Option<toml::Value>,
}

/// The relational database connector.
#[derive(Debug)]
pub struct DatabaseStore {
    name: String,
    target: Target,
    tables: Vec<Table>,
}

impl DatabaseStore {
    /// From a registered `database` store, its `url_env` read through `vars`.
    pub fn open(
        root: &Path,
        name: &str,
        c: &StoreConfig,
        vars: super::Vars<'_>,
    ) -> Result<DatabaseStore> {
        let target = Target::from_config(
            name,
            root,
            c.engine.as_deref(),
            c.path.as_deref(),
            c.url_env.as_deref(),
            vars,
        )?;
        let tables = c
            .tables
            .iter()
            .map(|t| Table {
                name: t.table.clone(),
                column: t
                    .column
                    .clone()
                    .or_else(|| c.subject_field.clone())
                    .unwrap_or_default(),
                tombstone: t.action.as_deref() == Some("tombstone"),
                erase: t.erase_columns.clone(),
                value: t.tombstone_value.clone(),
            })
            .collect();
        Ok(DatabaseStore {
            name: name.to_string(),
            target,
            tables,
        })
    }

    fn columns(&self) -> Vec<(String, String)> {
        self.tables
            .iter()
            .map(|t| (t.name.clone(), t.column.clone()))
            .collect()
    }
}

/// Sums counts per subject (a subject's records are the rows holding any of its values).
fn per_subject(subjects: &[StoreSubject], counts: &[super::sql::Counts]) -> Vec<u64> {
    subjects
        .iter()
        .map(|s| {
            counts
                .iter()
                .map(|c| {
                    s.values
                        .iter()
                        .map(|v| c.get(v).copied().unwrap_or(0))
                        .sum::<u64>()
                })
                .sum()
        })
        .collect()
}

fn all_values(subjects: &[StoreSubject]) -> Vec<String> {
    let mut v: Vec<String> = subjects.iter().flat_map(|s| s.values.clone()).collect();
    v.sort();
    v.dedup();
    v
}

#[async_trait]
impl Store for DatabaseStore {
    fn name(&self) -> &str {
        &self.name
    }

    async fn delete(&self, subjects: &[StoreSubject]) -> Result<Deleted> {
        let names: Vec<String> = self.tables.iter().map(|t| t.name.clone()).collect();
        let fks = self.target.foreign_keys(&self.name, &names).await?;
        let order = children_first(&names, &fks);
        let mut changes = Vec::new();
        let mut words = Vec::new();
        for n in &order {
            let t = self
                .tables
                .iter()
                .find(|t| &t.name == n)
                .expect("ordered tables are configured tables");
            if t.tombstone {
                changes.push(Change::Tombstone {
                    table: t.name.clone(),
                    column: t.column.clone(),
                    erase: t.erase.clone(),
                    value: t.value.clone(),
                });
                let mut cols = vec![t.column.clone()];
                cols.extend(t.erase.iter().cloned());
                words.push(format!("{} tombstoned ({})", t.name, cols.join(", ")));
            } else {
                changes.push(Change::Delete {
                    table: t.name.clone(),
                    column: t.column.clone(),
                });
                words.push(format!("{} deleted", t.name));
            }
        }
        let values = all_values(subjects);
        let counts = self.target.apply(&self.name, &changes, &values).await?;
        let any_tombstone = self.tables.iter().any(|t| t.tombstone);
        Ok(Deleted {
            action: if any_tombstone && self.tables.iter().all(|t| t.tombstone) {
                StoreAction::Tombstone
            } else {
                StoreAction::Delete
            },
            mechanism: format!(
                "{}: one transaction, children before parents: {}",
                self.target.describe(),
                words.join(", ")
            ),
            records: per_subject(subjects, &counts),
            unreachable: Vec::new(),
        })
    }

    async fn probe(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
        let counts = self
            .target
            .counts(&self.name, &self.columns(), &all_values(subjects))
            .await?;
        Ok(per_subject(subjects, &counts))
    }

    async fn sight(&self, subjects: &[StoreSubject]) -> Result<Option<Vec<u64>>> {
        let counts = self
            .target
            .text_counts(&self.name, &self.columns(), &all_values(subjects))
            .await?;
        Ok(Some(per_subject(subjects, &counts)))
    }

    async fn subject_values(&self) -> Result<Option<Vec<String>>> {
        Ok(Some(
            self.target.distinct(&self.name, &self.columns()).await?,
        ))
    }

    async fn seed(&self, subject: &StoreSubject, key: i64) -> Result<Seeded> {
        let value = subject.values.first().ok_or_else(|| {
            error(
                &self.name,
                "the synthetic subject has no value for this store",
            )
        })?;
        let names: Vec<String> = self.tables.iter().map(|t| t.name.clone()).collect();
        let fks = self.target.foreign_keys(&self.name, &names).await?;
        let mut order = children_first(&names, &fks);
        order.reverse();
        let tables: Vec<(String, String)> = order
            .iter()
            .filter_map(|n| self.tables.iter().find(|t| &t.name == n))
            .map(|t| (t.name.clone(), t.column.clone()))
            .collect();
        let done = self
            .target
            .seed(
                &self.name,
                &tables,
                value,
                key,
                &super::synthetic_prefix(subject),
            )
            .await?;
        let mut out = Seeded::default();
        for ((t, _), (n, found)) in tables.iter().zip(done) {
            out.records += n;
            if n > 0 {
                out.places.push(SeededPlace {
                    place: t.clone(),
                    key: found,
                });
            }
        }
        if out.records == 0 {
            return Err(error(
                &self.name,
                "every configured table is empty: there is no record to copy a synthetic one from",
            ));
        }
        Ok(out)
    }

    async fn unseed(&self, seeded: &Seeded) -> Result<u64> {
        // Children first: the reverse of the order seeded.
        let keys: Vec<(String, String, String)> = seeded
            .places
            .iter()
            .rev()
            .filter_map(|p| {
                p.key
                    .as_ref()
                    .map(|(c, v)| (p.place.clone(), c.clone(), v.clone()))
            })
            .collect();
        self.target.delete_keys(&self.name, &keys).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::registry;

    fn sqlite_store(dir: &Path) -> DatabaseStore {
        let db = dir.join("app.db");
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE learners (id INTEGER PRIMARY KEY, email TEXT);
             CREATE TABLE payments (id INTEGER PRIMARY KEY, learner_id INTEGER REFERENCES learners(id), card TEXT, amount INTEGER);
             CREATE TABLE tickets (id INTEGER PRIMARY KEY, learner_id INTEGER REFERENCES learners(id), body TEXT);
             INSERT INTO learners VALUES (1, 'a@x'), (2, 'b@x'), (3, 'c@x');
             INSERT INTO payments VALUES (1, 1, '4111', 10), (2, 2, '4222', 20), (3, 2, '4222', 30);
             INSERT INTO tickets VALUES (1, 2, 'help'), (2, 3, 'hi');",
        )
        .unwrap();
        std::fs::write(
            dir.join("stores.toml"),
            "[stores.app]\nkind = \"database\"\nowner = \"ops\"\nengine = \"sqlite\"\npath = \"app.db\"\nsubject_field = \"learner_id\"\n\
             [[stores.app.tables]]\ntable = \"learners\"\ncolumn = \"id\"\n\
             [[stores.app.tables]]\ntable = \"payments\"\naction = \"tombstone\"\nerase_columns = [\"card\"]\n\
             [[stores.app.tables]]\ntable = \"tickets\"\n",
        )
        .unwrap();
        let r = registry::load(dir).unwrap();
        DatabaseStore::open(
            dir,
            "app",
            &r.value.stores["app"],
            &crate::stores::process_env,
        )
        .unwrap()
    }

    fn subject(id: &str) -> StoreSubject {
        StoreSubject {
            request: format!("r-{id}"),
            values: vec![id.to_string()],
            traces: vec![],
        }
    }

    /// The same connector on the PostgreSQL server scripts/test.sh starts (LETHE_PG_URI), in a
    /// schema of its own: foreign keys read from pg_constraint, typed parameters (a bigint and a
    /// text reference), one transaction — a failing statement changes nothing.
    #[tokio::test(flavor = "multi_thread")]
    async fn postgres_deletes_children_first_in_one_transaction() {
        let uri = std::env::var("LETHE_PG_URI").unwrap_or_else(|_| {
            panic!("LETHE_PG_URI is not set: run the tests with `bash scripts/test.sh`, which starts PostgreSQL")
        });
        let (c, conn) = tokio_postgres::connect(&uri, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        c.batch_execute(&format!(
            "CREATE SCHEMA {schema};
             CREATE TABLE {schema}.learners (id bigint PRIMARY KEY, email text);
             CREATE TABLE {schema}.payments (id int PRIMARY KEY, learner_id bigint REFERENCES {schema}.learners(id), card text);
             CREATE TABLE {schema}.notes (id int PRIMARY KEY, owner_email varchar(200), body text);
             INSERT INTO {schema}.learners VALUES (1, 'a@x'), (2, 'b@x');
             INSERT INTO {schema}.payments VALUES (1, 1, '4111'), (2, 2, '4222');
             INSERT INTO {schema}.notes VALUES (1, 'b@x', 'hi'), (2, 'a@x', 'yo');"
        ))
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let var = format!("LETHE_TEST_PG_{}", schema.to_uppercase());
        std::fs::write(
            dir.path().join("stores.toml"),
            format!(
                "[stores.app]\nkind = \"database\"\nowner = \"ops\"\nengine = \"postgres\"\nurl_env = \"{var}\"\n\
                 [[stores.app.tables]]\ntable = \"{schema}.learners\"\ncolumn = \"id\"\n\
                 [[stores.app.tables]]\ntable = \"{schema}.payments\"\ncolumn = \"learner_id\"\naction = \"tombstone\"\nerase_columns = [\"card\"]\n"
            ),
        )
        .unwrap();
        let r = registry::load(dir.path()).unwrap();
        // The URI reaches the store as configuration (setting the process environment inside
        // a parallel test would be undefined behaviour).
        let vars = |name: &str| (name == var).then(|| uri.clone());
        let s = DatabaseStore::open(dir.path(), "app", &r.value.stores["app"], &vars).unwrap();
        assert!(
            !format!("{s:?}").contains("postgresql://"),
            "the URI never shows"
        );
        let subj = [subject("2")];
        assert_eq!(s.probe(&subj).await.unwrap(), vec![2]);
        let d = s.delete(&subj).await.unwrap();
        assert_eq!(d.records, vec![2]);
        assert!(
            d.mechanism.find("payments").unwrap() < d.mechanism.find("learners").unwrap(),
            "{}",
            d.mechanism
        );
        assert_eq!(s.probe(&subj).await.unwrap(), vec![0]);
        let row = c
            .query_one(&format!("SELECT count(*) FROM {schema}.payments WHERE learner_id IS NULL AND card IS NULL"), &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 1);
        // A text reference column (varchar), matched by a mapped identifier.
        let notes = DatabaseStore {
            name: "notes".into(),
            target: s.target.clone(),
            tables: vec![Table {
                name: format!("{schema}.notes"),
                column: "owner_email".into(),
                tombstone: false,
                erase: vec![],
                value: None,
            }],
        };
        assert_eq!(
            notes.delete(&[subject("a@x")]).await.unwrap().records,
            vec![1]
        );
        // A failing statement rolls the whole transaction back: nothing changes.
        let broken = DatabaseStore {
            name: "broken".into(),
            target: s.target.clone(),
            tables: vec![
                Table {
                    name: format!("{schema}.notes"),
                    column: "owner_email".into(),
                    tombstone: false,
                    erase: vec![],
                    value: None,
                },
                Table {
                    name: format!("{schema}.learners"),
                    column: "id".into(),
                    tombstone: false,
                    erase: vec![],
                    value: None,
                },
            ],
        };
        let e = broken
            .delete(&[subject("1"), subject("b@x")])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("store `broken`") && e.contains("learners"),
            "{e}"
        );
        let left = c
            .query_one(&format!("SELECT count(*) FROM {schema}.notes"), &[])
            .await
            .unwrap();
        assert_eq!(left.get::<_, i64>(0), 1, "the notes delete was rolled back");
        c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn sqlite_deletes_children_first_tombstones_and_probes_zero() {
        let dir = tempfile::tempdir().unwrap();
        let s = sqlite_store(dir.path());
        let subjects = [subject("2"), subject("3")];
        assert_eq!(s.probe(&subjects).await.unwrap(), vec![4, 2]);
        // learners is configured first but referenced by the others: with foreign keys on, a
        // parent-first delete would fail.
        let d = s.delete(&subjects).await.unwrap();
        assert_eq!(d.records, vec![4, 2]);
        assert!(
            d.mechanism.find("payments").unwrap() < d.mechanism.find("learners").unwrap(),
            "{}",
            d.mechanism
        );
        assert_eq!(s.probe(&subjects).await.unwrap(), vec![0, 0]);
        let c = rusqlite::Connection::open(dir.path().join("app.db")).unwrap();
        let kept: (i64, Option<String>) = c
            .query_row(
                "SELECT count(*), max(card) FROM payments WHERE learner_id IS NULL",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(kept, (2, None), "payments are kept, tombstoned");
        let left: i64 = c
            .query_row("SELECT count(*) FROM learners", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 1);
        assert_eq!(
            s.subject_values().await.unwrap().unwrap(),
            vec!["1".to_string()]
        );
    }
}
