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

use std::collections::{BTreeMap, BTreeSet};

use chrono::Duration;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::ops::rewrite::{RowRewrite, rewrite_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use serde::Serialize;

use crate::erasure::register::{Incident, Register, RegisterKey, by_subject, find};
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
    /// Records found (and deleted unless a dry run).
    pub records: u64,
    /// The requests they were erased by.
    pub requests: Vec<String>,
}

/// What a replay found and did.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// Rows of erased subjects per table and column.
    pub tables: Vec<Incident>,
    /// Records of erased subjects per store.
    pub stores: Vec<StoreFinding>,
    /// Stores that can't be matched against the register, with why.
    pub not_replayable: Vec<(String, String)>,
    /// Tables cleaned up after the deletes.
    pub cleaned_up: Vec<String>,
    /// True for a dry run.
    pub dry_run: bool,
}

impl ReplayReport {
    /// True when nothing of an erased subject was found.
    pub fn found_nothing(&self) -> bool {
        self.tables.is_empty() && self.stores.is_empty()
    }
}

/// Values of erased subjects held by one store: value -> request.
struct InStore {
    name: String,
    before_warehouse: bool,
    values: BTreeMap<String, String>,
}

/// Stores holding erased subjects, and the stores that can't be matched.
async fn find_in_stores(
    ws: &Workspace,
    key: &RegisterKey,
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
        if !c.deletable() || !c.probed() {
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
            found.push(InStore {
                name: name.clone(),
                before_warehouse: before,
                values: hit,
            });
        }
    }
    Ok((found, skipped))
}

/// Store incidents for `lethe register check`: records of erased subjects in registered stores.
pub async fn check_stores(ws: &Workspace, key: &RegisterKey) -> Result<Vec<StoreFinding>> {
    let (found, _) = find_in_stores(ws, key).await?;
    Ok(found.iter().map(finding).collect())
}

fn finding(s: &InStore) -> StoreFinding {
    StoreFinding {
        store: s.name.clone(),
        records: s.values.len() as u64,
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
    let subjects: Vec<StoreSubject> = s
        .values
        .iter()
        .map(|(v, r)| StoreSubject {
            request: r.clone(),
            values: vec![v.clone()],
            traces: Vec::new(),
        })
        .collect();
    let d = store.delete(&subjects).await?;
    Ok(d.records.iter().sum())
}

/// Finds every erased subject the register names, in tables and stores, and (unless a dry run)
/// deletes them again, cleaning up the tables changed.
pub async fn replay(
    ws: &Workspace,
    key: &RegisterKey,
    opts: &ReplayOptions,
    progress: &dyn Fn(&str),
) -> Result<ReplayReport> {
    progress("hashing identifiers in the stores");
    let (in_stores, not_replayable) = find_in_stores(ws, key).await?;
    let mut report = ReplayReport {
        tables: Vec::new(),
        stores: Vec::new(),
        not_replayable,
        cleaned_up: Vec::new(),
        dry_run: opts.dry_run,
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
        report.tables.push(f.incident.clone());
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
        crate::erasure::erase::cleanup::clean_tables(ws, &changed, "replay", min_age, progress)
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
    Ok(report)
}
