//! Every live row of any snapshot a table keeps, read whole: no predicate, no pruning by
//! partitions, statistics, bloom filters or page indexes.
//!
//! This is the reader an independent check uses (the erasure's logical check counts the
//! subject's rows with it): the rows an erasure deletes are selected by typed predicates and
//! found with as little reading as the files' statistics allow ([`crate::prune`],
//! [`crate::ops::rewrite::select_rows`]); a check that went through the same predicates and
//! pruning would share their blind spots. Here every data file of the snapshot is read, only
//! the columns asked for are decoded, and the delete files that apply to each (position
//! deletes, equality deletes, deletion vectors) are applied as for any read.
//!
//! Rows are read in the table's current schema, matched by field id: time travel to an older
//! snapshot reads its files the same way (a column renamed since is read under its new name).
//! Guarantees: a row is returned exactly when a reader of that snapshot sees it. Not
//! answered: tables whose delete files lethe can't apply
//! ([`crate::deletes::check_supported`]) — an error, never a partial count.

use std::collections::HashMap;

use arrow::array::RecordBatch;
use arrow::compute;
use iceberg::spec::{DataContentType, Schema, Snapshot};

use crate::deletes::{DeleteIndex, DeleteReader, check_supported};
use crate::error::{Error, Result};
use crate::read::read_data_file;
use crate::table::{LoadedTable, Warehouse};

/// The live rows of `snapshot` of `table`, with the top-level columns `columns` (a struct
/// field's path, `contact.email`, reads its top-level column) in the table's current schema,
/// in file order; an empty `columns` reads every column. Columns the schema lacks are an
/// error naming them.
///
/// Streamed: the files are read one after the other on a blocking thread, at most
/// [`BATCHES_AHEAD`] batches ahead of the caller, so a table is never held whole (the logical
/// check of a 100-million-row table held its identifier columns whole, and zeroing that much
/// fresh memory was a quarter of its time).
pub async fn snapshot_rows(
    wh: &Warehouse,
    table: &LoadedTable,
    snapshot: &Snapshot,
    columns: &[String],
) -> Result<SnapshotRows> {
    let files = wh.live_files(table, snapshot).await?;
    check_supported(table, &files)?;
    let mut specs = HashMap::new();
    for mf in wh.manifest_list(table, snapshot)?.entries() {
        specs.insert(mf.manifest_path.clone(), mf.partition_spec_id);
    }
    let index = DeleteIndex::new(&table.metadata, &files, specs);
    let full = table.metadata.current_schema().as_ref().clone();
    // Equality deletes compare columns of the current schema by position: read whole then.
    let equality = files
        .iter()
        .any(|f| f.entry.data_file.content_type() == DataContentType::EqualityDeletes);
    let read_schema = if equality || columns.is_empty() {
        full.clone()
    } else {
        projected(&full, columns, &table.name.to_string())?
    };
    let wanted = if equality && !columns.is_empty() {
        Some(projected(&full, columns, &table.name.to_string())?)
    } else {
        None
    };
    let store = wh.store.clone();
    let table = table.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<RecordBatch>(BATCHES_AHEAD);
    let reader = tokio::task::spawn_blocking(move || -> Result<()> {
        let mut reader = DeleteReader::new(store.as_ref(), &table)?;
        for f in files.iter().filter(|f| f.is_data()) {
            let path = f.entry.data_file.file_path();
            let batches = read_data_file(store.as_ref(), path, &read_schema)?;
            let applicable = index.for_data_file(f, store.as_ref());
            let live = reader.live_masks(&index, &applicable, path, &batches)?;
            for (i, b) in batches.into_iter().enumerate() {
                let b = match live.as_ref().and_then(|l| l.get(i)) {
                    Some(mask) => compute::filter_record_batch(&b, mask)?,
                    None => b,
                };
                if b.num_rows() == 0 {
                    continue;
                }
                let b = match &wanted {
                    Some(s) => project_names(&b, s)?,
                    None => b,
                };
                if tx.blocking_send(b).is_err() {
                    // The caller stopped reading.
                    return Ok(());
                }
            }
        }
        Ok(())
    });
    Ok(SnapshotRows {
        rx,
        reader: Some(reader),
    })
}

/// How many batches [`snapshot_rows`] reads ahead of its caller.
pub const BATCHES_AHEAD: usize = 4;

/// The batches of [`snapshot_rows`], in file order.
#[derive(Debug)]
pub struct SnapshotRows {
    rx: tokio::sync::mpsc::Receiver<RecordBatch>,
    reader: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl SnapshotRows {
    /// The next batch; None once every file was read. A read that failed (or whose thread
    /// ended without finishing) is an error here, after the batches it sent: the rows are
    /// never silently short.
    pub async fn next(&mut self) -> Option<Result<RecordBatch>> {
        if let Some(b) = self.rx.recv().await {
            return Some(Ok(b));
        }
        let reader = self.reader.take()?;
        match reader.await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(Err(e)),
            Err(e) => Some(Err(Error::Internal(format!("a snapshot read ended: {e}")))),
        }
    }
}

/// `schema` with only the top-level fields `columns` name (a dotted path by its first part),
/// each once, in the order first named, field ids kept: the schema of the batches
/// [`snapshot_rows`] returns for `columns`.
pub fn projected(schema: &Schema, columns: &[String], table: &str) -> Result<Schema> {
    let mut fields = Vec::new();
    for c in columns {
        let top = c.split('.').next().unwrap_or(c);
        let f = schema
            .as_struct()
            .fields()
            .iter()
            .find(|f| f.name == top)
            .ok_or_else(|| Error::invalid(format!("{table} has no column `{top}`")))?;
        if !fields
            .iter()
            .any(|x: &iceberg::spec::NestedFieldRef| x.id == f.id)
        {
            fields.push(f.clone());
        }
    }
    Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_fields(fields)
        .build()
        .map_err(|e| Error::Internal(format!("projecting {table}'s schema: {e}")))
}

/// The columns of `b` that `schema`'s fields name, in its order.
fn project_names(b: &RecordBatch, schema: &Schema) -> Result<RecordBatch> {
    let idx: Vec<usize> = schema
        .as_struct()
        .fields()
        .iter()
        .filter_map(|f| b.schema().index_of(&f.name).ok())
        .collect();
    Ok(b.project(&idx)?)
}
