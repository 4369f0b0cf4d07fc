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
    literals: Fast<String, BTreeSet<usize>>,
    lens: Vec<usize>,
}

impl DerivedMatch {
    fn new(d: &DerivedColumn, sources: &[(String, usize)]) -> DerivedMatch {
        let mut literals: Fast<String, BTreeSet<usize>> = Fast::default();
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

/// The rows of a batch that address a subject, as (row, request) pairs — each request (case
/// index) a row addresses, once, sorted by row then request; and per column, the rows it
/// addresses. Sparse: most rows of a table address none of a batch's subjects.
type Owners = (Vec<(usize, usize)>, BTreeMap<String, u64>);

/// A hash map keyed by values read from tables: hashed with foldhash (SipHash was a tenth of
/// the check's time), seeded per process.
type Fast<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// How one table addresses the subjects: exact values by column, and derived identifiers.
#[derive(Default)]
struct TableAddressing {
    exact: BTreeMap<String, Fast<String, BTreeSet<usize>>>,
    /// The exact values that are integers in canonical form (what an integer column's value
    /// reads as text), by column: an integer column is matched against these without turning
    /// each of its values into text ([`TableAddressing::index_integers`]).
    integers: BTreeMap<String, Fast<i64, BTreeSet<usize>>>,
    derived: Vec<DerivedMatch>,
}

/// An integer column's values as 64-bit integers (a narrower integer type widened), or None
/// for any other type (matched as text).
fn integer_values(c: &arrow::array::ArrayRef) -> Option<arrow::array::Int64Array> {
    use arrow::datatypes::DataType as D;
    match c.data_type() {
        D::Int64 | D::Int32 | D::Int16 | D::Int8 | D::UInt32 | D::UInt16 | D::UInt8 => {
            let wide = arrow::compute::cast(c, &D::Int64).ok()?;
            Some(wide.as_primitive::<arrow::datatypes::Int64Type>().clone())
        }
        _ => None,
    }
}

impl TableAddressing {
    /// Indexes the exact values that read as integers, so [`TableAddressing::owners`] matches
    /// an integer column by number. The same rows as matching its values cast to text: an
    /// integer's text is its canonical decimal form, so only values in that form can match
    /// (`"007"` or `"+7"` never equal a number's text, and are left out here as there).
    fn index_integers(&mut self) {
        self.integers = self
            .exact
            .iter()
            .map(|(column, values)| {
                let ints = values
                    .iter()
                    .filter_map(|(v, o)| {
                        let n = v.parse::<i64>().ok()?;
                        (n.to_string() == *v).then(|| (n, o.clone()))
                    })
                    .collect();
                (column.clone(), ints)
            })
            .collect();
    }

    fn columns(&self) -> Vec<String> {
        let mut c: Vec<String> = self.exact.keys().cloned().collect();
        for d in &self.derived {
            if !c.contains(&d.column) {
                c.push(d.column.clone());
            }
        }
        c
    }

    /// The rows of `b` that address a subject, with the requests each addresses; and per
    /// column, the rows it addresses.
    fn owners(&self, b: &RecordBatch) -> Result<Owners> {
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        let mut by_column: BTreeMap<String, u64> = BTreeMap::new();
        let mut found = |column: &str, i: usize, o: &BTreeSet<usize>| {
            pairs.extend(o.iter().map(|o| (i, *o)));
            *by_column.entry(column.to_string()).or_default() += 1;
        };
        let text = |column: &str| -> Result<arrow::array::ArrayRef> {
            let c = column_array(b, column)
                .ok_or_else(|| Error::Internal(format!("no column `{column}` in rows read")))?;
            Ok(arrow::compute::cast(&c, &DataType::Utf8)?)
        };
        for (column, values) in &self.exact {
            if let Some(ints) = self.integers.get(column)
                && let Some(c) = column_array(b, column)
                && let Some(c) = integer_values(&c)
            {
                for (i, v) in c.iter().enumerate() {
                    if let Some(o) = v.and_then(|v| ints.get(&v)) {
                        found(column, i, o);
                    }
                }
                continue;
            }
            let c = text(column)?;
            for (i, v) in c.as_string::<i32>().iter().enumerate() {
                if let Some(o) = v.and_then(|v| values.get(v)) {
                    found(column, i, o);
                }
            }
        }
        for d in &self.derived {
            let c = text(&d.column)?;
            for (i, v) in c.as_string::<i32>().iter().enumerate() {
                if let Some(o) = v.and_then(|v| d.owners(v)) {
                    found(&d.column, i, o);
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        Ok((pairs, by_column))
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
    for t in out.values_mut() {
        t.index_integers();
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
        let mut per_request = vec![0u64; cases.len()];
        let mut batches = snapshot_rows(wh, &t, &s, &read).await?;
        while let Some(b) = batches.next().await {
            let b = b?;
            let (pairs, by_column) = a.owners(&b)?;
            for (col, n) in by_column {
                *count.by_column.entry(col).or_default() += n;
            }
            let mut addressed: Vec<usize> = pairs.iter().map(|(row, _)| *row).collect();
            addressed.dedup();
            count.rows += addressed.len() as u64;
            for (_, o) in &pairs {
                per_request[*o] += 1;
            }
            for ec in &c.erase_columns {
                let n = path_value_counts(&b, &schema, ec)
                    .map_err(|e| Error::invalid(format!("{}: {e}", c.table)))?;
                count.values_not_erased += addressed.iter().map(|i| n[*i]).sum::<u64>();
            }
        }
        for (case, n) in cases.iter().zip(per_request) {
            if n > 0 {
                *count.by_request.entry(case.request.clone()).or_default() += n;
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
            .into_iter()
            .collect(),
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
        let want = vec![(0, 0), (1, 0), (3, 1), (4, 1)];
        assert_eq!(rows, want, "a-113#1 is not customer 11's");
        assert_eq!(by_column["customer_id"], 2);
        assert_eq!(by_column["session_id"], 2);
        assert_eq!(by_column["id_md5"], 1);
        // Matched by number once indexed: the same rows.
        a.index_integers();
        assert_eq!(a.owners(&b).unwrap(), (rows, by_column));
    }

    #[test]
    fn an_integer_column_matches_as_its_text_would_by_number() {
        use arrow::array::{Int32Array, UInt8Array};
        let b = RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(Int64Array::from(vec![
                    Some(7),
                    Some(-3),
                    None,
                    Some(42),
                    Some(i64::MAX),
                ])) as ArrayRef,
            ),
            (
                "small",
                Arc::new(Int32Array::from(vec![
                    Some(7),
                    Some(8),
                    Some(9),
                    None,
                    Some(42),
                ])) as ArrayRef,
            ),
            (
                "tiny",
                Arc::new(UInt8Array::from(vec![
                    Some(255),
                    None,
                    Some(7),
                    Some(0),
                    Some(1),
                ])) as ArrayRef,
            ),
            (
                "name",
                Arc::new(StringArray::from(vec![
                    Some("7"),
                    Some("007"),
                    None,
                    Some("x"),
                    Some("42"),
                ])) as ArrayRef,
            ),
        ])
        .unwrap();
        let mut a = TableAddressing::default();
        // Values as a case file holds them: text; "007", "+42" and " 7" are not what any
        // integer reads as, "-3" and i64::MAX are.
        let values = |vs: &[(&str, usize)]| -> Fast<String, BTreeSet<usize>> {
            vs.iter()
                .map(|(v, o)| (v.to_string(), [*o].into()))
                .collect()
        };
        let max = i64::MAX.to_string();
        let set = values(&[
            ("7", 0),
            ("007", 1),
            ("+42", 2),
            ("-3", 3),
            (max.as_str(), 4),
            (" 7", 5),
            ("255", 6),
        ]);
        for c in ["id", "small", "tiny", "name"] {
            a.exact.insert(c.into(), set.clone());
        }
        let by_text = a.owners(&b).unwrap();
        a.index_integers();
        assert_eq!(a.integers["id"].len(), 4, "7, -3, i64::MAX and 255");
        let by_number = a.owners(&b).unwrap();
        assert_eq!(by_number, by_text);
        let want = vec![
            (0, 0), // id 7, small 7, name "7"
            (0, 6), // tiny 255
            (1, 1), // name "007"
            (1, 3), // id -3
            (2, 0), // tiny 7
            (4, 4), // id i64::MAX; "+42" matches neither 42 nor "42"
        ];
        assert_eq!(by_number.0, want);
    }
}
