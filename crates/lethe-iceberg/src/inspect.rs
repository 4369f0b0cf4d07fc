//! Looking inside: `lethe tables` and `lethe inspect TABLE`.

use std::collections::BTreeMap;

use iceberg::spec::{Datum, ManifestStatus, PrimitiveType, Type};
use serde::Serialize;

use crate::catalog::TableName;
use crate::error::{Error, Result};
use crate::ops::expire::refs;
use crate::table::Warehouse;

/// One line of `lethe tables`.
#[derive(Debug, Clone, Serialize)]
pub struct TableSummary {
    /// The table.
    pub table: String,
    /// Format version.
    pub format_version: u8,
    /// Live rows in the current snapshot, as an engine reads them: rows that delete files and
    /// deletion vectors hide are not counted. None when lethe can't read the table's delete
    /// files (then only `rows_stored` is known).
    pub rows: Option<u64>,
    /// Rows stored in the current snapshot's data files (the manifests' record counts, hidden
    /// rows included).
    pub rows_stored: u64,
    /// Live data files.
    pub data_files: usize,
    /// Live delete files.
    pub delete_files: usize,
    /// Snapshots in the metadata.
    pub snapshots: usize,
    /// Refs (branches and tags).
    pub refs: Vec<String>,
}

/// Summarises every table.
pub async fn tables(wh: &Warehouse) -> Result<Vec<TableSummary>> {
    let mut out = Vec::new();
    for name in wh.tables().await? {
        let t = wh.load(&name).await?;
        let files = wh.current_files(&t).await?;
        let rows = match crate::ops::rewrite::live_rows(wh, &t).await {
            Ok(n) => Some(n),
            Err(Error::Unsupported { .. }) => None,
            Err(e) => return Err(e),
        };
        out.push(TableSummary {
            table: name.to_string(),
            format_version: t.metadata.format_version() as u8,
            rows,
            rows_stored: files
                .iter()
                .filter(|f| f.is_data())
                .map(|f| f.entry.data_file.record_count())
                .sum(),
            data_files: files.iter().filter(|f| f.is_data()).count(),
            delete_files: files.iter().filter(|f| !f.is_data()).count(),
            snapshots: t.metadata.snapshots().len(),
            refs: refs(&t)
                .into_iter()
                .map(|(n, r)| format!("{n} ({})", if r.is_branch() { "branch" } else { "tag" }))
                .collect(),
        });
    }
    Ok(out)
}

/// A snapshot as `inspect` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotView {
    /// Id.
    pub snapshot_id: i64,
    /// Parent.
    pub parent_snapshot_id: Option<i64>,
    /// Sequence number.
    pub sequence_number: i64,
    /// Commit time (RFC 3339).
    pub committed_at: String,
    /// Operation.
    pub operation: String,
    /// Summary.
    pub summary: BTreeMap<String, String>,
    /// The manifest list.
    pub manifest_list: String,
}

/// A column's bounds in a manifest entry, readable.
#[derive(Debug, Clone, Serialize)]
pub struct BoundsView {
    /// Lower bound.
    pub lower: Option<String>,
    /// Upper bound.
    pub upper: Option<String>,
    /// Value count.
    pub values: Option<u64>,
    /// Null count.
    pub nulls: Option<u64>,
}

/// A manifest entry as `inspect` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct EntryView {
    /// The manifest.
    pub manifest: String,
    /// ADDED, EXISTING or DELETED.
    pub status: String,
    /// data, position_deletes, equality_deletes.
    pub content: String,
    /// The file.
    pub file: String,
    /// Rows.
    pub records: u64,
    /// Size.
    pub size: u64,
    /// Snapshot that added/deleted it.
    pub snapshot_id: Option<i64>,
    /// Partition values.
    pub partition: String,
    /// Bounds by column name.
    pub columns: BTreeMap<String, BoundsView>,
}

