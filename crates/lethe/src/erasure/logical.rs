//! The logical check: how many rows of each planned table still address the subject, in
//! every snapshot the table keeps — counted by a path that shares nothing with the plan's
//! selection.
//!
//! The erasure deletes the rows its plan selects: typed predicates over the plan's columns,
//! found with as little reading as the files' statistics allow. A check made by the same
//! selection would share its blind spots (a column the plan didn't select by, a value the
//! predicate didn't match, a file the pruning skipped), so this one:
//! - reads every data file of every snapshot the table keeps (the current one, the ones refs
//!   point at, the ones its retention keeps: every snapshot still in its metadata, all of
//!   which a reader can time-travel to) whole, with delete files applied
//!   ([`lethe_iceberg::snapshot_read`]), no predicate and no pruning;
//! - matches every column that addresses the subject in the table — each column the case file
//!   recorded for it before anything was deleted (root, mapped and derived identifiers,
//!   lineage copies, keys of rows the subject owns) by its exact values as text, and every
//!   derived identifier `metadata.toml` declares on the table by its pattern or transform
//!   recomputed from the subject's root and mapped values (so a value the preparation never
//!   saw, such as a session started since, is still found);
//! - counts per snapshot the rows that any column addresses, per column, per request, and for
//!   a table kept under a legal exception (REWRITE) the values of its erased columns still
//!   present in those rows.
//!
//! The attestation's logical verdict is built from these counts, and an erasure compares its
//! own count of the rows it deleted with this check's count before it
//! ([`crate::erasure::erase`]). Counts, table names, snapshot IDs and column names only: never
//! a value.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use serde::{Deserialize, Serialize};

use crate::erasure::case::CaseFile;
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::identifiers::{
    DerivedColumn, Shape, column_array, declared, derived_sources, path_value_counts,
};
use crate::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::snapshot_read::snapshot_rows;

/// Which snapshots of a table the check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snapshots {
    /// The current snapshot only (before an erasure: what it is about to delete).
    Current,
    /// Every snapshot the table keeps.
    Kept,
}

/// A table to check, and the columns a legal exception erases there (REWRITE).
#[derive(Debug, Clone)]
pub struct Checked {
    /// The table.
    pub table: String,
    /// REWRITE: the columns whose values must be gone from the subject's rows.
    pub erase_columns: Vec<String>,
}

/// Every DELETE, REWRITE and RECOMPUTE table `journal`'s erasure carried out (not held), with
/// the columns a REWRITE erases: what the check reads after an erasure.
pub fn carried_out(journal: &crate::erasure::erase::Journal) -> Vec<Checked> {
    use crate::erasure::plan::Action;
    journal
        .steps
        .iter()
        .filter(|s| {
            !s.is_held()
                && matches!(
                    s.action,
                    Action::Delete | Action::Rewrite | Action::Recompute
                )
        })
        .map(|s| Checked {
            table: s.table.clone(),
            erase_columns: s.erase_columns.clone(),
        })
        .collect()
}

/// What the check found in one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotCount {
    /// The snapshot.
    pub snapshot_id: i64,
    /// Whether it is the table's current snapshot.
    pub current: bool,
    /// The refs (branches, tags) pointing at it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
    /// Rows that address a subject (any column).
    pub rows: u64,
    /// Rows per addressing column (a row addressed by two columns counts in both).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_column: BTreeMap<String, u64>,
    /// Rows per request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_request: BTreeMap<String, u64>,
    /// REWRITE: values of the erased columns still present in those rows.
    #[serde(default)]
    pub values_not_erased: u64,
}

/// What the check found in one table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableCount {
    /// The table.
    pub table: String,
    /// The columns it matched by.
    pub columns: Vec<String>,
    /// Every snapshot read, the current one first.
    pub snapshots: Vec<SnapshotCount>,
}

impl TableCount {
    /// The current snapshot's count, if the table has one.
    pub fn current(&self) -> Option<&SnapshotCount> {
        self.snapshots.iter().find(|s| s.current)
    }

    /// Rows of `request` in the current snapshot.
    pub fn current_rows(&self, request: &str) -> u64 {
        self.current()
            .and_then(|s| s.by_request.get(request))
            .copied()
            .unwrap_or(0)
    }
}

/// A derived identifier matched by its literal parts: each literal (the source value derived)
/// with the requests it belongs to, and the distinct literal lengths to look a value up by.
struct DerivedMatch {
    column: String,
    shape: Shape,
    literals: HashMap<String, BTreeSet<usize>>,
    lens: Vec<usize>,
}

impl DerivedMatch {
    fn new(d: &DerivedColumn, sources: &[(String, usize)]) -> DerivedMatch {
        let mut literals: HashMap<String, BTreeSet<usize>> = HashMap::new();
        let mut lens = Vec::new();
        for (id, owner) in sources {
            let lit = d.literal(id);
            if !lens.contains(&lit.len()) {
                lens.push(lit.len());
            }
            literals.entry(lit).or_default().insert(*owner);
        }
        DerivedMatch {
            column: d.column.clone(),
            shape: d.pattern.shape,
            literals,
            lens,
        }
    }

