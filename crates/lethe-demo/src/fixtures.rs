//! Test and benchmark fixtures: workspaces and tables as other engines leave them.
//!
//! Most warehouses lethe meets were written by Spark, Trino or Flink. These builders make the
//! same shapes with lethe's own code, so that tests and benchmarks need no other engine:
//! - [`init_workspace`]: a `lethe.toml`, governance files you give, a register key file;
//! - [`delete_by_position`]: a merge-on-read DELETE as Trino writes it by default — one
//!   position delete file per partition naming the deleted rows' positions (optionally with
//!   the deleted `row` itself), committed as a `delete` snapshot; data files untouched;
//! - [`delete_by_equality`] and [`upsert`]: an upsert as Flink writes it — an equality delete
//!   file holding the keys, with the new rows in the same snapshot;
//! - [`delete_by_vector`]: a merge-on-read DELETE on a format v3 table as Spark writes it —
//!   one deletion vector per data file (earlier deletes of the file merged in), all in one
//!   Puffin file;
//! - [`set_schema`]: a schema change (rename, add, drop — an added column may carry format v3
//!   `initial-default`/`write-default`) committed as Spark's `ALTER TABLE` does (a new schema
//!   made current; data files untouched).
//!
//! Format v1 and v3 tables come from [`lethe_iceberg::table::Warehouse::create_table`] with
//! `FormatVersion::V1`/`V3` and lethe's own appends, which write that version's manifests and
//! manifest lists (v3: with row lineage).
//! Nothing here is used by lethe's commands.

use std::collections::BTreeMap;
use std::path::Path;

use arrow::array::{Array, RecordBatch};
use arrow::compute;
use async_trait::async_trait;
use iceberg::spec::{DataFile, Operation, Schema, Struct};
use iceberg::{TableRequirement, TableUpdate};

use lethe::config::Config;
use lethe::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::commit::{ActionCommit, TableAction, commit};
use lethe_iceberg::deletes::{
    DeleteIndex, DeleteReader, write_equality_deletes, write_position_deletes,
};
use lethe_iceberg::deletion_vector::{NewVector, is_deletion_vector, write_deletion_vectors};
use lethe_iceberg::error::{Error, Result};
use lethe_iceberg::predicate::Predicate;
use lethe_iceberg::read::read_data_file;
use lethe_iceberg::snapshot::{SnapshotChanges, produce_written};
use lethe_iceberg::table::{LoadedTable, Warehouse};

/// The governance files of a fixture workspace (TOML text).
#[derive(Debug, Clone, Copy, Default)]
pub struct GovernanceFiles<'a> {
    /// `governance/metadata.toml`.
    pub metadata: &'a str,
    /// `governance/retention.toml`.
    pub retention: &'a str,
    /// `governance/subjects.toml`.
    pub subjects: &'a str,
}

/// Creates a workspace in `dir`: `lethe.toml` (SQLite catalog `catalog.db`, catalog name
/// `lethe`, warehouse folder `warehouse`), the governance files, and a register key in
/// `state/register.key` (mode 0600).
pub fn init_workspace(dir: &Path, files: GovernanceFiles<'_>) -> lethe::Result<Workspace> {
    let write = |p: &Path, text: &str| -> lethe::Result<()> {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| lethe::Error::io(parent.display().to_string(), e))?;
        }
        std::fs::write(p, text).map_err(|e| lethe::Error::io(p.display().to_string(), e))
    };
    for sub in ["governance", "pipelines", "lineage", "state", "warehouse"] {
        let p = dir.join(sub);
        std::fs::create_dir_all(&p).map_err(|e| lethe::Error::io(p.display().to_string(), e))?;
    }
    let config = dir.join(lethe::config::CONFIG_FILE);
    write(
        &config,
        &Config::render("lethe", "sqlite:catalog.db", "warehouse", &[]),
    )?;
    write(&dir.join("governance/metadata.toml"), files.metadata)?;
    write(&dir.join("governance/retention.toml"), files.retention)?;
    write(&dir.join("governance/subjects.toml"), files.subjects)?;
    lethe::keys::write_random_key(&dir.join("state/register.key"))?;
    Workspace::open(&Config::load(&config)?)
}

/// Files a fixture commit adds: (data files, delete files).
type Added = (Vec<DataFile>, Vec<DataFile>);

