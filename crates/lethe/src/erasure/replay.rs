//! `lethe register replay`: after a restore (or a reload from a source nobody erased), delete
//! again every erased subject the register names — the control that backups' residual entries
//! name (`restore_replays_erasure_log`).
//!
//! The register holds only keyed hashes, so replay finds the subjects by hashing: every value
//! of every identifier column in every table (except tables a legal exception keeps), and every
//! value of the subject field of every registered store that can list them and holds the root
//! identifier. Rows whose hash is in the register are deleted — stores that are the
//! warehouse's sources first, then the tables (copy-on-write deletes, then the erasure's
//! cleanup: expiry, manifest rewrite, sweep), then the other stores. Stores that hold another
//! identifier (an email) or can't be listed (a vendor's API) can't be matched by hash: the
//! report names them. It reports counts and request IDs, never a value.
//!
//! A replay doesn't take its own deletes' counts for the outcome: after deleting it runs the
//! same finding again over what it touched (the tables and stores where it found something),
//! and reports per table and store how many it found again. An incident is repaired only when
//! that second finding finds nothing ([`ReplayReport::repaired`]).

use std::collections::{BTreeMap, BTreeSet};

use chrono::Duration;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::{RowRewrite, rewrite_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use serde::Serialize;

use crate::erasure::register::{Incident, Register, RegisterKey, by_subject, find, find_in};
use crate::error::Result;
use crate::stores::{self as st, StoreSubject, registry};
use crate::workspace::Workspace;

/// Options of a replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Report what would be deleted; change nothing.
    pub dry_run: bool,
    /// The sweep's minimum file age (None: retention.toml's `[sweep]`).
    pub min_age: Option<Duration>,
}

/// Records of erased subjects found in one store.
#[derive(Debug, Clone, Serialize)]
pub struct StoreFinding {
    /// The store.
    pub store: String,
    /// Records found (by `lethe register check`), or deleted (by a replay; found, for a dry
    /// run).
    pub records: u64,
    /// The requests they were erased by.
    pub requests: Vec<String>,
    /// A replay: records of erased subjects the same finding found again in the store after
    /// the delete (`None`: not checked again — a dry run, or `lethe register check`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_again: Option<u64>,
}

/// Rows of erased subjects a replay found in a table, and what it found there afterwards.
#[derive(Debug, Clone, Serialize)]
pub struct TableFinding {
    /// What was found (and deleted unless a dry run).
    #[serde(flatten)]
    pub incident: Incident,
    /// Rows of erased subjects the same finding found again in the table's column after the
    /// delete and the cleanup (`None` for a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_again: Option<u64>,
}

/// What a replay found and did.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// Rows of erased subjects per table and column.
    pub tables: Vec<TableFinding>,
    /// Records of erased subjects per store.
    pub stores: Vec<StoreFinding>,
    /// Stores that can't be matched against the register, with why.
    pub not_replayable: Vec<(String, String)>,
    /// Tables cleaned up after the deletes.
    pub cleaned_up: Vec<String>,
    /// True for a dry run.
    pub dry_run: bool,
    /// True when the replay found something and the finding after its deletes found nothing
    /// again: the incident is repaired.
    pub repaired: bool,
}

impl ReplayReport {
    /// True when nothing of an erased subject was found.
    pub fn found_nothing(&self) -> bool {
        self.tables.is_empty() && self.stores.is_empty()
    }

    /// Rows and records of erased subjects still found after the replay: for a dry run,
    /// everything found (nothing was deleted); otherwise what the finding after the deletes
    /// found again (a table or store not checked again counts as everything found there).
    pub fn still_found(&self) -> u64 {
        let tables: u64 = self
            .tables
            .iter()
            .map(|t| match (self.dry_run, t.found_again) {
                (false, Some(n)) => n,
                _ => t.incident.rows,
            })
            .sum();
        let stores: u64 = self
            .stores
            .iter()
            .map(|s| match (self.dry_run, s.found_again) {
                (false, Some(n)) => n,
                _ => s.records.max(1),
            })
            .sum();
        tables + stores
    }