    /// The requests whose literal `v` holds in this pattern's shape.
    fn owners(&self, v: &str) -> Option<&BTreeSet<usize>> {
        self.lens.iter().find_map(|n| {
            let part = match self.shape {
                Shape::Exact => (v.len() == *n).then_some(v),
                Shape::Prefix => v.get(..*n),
                Shape::Suffix => v.len().checked_sub(*n).and_then(|k| v.get(k..)),
            }?;
            self.literals.get(part)
        })
    }
}

/// Per row of a batch, the requests (case indexes) it addresses; and per column, the rows it
/// addresses.
type Owners = (Vec<BTreeSet<usize>>, BTreeMap<String, u64>);

/// How one table addresses the subjects: exact values by column, and derived identifiers.
#[derive(Default)]
struct TableAddressing {
    exact: BTreeMap<String, HashMap<String, BTreeSet<usize>>>,
    derived: Vec<DerivedMatch>,
}

impl TableAddressing {
    fn columns(&self) -> Vec<String> {
        let mut c: Vec<String> = self.exact.keys().cloned().collect();
        for d in &self.derived {
            if !c.contains(&d.column) {
                c.push(d.column.clone());
            }
        }
        c
    }

    /// Per row of `b`, the requests it addresses; and per column, the rows it addresses.
    fn owners(&self, b: &RecordBatch) -> Result<Owners> {
        let mut rows: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); b.num_rows()];
        let mut by_column: BTreeMap<String, u64> = BTreeMap::new();
        let text = |column: &str| -> Result<arrow::array::ArrayRef> {
            let c = column_array(b, column)
                .ok_or_else(|| Error::Internal(format!("no column `{column}` in rows read")))?;
            Ok(arrow::compute::cast(&c, &DataType::Utf8)?)
        };
        for (column, values) in &self.exact {
            let c = text(column)?;
            let s = c.as_string::<i32>();
            for (i, row) in rows.iter_mut().enumerate() {
                if let Some(o) = s.is_valid(i).then(|| values.get(s.value(i))).flatten() {
                    row.extend(o.iter().copied());
                    *by_column.entry(column.clone()).or_default() += 1;
                }
            }
        }
        for d in &self.derived {
            let c = text(&d.column)?;
            let s = c.as_string::<i32>();
            for (i, row) in rows.iter_mut().enumerate() {
                if let Some(o) = s.is_valid(i).then(|| d.owners(s.value(i))).flatten() {
                    row.extend(o.iter().copied());
                    *by_column.entry(d.column.clone()).or_default() += 1;
                }
            }
        }
        Ok((rows, by_column))
    }
}

/// The addressing of every table for `cases` (requests of one subject kind): the columns
/// each case file recorded per table, and the derived identifiers `metadata.toml` declares.
fn addressing(
    gov: &Governance,
    subject: &str,
    cases: &[CaseFile],
) -> Result<BTreeMap<String, TableAddressing>> {
    let mut out: BTreeMap<String, TableAddressing> = BTreeMap::new();
    for (i, c) in cases.iter().enumerate() {
        for (table, cols) in &c.addressing {
            let t = out.entry(table.clone()).or_default();
            for (col, values) in cols {
                let m = t.exact.entry(col.clone()).or_default();
                for v in values {
                    m.entry(v.clone()).or_default().insert(i);
                }
            }
        }
    }
    let def = gov.subjects.get(subject)?;
    for d in declared(gov, subject, &derived_sources(def)?)? {
        let sources: Vec<(String, usize)> = cases
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                c.ids
                    .get(&d.from)
                    .into_iter()
                    .flatten()
                    .map(move |v| (v.clone(), i))
            })
            .collect();
        if sources.is_empty() {
            continue;
        }
        out.entry(d.table.clone())
            .or_default()
            .derived
            .push(DerivedMatch::new(&d, &sources));
    }
    Ok(out)
}