/// Commits the files `write` writes (called on each attempt with the table as loaded) as one
/// snapshot: `delete` when only delete files are added, `overwrite` otherwise.
struct AddFiles<F> {
    write: F,
    summary: BTreeMap<String, String>,
}

#[async_trait]
impl<F> TableAction for AddFiles<F>
where
    F: for<'t> FnMut(
            &'t Warehouse,
            &'t LoadedTable,
            Vec<lethe_iceberg::table::TrackedFile>,
        ) -> Result<Added>
        + Send,
{
    async fn plan(&mut self, wh: &Warehouse, table: &LoadedTable) -> Result<Option<ActionCommit>> {
        let files = wh.current_files(table).await?;
        let (data, deletes) = (self.write)(wh, table, files)?;
        if data.is_empty() && deletes.is_empty() {
            return Ok(None);
        }
        let mut changes = SnapshotChanges::new(if data.is_empty() {
            Operation::Delete
        } else {
            Operation::Overwrite
        });
        changes.added_data = data;
        changes.added_deletes = deletes;
        changes.summary = self.summary.clone();
        Ok(Some(produce_written(wh, table, changes).await?))
    }
}

/// Deletes the live rows `predicate` selects the way Trino's merge-on-read DELETE does: one
/// position delete file per partition, naming each row's data file and position (and, with
/// `store_rows`, holding the deleted row in the `row` column), committed as a `delete`
/// snapshot. Data files are not touched. Returns the snapshot, or None when nothing matched.
pub async fn delete_by_position(
    wh: &Warehouse,
    name: &TableName,
    predicate: &Predicate,
    store_rows: bool,
) -> Result<Option<i64>> {
    let predicate = predicate.clone();
    let mut action = AddFiles {
        write: move |wh: &Warehouse,
                     table: &LoadedTable,
                     files: Vec<lethe_iceberg::table::TrackedFile>| {
            let schema = table.metadata.current_schema().clone();
            predicate.check(&schema, &table.name.to_string())?;
            let index = DeleteIndex::load(wh, table, &files)?;
            let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
            // (spec id, partition) -> (positions, rows)
            type Group = (Vec<(String, i64)>, Vec<RecordBatch>);
            let mut groups: Vec<((i32, Struct), Group)> = Vec::new();
            for f in files.iter().filter(|f| f.is_data()) {
                let path = f.entry.data_file.file_path();
                let batches = read_data_file(wh.store.as_ref(), path, &schema)?;
                let applicable = index.for_data_file(f, wh.store.as_ref());
                let live = reader.live_masks(&index, &applicable, path, &batches)?;
                let key = (index.spec_id(f), f.entry.data_file.partition().clone());
                let slot = match groups.iter().position(|(k, _)| *k == key) {
                    Some(i) => i,
                    None => {
                        groups.push((key, (Vec::new(), Vec::new())));
                        groups.len() - 1
                    }
                };
                let mut offset = 0i64;
                for (i, b) in batches.iter().enumerate() {
                    let mut mask = predicate.evaluate(b)?;
                    if let Some(l) = live.as_ref().and_then(|l| l.get(i)) {
                        mask = compute::and(&mask, l)?;
                    }
                    for r in 0..b.num_rows() {
                        if mask.value(r) && mask.is_valid(r) {
                            groups[slot].1.0.push((path.to_string(), offset + r as i64));
                        }
                    }
                    if store_rows && mask.true_count() > 0 {
                        groups[slot]
                            .1
                            .1
                            .push(compute::filter_record_batch(b, &mask)?);
                    }
                    offset += b.num_rows() as i64;
                }
            }
            let mut out = Vec::new();
            for ((spec_id, partition), (positions, rows)) in groups {
                if positions.is_empty() {
                    continue;
                }
                let rows = if store_rows {
                    let target = lethe_iceberg::writer::arrow_schema(&schema)?;
                    Some(compute::concat_batches(&target, &rows)?)
                } else {
                    None
                };
                match write_position_deletes(
                    wh.store.as_ref(),
                    &table.metadata,
                    spec_id,
                    partition,
                    &positions,
                    rows.as_ref(),
                ) {
                    Ok(f) => out.push(f),
                    Err(e) => {
                        for f in &out {
                            let _ = wh.store.delete(f.file_path());
                        }
                        return Err(e);
                    }
                }
            }
            Ok((Vec::new(), out))
        },
        summary: BTreeMap::from([("fixture".to_string(), "position deletes".to_string())]),
    };
    Ok(commit(wh, name, &mut action)
        .await?
        .and_then(|c| c.snapshot_id))
}