/// What `lethe inspect` shows.
#[derive(Debug, Clone, Serialize)]
pub struct TableView {
    /// The table.
    pub table: String,
    /// Its location.
    pub location: String,
    /// The current metadata file.
    pub metadata_location: String,
    /// Format version.
    pub format_version: u8,
    /// Schema: (id, name, type, required).
    pub schema: Vec<(i32, String, String, bool)>,
    /// Partition spec.
    pub partition_spec: String,
    /// Properties.
    pub properties: BTreeMap<String, String>,
    /// Refs: name -> (kind, snapshot).
    pub refs: BTreeMap<String, (String, i64)>,
    /// Snapshots, oldest first.
    pub snapshots: Vec<SnapshotView>,
    /// Metadata log length.
    pub metadata_log: usize,
    /// Entries of the current snapshot's manifests (DELETED ones included).
    pub entries: Vec<EntryView>,
}

/// A datum as text (numbers as numbers, strings as strings).
pub fn readable(d: &Datum) -> String {
    match d.data_type() {
        PrimitiveType::String => d.to_human_string().trim_matches('"').to_string(),
        _ => d.to_human_string(),
    }
}

/// Inspects one table.
pub async fn inspect(wh: &Warehouse, name: &TableName) -> Result<TableView> {
    let t = wh.load(name).await?;
    let meta = &t.metadata;
    let schema = meta.current_schema();
    let names: BTreeMap<i32, String> = crate::metrics::primitive_leaves(schema)
        .into_iter()
        .map(|(n, f)| (f.id, n))
        .collect();
    let mut entries = Vec::new();
    if let Some(s) = t.current_snapshot() {
        for mf in wh.manifest_list(&t, s)?.entries() {
            for e in wh.manifest_entries(mf).await? {
                let df = &e.data_file;
                let mut columns = BTreeMap::new();
                for (id, n) in &names {
                    let lower = df.lower_bounds().get(id).map(readable);
                    let upper = df.upper_bounds().get(id).map(readable);
                    let values = df.value_counts().get(id).copied();
                    let nulls = df.null_value_counts().get(id).copied();
                    if lower.is_some() || upper.is_some() || values.is_some() || nulls.is_some() {
                        columns.insert(
                            n.clone(),
                            BoundsView {
                                lower,
                                upper,
                                values,
                                nulls,
                            },
                        );
                    }
                }
                entries.push(EntryView {
                    manifest: mf.manifest_path.clone(),
                    status: match e.status {
                        ManifestStatus::Added => "ADDED",
                        ManifestStatus::Existing => "EXISTING",
                        ManifestStatus::Deleted => "DELETED",
                    }
                    .into(),
                    content: format!("{:?}", df.content_type()).to_lowercase(),
                    file: df.file_path().to_string(),
                    records: df.record_count(),
                    size: df.file_size_in_bytes(),
                    snapshot_id: e.snapshot_id,
                    partition: df
                        .partition()
                        .iter()
                        .map(|v| v.map_or("null".to_string(), |l| format!("{l:?}")))
                        .collect::<Vec<_>>()
                        .join(", "),
                    columns,
                });
            }
        }
    }
    let mut ordered: Vec<_> = meta.snapshots().collect();
    ordered.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    Ok(TableView {
        table: name.to_string(),
        location: t.location().to_string(),
        metadata_location: t.metadata_location.clone(),
        format_version: meta.format_version() as u8,
        schema: schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.id, f.name.clone(), type_name(&f.field_type), f.required))
            .collect(),
        partition_spec: meta
            .default_partition_spec()
            .fields()
            .iter()
            .map(|f| format!("{}({})", f.transform, f.name))
            .collect::<Vec<_>>()
            .join(", "),
        properties: meta
            .properties()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        refs: refs(&t)
            .into_iter()
            .map(|(n, r)| {
                (
                    n,
                    (
                        if r.is_branch() { "branch" } else { "tag" }.to_string(),
                        r.snapshot_id,
                    ),
                )
            })
            .collect(),
        snapshots: ordered
            .into_iter()
            .map(|s| SnapshotView {
                snapshot_id: s.snapshot_id(),
                parent_snapshot_id: s.parent_snapshot_id(),
                sequence_number: s.sequence_number(),
                committed_at: s.timestamp().map(|t| t.to_rfc3339()).unwrap_or_default(),
                operation: s.summary().operation.as_str().to_string(),
                summary: s
                    .summary()
                    .additional_properties
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                manifest_list: s.manifest_list().to_string(),
            })
            .collect::<Vec<_>>(),
        metadata_log: meta.metadata_log().len(),
        entries,
    })
}

fn type_name(t: &Type) -> String {
    t.to_string()
}