/// Counts, in `which` snapshots of each of `tables`, the rows that address a subject of
/// `cases` (all of one subject kind, `subject`). A table with no addressing column is
/// reported with no snapshot read.
pub async fn check(
    ws: &Workspace,
    gov: &Governance,
    subject: &str,
    cases: &[CaseFile],
    tables: &[Checked],
    which: Snapshots,
) -> Result<Vec<TableCount>> {
    use futures::StreamExt;
    let by_table = addressing(gov, subject, cases)?;
    // The tables are read side by side, as many at once as the machine has cores: each read
    // decodes its files on a blocking thread of its own.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let by_table = &by_table;
    futures::stream::iter(tables)
        .map(|c| async move {
            match by_table.get(&c.table) {
                Some(a) => check_table(ws, cases, c, a, which).await,
                None => Ok(TableCount {
                    table: c.table.clone(),
                    ..Default::default()
                }),
            }
        })
        .buffered(cores)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

async fn check_table(
    ws: &Workspace,
    cases: &[CaseFile],
    c: &Checked,
    a: &TableAddressing,
    which: Snapshots,
) -> Result<TableCount> {
    let wh = &ws.warehouse;
    let t = wh.load(&TableName::parse(&c.table)?).await?;
    let columns = a.columns();
    let mut read: Vec<String> = columns.clone();
    read.extend(c.erase_columns.iter().cloned());
    let current = t.metadata.current_snapshot_id();
    let refs = lethe_iceberg::ops::expire::refs(&t);
    let mut snapshots: Vec<_> = match which {
        Snapshots::Current => t.current_snapshot().cloned().into_iter().collect(),
        Snapshots::Kept => t.metadata.snapshots().cloned().collect(),
    };
    snapshots.sort_by_key(|s| (Some(s.snapshot_id()) != current, s.snapshot_id()));
    let schema =
        lethe_iceberg::snapshot_read::projected(t.metadata.current_schema(), &read, &c.table)?;
    let mut out = TableCount {
        table: c.table.clone(),
        columns,
        snapshots: Vec::new(),
    };
    for s in snapshots {
        let mut count = SnapshotCount {
            snapshot_id: s.snapshot_id(),
            current: Some(s.snapshot_id()) == current,
            refs: refs
                .iter()
                .filter(|(_, r)| r.snapshot_id == s.snapshot_id())
                .map(|(n, _)| n.clone())
                .collect(),
            ..Default::default()
        };
        for b in snapshot_rows(wh, &t, &s, &read).await? {
            let (rows, by_column) = a.owners(&b)?;
            for (col, n) in by_column {
                *count.by_column.entry(col).or_default() += n;
            }
            let addressed: Vec<usize> =
                (0..b.num_rows()).filter(|i| !rows[*i].is_empty()).collect();
            count.rows += addressed.len() as u64;
            for i in &addressed {
                for o in &rows[*i] {
                    *count
                        .by_request
                        .entry(cases[*o].request.clone())
                        .or_default() += 1;
                }
            }
            for ec in &c.erase_columns {
                let n = path_value_counts(&b, &schema, ec)
                    .map_err(|e| Error::invalid(format!("{}: {e}", c.table)))?;
                count.values_not_erased += addressed.iter().map(|i| n[*i]).sum::<u64>();
            }
        }
        out.snapshots.push(count);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::identifiers::{Pattern, Transform, label};
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use std::sync::Arc;

    fn derived(column: &str, pattern: &str, transform: Option<Transform>) -> DerivedColumn {
        DerivedColumn {
            table: "t.t".into(),
            column: column.into(),
            from: "customer_id".into(),
            transform,
            pattern: Pattern::parse(pattern).unwrap(),
            label: label("t.t", column),
        }
    }

    #[test]
    fn every_addressing_column_finds_its_rows_nulls_in_the_others_notwithstanding() {
        let b = RecordBatch::try_from_iter(vec![
            (
                "customer_id",
                Arc::new(Int64Array::from(vec![Some(11), None, None, Some(7), None])) as ArrayRef,
            ),
            (
                "session_id",
                Arc::new(StringArray::from(vec![
                    Some("a-11#1"),
                    Some("a-11#2"),
                    Some("a-113#1"),
                    None,
                    None,
                ])) as ArrayRef,
            ),
            (
                "id_md5",
                Arc::new(StringArray::from(vec![
                    None,
                    None,
                    None,
                    None,
                    Some(Transform::Md5.apply("7").as_str()),
                ])) as ArrayRef,
            ),
        ])
        .unwrap();
        let mut a = TableAddressing::default();
        // Request 0 is customer 11, request 1 customer 7; customer_id by exact values.
        a.exact.insert(
            "customer_id".into(),
            [
                ("11".to_string(), [0].into()),
                ("7".to_string(), [1].into()),
            ]
            .into(),
        );
        a.derived.push(DerivedMatch::new(
            &derived("session_id", "a-{id}#*", None),
            &[("11".into(), 0), ("7".into(), 1)],
        ));
        a.derived.push(DerivedMatch::new(
            &derived("id_md5", "{id}", Some(Transform::Md5)),
            &[("11".into(), 0), ("7".into(), 1)],
        ));
        let (rows, by_column) = a.owners(&b).unwrap();
        let want: Vec<BTreeSet<usize>> =
            vec![[0].into(), [0].into(), [].into(), [1].into(), [1].into()];
        assert_eq!(rows, want, "a-113#1 is not customer 11's");
        assert_eq!(by_column["customer_id"], 2);
        assert_eq!(by_column["session_id"], 2);
        assert_eq!(by_column["id_md5"], 1);
    }
}