/// Deletes the live rows `predicate` selects the way Spark's merge-on-read DELETE does on a
/// format v3 table: one deletion vector per data file holding such rows, holding every
/// position deleted in that file so far (the file's earlier vector and position deletes
/// merged in; the earlier vector is removed), all vectors in one new Puffin file, committed as
/// a `delete` snapshot. Data files are not touched. Returns the snapshot, or None when nothing
/// matched. Data files must be in the table's default partition spec.
pub async fn delete_by_vector(
    wh: &Warehouse,
    name: &TableName,
    predicate: &Predicate,
) -> Result<Option<i64>> {
    struct VectorDelete(Predicate);
    #[async_trait]
    impl TableAction for VectorDelete {
        async fn plan(
            &mut self,
            wh: &Warehouse,
            table: &LoadedTable,
        ) -> Result<Option<ActionCommit>> {
            let schema = table.metadata.current_schema().clone();
            self.0.check(&schema, &table.name.to_string())?;
            let files = wh.current_files(table).await?;
            let index = DeleteIndex::load(wh, table, &files)?;
            let mut reader = DeleteReader::new(wh.store.as_ref(), table)?;
            let mut vectors: Vec<NewVector> = Vec::new();
            let mut replaced: Vec<(String, i64)> = Vec::new();
            for f in files.iter().filter(|f| f.is_data()) {
                let path = f.entry.data_file.file_path();
                let spec_id = index.spec_id(f);
                if spec_id != table.metadata.default_partition_spec_id() {
                    return Err(Error::invalid(format!(
                        "{path} is in partition spec {spec_id}: deletion vector fixtures are written for the default spec"
                    )));
                }
                let batches = read_data_file(wh.store.as_ref(), path, &schema)?;
                let applicable = index.for_data_file(f, wh.store.as_ref());
                let live = reader.live_masks(&index, &applicable, path, &batches)?;
                let mut matched = Vec::new();
                let mut offset = 0u64;
                for (i, b) in batches.iter().enumerate() {
                    let mut mask = self.0.evaluate(b)?;
                    if let Some(l) = live.as_ref().and_then(|l| l.get(i)) {
                        mask = compute::and(&mask, l)?;
                    }
                    matched.extend(
                        (0..b.num_rows())
                            .filter(|r| mask.value(*r))
                            .map(|r| offset + r as u64),
                    );
                    offset += b.num_rows() as u64;
                }
                if matched.is_empty() {
                    continue;
                }
                let earlier = reader.deleted_positions(&index, &applicable, path)?;
                for i in &applicable {
                    let d = &index.deletes()[*i].entry.data_file;
                    if let (true, Some(o)) = (is_deletion_vector(d), d.content_offset()) {
                        replaced.push((d.file_path().to_string(), o));
                    }
                }
                vectors.push(NewVector {
                    data_file: path.to_string(),
                    partition: f.entry.data_file.partition().clone(),
                    spec_id,
                    positions: earlier.into_iter().chain(matched).collect(),
                });
            }
            let added =
                write_deletion_vectors(wh.store.as_ref(), table.location(), &vectors).await?;
            if added.is_empty() {
                return Ok(None);
            }
            let mut changes = SnapshotChanges::new(Operation::Delete);
            changes.added_deletes = added;
            changes.removed_vectors = replaced.into_iter().collect();
            changes.summary =
                BTreeMap::from([("fixture".to_string(), "deletion vectors".to_string())]);
            Ok(Some(produce_written(wh, table, changes).await?))
        }
    }
    Ok(commit(wh, name, &mut VectorDelete(predicate.clone()))
        .await?
        .and_then(|c| c.snapshot_id))
}

/// Deletes by key the way Flink's upsert sink does: an equality delete file holding `keys`
/// (columns named `columns`, top-level columns of the current schema), committed as a
/// `delete` snapshot. It applies to every data file written before it. Only for tables whose
/// default partition spec is unpartitioned (a partitioned table needs one file per partition).
pub async fn delete_by_equality(
    wh: &Warehouse,
    name: &TableName,
    columns: &[&str],
    keys: &RecordBatch,
) -> Result<Option<i64>> {
    upsert(wh, name, columns, keys, None).await
}