    /// True when nothing of an erased subject is left: nothing was found, or what was found
    /// was deleted and not found again.
    pub fn clean(&self) -> bool {
        self.still_found() == 0
    }
}

/// Values of erased subjects held by one store: value -> request.
struct InStore {
    name: String,
    before_warehouse: bool,
    values: BTreeMap<String, String>,
    /// The records holding them.
    records: u64,
}

/// The subjects a store is asked about for the values found there (one per value).
fn found_subjects(values: &BTreeMap<String, String>) -> Vec<StoreSubject> {
    values
        .iter()
        .map(|(v, r)| StoreSubject {
            request: r.clone(),
            values: vec![v.clone()],
            traces: Vec::new(),
        })
        .collect()
}

/// Stores holding erased subjects (among the stores named by `only`, every store when `None`),
/// and the stores that can't be matched.
///
/// A store's values are listed ([`st::Store::subject_values`]) and hashed; the records holding
/// the values found are counted by the field's text form where the store can
/// ([`st::Store::sight`]), by its probe otherwise — at least one per value found.
async fn find_in_stores(
    ws: &Workspace,
    key: &RegisterKey,
    only: Option<&BTreeSet<String>>,
) -> Result<(Vec<InStore>, Vec<(String, String)>)> {
    let gov = ws.governance()?;
    let reg = registry::load(&gov.dir)?;
    let entries = Register::in_state(&ws.config.paths.state).entries()?;
    let hashes = by_subject(&entries);
    let order = registry::order(&reg.value);
    let only_subject = (gov.subjects.value.len() == 1)
        .then(|| gov.subjects.value.keys().next().cloned())
        .flatten();
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for (name, before) in order
        .before
        .iter()
        .map(|n| (n, true))
        .chain(order.after.iter().map(|n| (n, false)))
    {
        let c = &reg.value.stores[name];
        if !c.deletable() || !c.probed() || only.is_some_and(|o| !o.contains(name)) {
            continue;
        }
        let Some(subject) = c.subject.clone().or_else(|| only_subject.clone()) else {
            continue;
        };
        let root = gov.subjects.get(&subject)?.root()?.1;
        if let Some(i) = &c.identifier
            && i != &root
        {
            skipped.push((
                name.clone(),
                format!("its field holds `{i}`; the register hashes the root identifier `{root}`"),
            ));
            continue;
        }
        let store = st::open(&ws.config.root, name, c)?;
        let Some(values) = store.subject_values().await? else {
            skipped.push((
                name.clone(),
                format!("a `{}` store can't be listed", c.kind),
            ));
            continue;
        };
        let Some(h) = hashes.get(&subject) else {
            continue;
        };
        let mut hit = BTreeMap::new();
        for v in values {
            if let Some(r) = h.get(&key.hash(&subject, &v)) {
                hit.insert(v, r.clone());
            }
        }
        if !hit.is_empty() {
            let subjects = found_subjects(&hit);
            let counted: u64 = match store.sight(&subjects).await? {
                Some(n) => n.iter().sum(),
                None => store.probe(&subjects).await?.iter().sum(),
            };
            found.push(InStore {
                name: name.clone(),
                before_warehouse: before,
                records: counted.max(hit.len() as u64),
                values: hit,
            });
        }
    }
    Ok((found, skipped))
}

/// Store incidents for `lethe register check`: records of erased subjects in registered stores.
pub async fn check_stores(ws: &Workspace, key: &RegisterKey) -> Result<Vec<StoreFinding>> {
    let (found, _) = find_in_stores(ws, key, None).await?;
    Ok(found.iter().map(finding).collect())
}

fn finding(s: &InStore) -> StoreFinding {
    StoreFinding {
        store: s.name.clone(),
        records: s.records,
        found_again: None,
        requests: s
            .values
            .values()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    }
}

async fn delete_in_store(ws: &Workspace, s: &InStore) -> Result<u64> {
    let gov = ws.governance()?;
    let reg = registry::load(&gov.dir)?;
    let c = &reg.value.stores[&s.name];
    let store = st::open(&ws.config.root, &s.name, c)?;
    let d = store.delete(&found_subjects(&s.values)).await?;
    Ok(d.records.iter().sum())
}

