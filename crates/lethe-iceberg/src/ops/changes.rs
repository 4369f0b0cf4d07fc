//! The rows that differ between an earlier snapshot of a table and its current one.
//!
//! A copy-on-write table changes by whole data files: a commit removes files and adds others
//! (a rewritten file's kept rows, new rows). The rows that differ are the symmetric multiset
//! difference of the rows of the files only the earlier snapshot has and the rows of the files
//! only the current one has: a deleted row is in a removed file and in no added one, a
//! rewritten row is there in its old form and in an added file in its new form, a row a
//! rewrite only moved cancels out. Only those files are read (the rest of the table is not).
//!
//! Not answered (the caller gets the reason): the earlier snapshot is no longer kept, or
//! either snapshot has delete files (merge-on-read: rows disappear without their file
//! changing), or a column's type can't be compared row by row.

use std::collections::{HashMap, HashSet};

use arrow::array::{RecordBatch, UInt32Array};
use arrow::row::{RowConverter, Rows, SortField};
use iceberg::spec::Schema;

use crate::error::Result;
use crate::read::read_data_file;
use crate::table::{LoadedTable, TrackedFile, Warehouse};

/// What [`changed_rows`] found.
#[derive(Debug)]
pub enum Changes {
    /// Every row that differs (removed, added, or a row's old and new form), once each, in
    /// the table's current schema.
    Rows(Vec<RecordBatch>),
    /// Why the difference can't be told from data files.
    Unknown(String),
}

/// The rows that differ between snapshot `from` of `table` and its current snapshot, as seen
/// through the top-level columns `columns` of the current schema alone (only they are read:
/// rows that differ only in other columns cancel out, as a reader of those columns can't tell
/// them apart).
pub async fn changed_rows(
    wh: &Warehouse,
    table: &LoadedTable,
    from: i64,
    columns: &[String],
) -> Result<Changes> {
    let name = &table.name;
    let Some(old) = table.metadata.snapshot_by_id(from) else {
        return Ok(Changes::Unknown(format!(
            "snapshot {from} of {name} is no longer kept"
        )));
    };
    let old_files = wh.live_files(table, old).await?;
    let new_files = wh.current_files(table).await?;
    if old_files.iter().chain(&new_files).any(|f| !f.is_data()) {
        return Ok(Changes::Unknown(format!(
            "{name} has delete files (merge-on-read): its changes are not whole files"
        )));
    }
    let paths = |files: &[TrackedFile]| -> Result<HashSet<String>> {
        files
            .iter()
            .map(|f| wh.store.normalize(f.entry.data_file.file_path()))
            .collect()
    };
    let (before, now) = (paths(&old_files)?, paths(&new_files)?);
    let seen = Schema::builder()
        .with_fields(
            table
                .metadata
                .current_schema()
                .as_struct()
                .fields()
                .iter()
                .filter(|f| columns.contains(&f.name))
                .cloned(),
        )
        .build()?;
    let mut batches: Vec<(i64, RecordBatch)> = Vec::new();
    for (files, other, sign) in [(&old_files, &now, 1i64), (&new_files, &before, -1)] {
        for f in files {
            let path = f.entry.data_file.file_path();
            if other.contains(&wh.store.normalize(path)?) {
                continue;
            }
            for b in read_data_file(wh.store.as_ref(), path, &seen)? {
                batches.push((sign, b));
            }
        }
    }
    let Some((_, first)) = batches.first() else {
        return Ok(Changes::Rows(Vec::new()));
    };
    let fields = first
        .schema()
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    let converter = match RowConverter::new(fields) {
        Ok(c) => c,
        Err(e) => {
            return Ok(Changes::Unknown(format!(
                "the rows of {name} can't be compared: {e}"
            )));
        }
    };
    // Per distinct row (its encoded bytes, borrowed from the converted batches): removed
    // minus added copies, and where its first copy is.
    let converted: Vec<Rows> = batches
        .iter()
        .map(|(_, b)| converter.convert_columns(b.columns()))
        .collect::<std::result::Result<_, _>>()?;
    let total: usize = converted.iter().map(Rows::num_rows).sum();
    let mut count: HashMap<&[u8], (i64, usize, u32), foldhash::fast::FixedState> =
        HashMap::with_capacity_and_hasher(total, Default::default());
    for (bi, ((sign, _), rows)) in batches.iter().zip(&converted).enumerate() {
        for (ri, row) in rows.iter().enumerate() {
            count.entry(row.data()).or_insert((0, bi, ri as u32)).0 += sign;
        }
    }
    let mut picked: Vec<Vec<u32>> = vec![Vec::new(); batches.len()];
    for (n, bi, ri) in count.into_values() {
        if n != 0 {
            picked[bi].push(ri);
        }
    }
    let mut out = Vec::new();
    for ((_, b), mut rows) in batches.iter().zip(picked) {
        if rows.is_empty() {
            continue;
        }
        rows.sort_unstable();
        out.push(arrow::compute::take_record_batch(
            b,
            &UInt32Array::from(rows),
        )?);
    }
    Ok(Changes::Rows(out))
}