/// An upsert as Flink writes it in one checkpoint: an equality delete file holding the keys of
/// `rows` (or `keys`, when `rows` is None) and a data file with `rows`, in one `overwrite`
/// snapshot. The delete file has the same sequence number as the new rows, so it deletes
/// only older rows with those keys. Unpartitioned tables only.
pub async fn upsert(
    wh: &Warehouse,
    name: &TableName,
    columns: &[&str],
    keys: &RecordBatch,
    rows: Option<&RecordBatch>,
) -> Result<Option<i64>> {
    let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    let keys = keys.clone();
    let rows = rows.cloned();
    let mut action = AddFiles {
        write: move |wh: &Warehouse,
                     table: &LoadedTable,
                     _files: Vec<lethe_iceberg::table::TrackedFile>| {
            let spec = table.metadata.default_partition_spec();
            if !spec.is_unpartitioned() {
                return Err(Error::invalid(format!(
                    "{}: equality delete fixtures are written for unpartitioned tables only",
                    table.name
                )));
            }
            if keys.num_rows() == 0 {
                return Ok((Vec::new(), Vec::new()));
            }
            let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
            let deletes = vec![write_equality_deletes(
                wh.store.as_ref(),
                &table.metadata,
                spec.spec_id(),
                Struct::empty(),
                &cols,
                &keys,
            )?];
            let data = match &rows {
                None => Vec::new(),
                Some(r) => {
                    let schema = table.metadata.current_schema();
                    let target = lethe_iceberg::writer::arrow_schema(schema)?;
                    let aligned = lethe_iceberg::writer::align_batch(r, schema, &target)?;
                    match lethe_iceberg::writer::write_batches(
                        wh.store.as_ref(),
                        &table.metadata,
                        &[aligned],
                        lethe_iceberg::writer::WriteOptions::default(),
                    ) {
                        Ok(d) => d,
                        Err(e) => {
                            let _ = wh.store.delete(deletes[0].file_path());
                            return Err(e);
                        }
                    }
                }
            };
            Ok((data, deletes))
        },
        summary: BTreeMap::from([("fixture".to_string(), "equality deletes".to_string())]),
    };
    Ok(commit(wh, name, &mut action)
        .await?
        .and_then(|c| c.snapshot_id))
}

/// Makes `schema` the table's current schema (a rename, an added or a dropped column, as
/// `ALTER TABLE` does): field ids must be kept for columns that stay, and new columns need ids
/// above the table's last column id. Data files are not touched.
pub async fn set_schema(wh: &Warehouse, name: &TableName, schema: Schema) -> Result<()> {
    struct SetSchema(Schema);
    #[async_trait]
    impl TableAction for SetSchema {
        async fn plan(
            &mut self,
            _wh: &Warehouse,
            table: &LoadedTable,
        ) -> Result<Option<ActionCommit>> {
            Ok(Some(ActionCommit {
                updates: vec![
                    TableUpdate::AddSchema {
                        schema: self.0.clone(),
                    },
                    TableUpdate::SetCurrentSchema { schema_id: -1 },
                ],
                requirements: vec![
                    TableRequirement::UuidMatch {
                        uuid: table.metadata.uuid(),
                    },
                    TableRequirement::CurrentSchemaIdMatch {
                        current_schema_id: table.metadata.current_schema_id(),
                    },
                ],
                ..Default::default()
            }))
        }
    }
    commit(wh, name, &mut SetSchema(schema)).await?;
    Ok(())
}

/// The table's current schema with column `from` renamed to `to` (same field id).
pub fn renamed(schema: &Schema, from: &str, to: &str) -> Result<Schema> {
    let mut found = false;
    let fields: Vec<_> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            if f.name == from {
                found = true;
                let mut g = f.as_ref().clone();
                g.name = to.to_string();
                std::sync::Arc::new(g)
            } else {
                f.clone()
            }
        })
        .collect();
    if !found {
        return Err(Error::invalid(format!("no column `{from}` to rename")));
    }
    let ids: Vec<i32> = schema.identifier_field_ids().collect();
    Ok(Schema::builder()
        .with_schema_id(schema.schema_id() + 1)
        .with_identifier_field_ids(ids)
        .with_fields(fields)
        .build()?)
}