/// Finds every erased subject the register names, in tables and stores, and (unless a dry run)
/// deletes them again, cleaning up the tables changed; then finds again in what it touched and
/// reports what is still there (`found_again`, [`ReplayReport::repaired`]).
pub async fn replay(
    ws: &Workspace,
    key: &RegisterKey,
    opts: &ReplayOptions,
    progress: &dyn Fn(&str),
) -> Result<ReplayReport> {
    let started = chrono::Utc::now();
    progress("hashing identifiers in the stores");
    let (in_stores, not_replayable) = find_in_stores(ws, key, None).await?;
    let mut report = ReplayReport {
        tables: Vec::new(),
        stores: Vec::new(),
        not_replayable,
        cleaned_up: Vec::new(),
        dry_run: opts.dry_run,
        repaired: false,
    };
    for s in in_stores.iter().filter(|s| s.before_warehouse) {
        let mut f = finding(s);
        if !opts.dry_run {
            progress(&format!("store {}: delete", s.name));
            f.records = delete_in_store(ws, s).await?;
        }
        report.stores.push(f);
    }
    progress("hashing identifiers in the tables");
    let found = find(ws, key).await?;
    let mut changed: Vec<String> = Vec::new();
    for f in &found {
        report.tables.push(TableFinding {
            incident: f.incident.clone(),
            found_again: None,
        });
        if opts.dry_run {
            continue;
        }
        progress(&format!("DELETE {} (replay)", f.incident.table));
        let values: Vec<Value> = f
            .values
            .keys()
            .map(|v| match v.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Str(v.clone()),
            })
            .collect();
        let requests = f.incident.requests.join(",");
        let spec = RowRewrite::delete(Predicate::is_in(f.incident.column.clone(), values))
            .with_summary("erasure-replay", requests);
        rewrite_rows(&ws.warehouse, &TableName::parse(&f.incident.table)?, &spec).await?;
        if !changed.contains(&f.incident.table) {
            changed.push(f.incident.table.clone());
        }
    }
    if !changed.is_empty() {
        let min_age = match opts.min_age {
            Some(d) => d,
            None => ws.governance()?.retention.min_file_age(),
        };
        crate::erasure::erase::cleanup::clean_tables(
            ws, &changed, "replay", min_age, started, progress,
        )
        .await?;
        report.cleaned_up = changed;
    }
    for s in in_stores.iter().filter(|s| !s.before_warehouse) {
        let mut f = finding(s);
        if !opts.dry_run {
            progress(&format!("store {}: delete", s.name));
            f.records = delete_in_store(ws, s).await?;
        }
        report.stores.push(f);
    }
    if !opts.dry_run && !report.found_nothing() {
        check_again(ws, key, &mut report, progress).await?;
        report.repaired = report.clean();
    }
    Ok(report)
}

/// The same finding again, over the tables and stores the replay touched: fills in each
/// one's `found_again`.
async fn check_again(
    ws: &Workspace,
    key: &RegisterKey,
    report: &mut ReplayReport,
    progress: &dyn Fn(&str),
) -> Result<()> {
    if !report.stores.is_empty() {
        progress("checking the stores again");
        let names: BTreeSet<String> = report.stores.iter().map(|s| s.store.clone()).collect();
        let (again, _) = find_in_stores(ws, key, Some(&names)).await?;
        for f in &mut report.stores {
            f.found_again = Some(
                again
                    .iter()
                    .filter(|s| s.name == f.store)
                    .map(|s| s.records)
                    .sum(),
            );
        }
    }
    if !report.tables.is_empty() {
        progress("checking the tables again");
        let names: BTreeSet<String> = report
            .tables
            .iter()
            .map(|t| t.incident.table.clone())
            .collect();
        let again = find_in(ws, key, Some(&names)).await?;
        for t in &mut report.tables {
            t.found_again = Some(
                again
                    .iter()
                    .filter(|f| {
                        f.incident.table == t.incident.table
                            && f.incident.column == t.incident.column
                    })
                    .map(|f| f.incident.rows)
                    .sum(),
            );
        }
    }
    Ok(())
}
