//! Producing a snapshot: manifests, a manifest list and the updates that add it to a table.
//!
//! lethe owns this path because the iceberg crate offers no overwrite or delete commit. The
//! result is what Iceberg Java's `MergingSnapshotProducer` writes for the same change:
//!
//! - a manifest is carried over unchanged when none of its entries is removed and it holds no
//!   `DELETED` entry from an earlier snapshot;
//! - otherwise it is rewritten: live entries that stay become `EXISTING` (their snapshot id and
//!   data/file sequence numbers preserved), removed ones `DELETED` in this snapshot (or left
//!   out, [`SnapshotChanges::drop_removed`], when the same commit expires every older
//!   snapshot), and earlier `DELETED` entries are dropped (their column bounds can hold a
//!   removed person's values); a manifest left with no entry is dropped;
//! - added data files go into a new data manifest, added delete files into a delete manifest
//!   (one per partition spec the files were written with); an added delete file can keep an
//!   explicit data sequence number (a rewritten delete file keeps the one it replaces);
//! - the summary carries Java's standard counts (`added-data-files`, `deleted-records`,
//!   `total-records`, ...) computed from the new live set, plus the caller's keys.
//!
//! - a deletion vector is removed by its Puffin file and offset ([`SnapshotChanges::removed_vectors`]):
//!   the other vectors of the same Puffin file stay live.
//!
//! Each format version is written in its own manifest and manifest-list format. A format v3
//! commit also keeps row lineage as the spec says: the snapshot's `first-row-id` is the
//! table's `next-row-id`, every data manifest without a `first_row_id` (new ones, rewritten
//! ones, and in a table upgraded from v2 the old ones) gets one in the manifest list, entries
//! carried into a rewritten manifest keep the `first_row_id` they inherited, added data files
//! inherit theirs, and the snapshot's `added-rows` advances the table's `next-row-id` (a
//! retried commit assigns them again from the table it is planned on).

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, ManifestContentType, ManifestFile,
    ManifestListWriter, ManifestStatus, ManifestWriter, ManifestWriterBuilder, Operation, Snapshot,
    SnapshotReference, SnapshotRetention, Summary,
};
use iceberg::{TableRequirement, TableUpdate};
use rand::Rng;

use crate::commit::ActionCommit;
use crate::error::{Error, Result};
use crate::table::{LoadedTable, Warehouse};

/// The change a new snapshot makes.
#[derive(Debug, Clone)]
pub struct SnapshotChanges {
    /// The snapshot's operation (`append`, `overwrite`, `delete`, `replace`).
    pub operation: Operation,
    /// Data files to add.
    pub added_data: Vec<DataFile>,
    /// Delete files to add.
    pub added_deletes: Vec<DataFile>,
    /// Locations of live files (data or delete) to remove; a Puffin file's location removes
    /// every vector in it.
    pub removed: HashSet<String>,
    /// Deletion vectors to remove, by Puffin file location and `content_offset`.
    pub removed_vectors: HashSet<(String, i64)>,
    /// Rewrite every manifest even when nothing in it changes (compacts DELETED entries away).
    pub rewrite_all_manifests: bool,
    /// Leave the removed files out of the rewritten manifests instead of marking them
    /// `DELETED`: for a commit that also expires every older snapshot (a purge of the table's
    /// history in the same commit, [`crate::ops::rewrite::RowRewrite::with_history_purge`]),
    /// where a `DELETED` entry would only keep a removed file's column bounds until the next
    /// manifest rewrite. The summary counts the removed files all the same.
    pub drop_removed: bool,
    /// Extra summary keys (`erasure-request`, `retention-rule`, ...).
    pub summary: BTreeMap<String, String>,
    /// Names the manifests and the manifest list after this tag instead of a random uuid
    /// (`{tag}-m{n}.avro`, `snap-{id}-1-{tag}.avro`): a change run under a recorded name
    /// ([`crate::ops::rewrite::RowRewrite::with_run`]) can find what a killed attempt left.
    /// Unique per attempt.
    pub name_tag: Option<String>,
    /// Added delete files that replace a delete file, by location: a delete file rewritten to
    /// drop some of its rows keeps the data sequence number and partition spec of the one it
    /// replaces, so it applies to exactly the data files it applied to before. Files not named
    /// here get the new snapshot's sequence number and the default partition spec.
    pub kept_deletes: HashMap<String, KeptDelete>,
}

/// What a rewritten delete file keeps of the one it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptDelete {
    /// The data sequence number.
    pub sequence_number: i64,
    /// The partition spec id.
    pub spec_id: i32,
}

impl SnapshotChanges {
    /// A change of the given operation with nothing in it yet.
    pub fn new(operation: Operation) -> Self {
        SnapshotChanges {
            operation,
            added_data: Vec::new(),
            added_deletes: Vec::new(),
            removed: HashSet::new(),
            removed_vectors: HashSet::new(),
            rewrite_all_manifests: false,
            drop_removed: false,
            summary: BTreeMap::new(),
            kept_deletes: HashMap::new(),
            name_tag: None,
        }
    }
}

/// Whether `changes` removes the live file `f` (by location, or as a deletion vector by
/// location and offset).
fn is_removed(changes: &SnapshotChanges, f: &DataFile) -> bool {
    changes.removed.contains(f.file_path())
        || f.content_offset().is_some_and(|o| {
            changes
                .removed_vectors
                .contains(&(f.file_path().to_string(), o))
        })
}

fn new_snapshot_id(table: &LoadedTable) -> i64 {
    let mut rng = rand::rng();
    loop {
        let id: i64 = rng.random_range(1..i64::MAX);
        if table.metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// Where a new snapshot goes.
#[derive(Debug, Clone)]
pub struct On {
    /// The snapshot whose live files the new one starts from (None: an empty table).
    pub base: Option<std::sync::Arc<Snapshot>>,
    /// The new snapshot's parent.
    pub parent: Option<i64>,
    /// The branch or tag the new snapshot becomes the head of (None: no ref moves; the caller
    /// points refs itself).
    pub set_ref: Option<String>,
}

impl On {
    /// On top of the table's current snapshot, as the new head of `main`.
    pub fn main(table: &LoadedTable) -> On {
        let current = table.current_snapshot().cloned();
        On {
            parent: current.as_ref().map(|s| s.snapshot_id()),
            base: current,
            set_ref: Some("main".into()),
        }
    }
}

/// Writes the manifests and manifest list for `changes` on top of the table's current snapshot
/// and returns the updates and requirements that commit it. `written` lists every file written
/// here (for cleanup if the commit fails for certain).
pub async fn produce(
    wh: &Warehouse,
    table: &LoadedTable,
    changes: SnapshotChanges,
) -> Result<ActionCommit> {
    produce_on(wh, table, On::main(table), changes).await
}

/// [`produce`] from any snapshot the table keeps (`on.base`), with any parent, moving
/// `on.set_ref` or no ref: what a rewrite of kept history writes for each snapshot it replaces
/// ([`crate::ops::twins`]). The snapshot's sequence number, row ids and id are the table's
/// next ones, so `table` must hold every snapshot an earlier part of the same commit adds.
/// Requirements: the table's identity, and `main` unchanged when it is the ref moved.
pub async fn produce_on(
    wh: &Warehouse,
    table: &LoadedTable,
    on: On,
    changes: SnapshotChanges,
) -> Result<ActionCommit> {
    let meta = &table.metadata;
    let version = meta.format_version();
    let snapshot_id = new_snapshot_id(table);
    let parent = on.base.clone();
    let parent_id = on.parent;
    let sequence_number = meta.next_sequence_number();
    let schema = meta.current_schema().clone();
    let location = table.location().to_string();
    let file_io = wh.store.file_io();
    let mut written: Vec<String> = Vec::new();
    let mut manifests: Vec<ManifestFile> = Vec::new();
    let mut found_removed: HashSet<String> = HashSet::new();
    let mut found_vectors: HashSet<(String, i64)> = HashSet::new();
    let mut removed_files: Vec<DataFile> = Vec::new();
    let mut live_after: Vec<DataFile> = Vec::new();
    let mut counter = 0usize;
    let tag = changes
        .name_tag
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());

    let result: Result<()> = async {
        if let Some(parent) = &parent {
            for mf in wh.manifest_list(table, parent)?.entries() {
                let entries = wh.manifest_entries(mf).await?;
                let touches = entries.iter().any(|e| {
                    e.status == ManifestStatus::Deleted || is_removed(&changes, &e.data_file)
                });
                if !touches && !changes.rewrite_all_manifests {
                    live_after.extend(
                        entries
                            .into_iter()
                            .filter(|e| e.status != ManifestStatus::Deleted)
                            .map(|e| e.data_file),
                    );
                    manifests.push(mf.clone());
                    continue;
                }
                let spec = meta
                    .partition_spec_by_id(mf.partition_spec_id)
                    .ok_or_else(|| {
                        Error::Internal(format!(
                            "{}: manifest {} names unknown partition spec {}",
                            table.name, mf.manifest_path, mf.partition_spec_id
                        ))
                    })?;
                let kept = entries
                    .iter()
                    .filter(|e| {
                        e.status != ManifestStatus::Deleted
                            && !(changes.drop_removed && is_removed(&changes, &e.data_file))
                    })
                    .count();
                if kept == 0 {
                    // Nothing stays: the manifest is dropped (its removed entries with it).
                    for e in entries
                        .iter()
                        .filter(|e| e.status != ManifestStatus::Deleted)
                    {
                        found_removed.insert(e.data_file.file_path().to_string());
                        if let Some(o) = e.data_file.content_offset() {
                            found_vectors.insert((e.data_file.file_path().to_string(), o));
                        }
                        removed_files.push(e.data_file.clone());
                    }
                    continue;
                }
                counter += 1;
                let path = format!("{location}/metadata/{tag}-m{counter}.avro");
                let builder = ManifestWriterBuilder::new(
                    file_io.new_output(&path)?,
                    Some(snapshot_id),
                    schema.clone(),
                    spec.as_ref().clone(),
                );
                let mut writer = manifest_writer(builder, version, mf.content);
                written.push(path);
                for e in entries {
                    if e.status == ManifestStatus::Deleted {
                        continue;
                    }
                    let seq = e.sequence_number.unwrap_or(0);
                    let file_seq = e.file_sequence_number.or(Some(seq));
                    if is_removed(&changes, &e.data_file) {
                        found_removed.insert(e.data_file.file_path().to_string());
                        if let Some(o) = e.data_file.content_offset() {
                            found_vectors.insert((e.data_file.file_path().to_string(), o));
                        }
                        removed_files.push(e.data_file.clone());
                        if !changes.drop_removed {
                            writer.add_delete_file(e.data_file, seq, file_seq)?;
                        }
                    } else {
                        live_after.push(e.data_file.clone());
                        let sid = e.snapshot_id.unwrap_or(snapshot_id);
                        writer.add_existing_file(e.data_file, sid, seq, file_seq)?;
                    }
                }
                manifests.push(writer.write_manifest_file().await?);
            }
        }
        let missing: Vec<String> = changes
            .removed
            .iter()
            .filter(|p| !found_removed.contains(*p))
            .cloned()
            .chain(
                changes
                    .removed_vectors
                    .iter()
                    .filter(|v| !found_vectors.contains(*v))
                    .map(|(p, o)| format!("{p} (deletion vector at offset {o})")),
            )
            .collect();
        if !missing.is_empty() {
            return Err(Error::Internal(format!(
                "{}: files to remove are not live in the current snapshot: {}",
                table.name,
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        // One manifest per content and partition spec: a rewritten delete file keeps the spec
        // it was written with, which need not be the default one.
        for (files, content) in [
            (&changes.added_data, ManifestContentType::Data),
            (&changes.added_deletes, ManifestContentType::Deletes),
        ] {
            if files.is_empty() {
                continue;
            }
            if version == FormatVersion::V1 && content == ManifestContentType::Deletes {
                return Err(Error::Unsupported {
                    table: table.name.to_string(),
                    feature: "delete files in a v1 table".into(),
                    detail: "format v1 has no delete files".into(),
                });
            }
            let mut by_spec: BTreeMap<i32, Vec<&DataFile>> = BTreeMap::new();
            let default_spec = meta.default_partition_spec_id();
            for f in files.iter() {
                let spec = match content {
                    ManifestContentType::Deletes => changes
                        .kept_deletes
                        .get(f.file_path())
                        .map_or(default_spec, |k| k.spec_id),
                    ManifestContentType::Data => default_spec,
                };
                by_spec.entry(spec).or_default().push(f);
            }
            for (spec_id, files) in by_spec {
                let spec = meta.partition_spec_by_id(spec_id).ok_or_else(|| {
                    Error::Internal(format!(
                        "{}: an added file names unknown partition spec {spec_id}",
                        table.name
                    ))
                })?;
                counter += 1;
                let path = format!("{location}/metadata/{tag}-m{counter}.avro");
                let builder = ManifestWriterBuilder::new(
                    file_io.new_output(&path)?,
                    Some(snapshot_id),
                    schema.clone(),
                    spec.as_ref().clone(),
                );
                let mut writer = manifest_writer(builder, version, content);
                written.push(path);
                for f in files {
                    live_after.push(f.clone());
                    let seq = match content {
                        ManifestContentType::Deletes => changes
                            .kept_deletes
                            .get(f.file_path())
                            .map_or(-1, |k| k.sequence_number),
                        ManifestContentType::Data => -1,
                    };
                    writer.add_file(f.clone(), seq)?;
                }
                manifests.push(writer.write_manifest_file().await?);
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        for w in &written {
            let _ = wh.store.delete(w);
        }
        return Err(e);
    }

    let list_path = format!("{location}/metadata/snap-{snapshot_id}-1-{tag}.avro");
    written.push(list_path.clone());
    // Row lineage: the snapshot's first row id is the table's next row id on this attempt.
    let first_row_id = (version == FormatVersion::V3).then(|| meta.next_row_id());
    let list_result: Result<Option<u64>> = async {
        let out = file_io.new_output(&list_path)?.writer().await?;
        let mut list = match version {
            FormatVersion::V1 => ManifestListWriter::v1(out, snapshot_id, parent_id),
            FormatVersion::V2 => {
                ManifestListWriter::v2(out, snapshot_id, parent_id, sequence_number)
            }
            FormatVersion::V3 => {
                ManifestListWriter::v3(out, snapshot_id, parent_id, sequence_number, first_row_id)
            }
        };
        list.add_manifests(manifests.into_iter())?;
        let next_row_id = list.next_row_id();
        list.close().await?;
        Ok(next_row_id)
    }
    .await;
    let row_range = match list_result {
        Ok(next) => first_row_id.zip(next).map(|(f, n)| (f, n - f)),
        Err(e) => {
            for w in &written {
                let _ = wh.store.delete(w);
            }
            return Err(e);
        }
    };

    let summary = summarize(&changes, &removed_files, &live_after);
    let now = chrono::Utc::now().timestamp_millis();
    let timestamp_ms = parent_id
        .and_then(|p| meta.snapshot_by_id(p))
        .map_or(now, |p| now.max(p.timestamp_ms() + 1))
        .max(meta.last_updated_ms());
    let builder = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent_id)
        .with_sequence_number(if version == FormatVersion::V1 {
            0
        } else {
            sequence_number
        })
        .with_timestamp_ms(timestamp_ms)
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation: changes.operation.clone(),
            additional_properties: summary,
        })
        .with_schema_id(meta.current_schema_id());
    let snapshot = match row_range {
        Some((first, added)) => builder.with_row_range(first, added).build(),
        None => builder.build(),
    };
    let mut updates = vec![TableUpdate::AddSnapshot { snapshot }];
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: meta.uuid() }];
    if let Some(r) = &on.set_ref {
        updates.push(TableUpdate::SetSnapshotRef {
            ref_name: r.clone(),
            reference: SnapshotReference::new(
                snapshot_id,
                SnapshotRetention::branch(None, None, None),
            ),
        });
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: r.clone(),
            snapshot_id: parent_id,
        });
    }
    Ok(ActionCommit {
        updates,
        requirements,
        written,
        retained: Vec::new(),
        snapshot_id: Some(snapshot_id),
        trim_metadata_log: false,
    })
}

/// [`produce`] for a change that wrote its added data and delete files itself: their
/// locations join the commit's `written` files (removed if the commit fails for certain), and
/// they are deleted here if producing fails. Not for files the change didn't write.
pub async fn produce_written(
    wh: &Warehouse,
    table: &LoadedTable,
    changes: SnapshotChanges,
) -> Result<ActionCommit> {
    let paths: Vec<String> = changes
        .added_data
        .iter()
        .chain(changes.added_deletes.iter())
        .map(|f| f.file_path().to_string())
        .collect();
    match produce(wh, table, changes).await {
        Ok(mut commit) => {
            commit.written.extend(paths);
            Ok(commit)
        }
        Err(e) => {
            for p in &paths {
                let _ = wh.store.delete(p);
            }
            Err(e)
        }
    }
}

/// A manifest writer for the table's format version and the manifest's content.
fn manifest_writer(
    builder: ManifestWriterBuilder,
    version: FormatVersion,
    content: ManifestContentType,
) -> ManifestWriter {
    match (version, content) {
        (FormatVersion::V1, _) => builder.build_v1(),
        (FormatVersion::V2, ManifestContentType::Data) => builder.build_v2_data(),
        (FormatVersion::V2, ManifestContentType::Deletes) => builder.build_v2_deletes(),
        (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
        (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
    }
}

fn summarize(
    changes: &SnapshotChanges,
    removed: &[DataFile],
    live: &[DataFile],
) -> HashMap<String, String> {
    let mut s: HashMap<String, String> = HashMap::new();
    let is = |f: &DataFile, c: DataContentType| f.content_type() == c;
    let count =
        |files: &[DataFile], c: DataContentType| files.iter().filter(|f| is(f, c)).count() as u64;
    let records = |files: &[DataFile], c: DataContentType| {
        files
            .iter()
            .filter(|f| is(f, c))
            .map(|f| f.record_count())
            .sum::<u64>()
    };
    let size = |files: &[DataFile]| files.iter().map(|f| f.file_size_in_bytes()).sum::<u64>();
    let mut put = |k: &str, v: u64, always: bool| {
        if v > 0 || always {
            s.insert(k.to_string(), v.to_string());
        }
    };
    let added: Vec<DataFile> = changes
        .added_data
        .iter()
        .chain(changes.added_deletes.iter())
        .cloned()
        .collect();
    put(
        "added-data-files",
        count(&added, DataContentType::Data),
        false,
    );
    put(
        "deleted-data-files",
        count(removed, DataContentType::Data),
        false,
    );
    put(
        "added-records",
        records(&added, DataContentType::Data),
        false,
    );
    put(
        "deleted-records",
        records(removed, DataContentType::Data),
        false,
    );
    put("added-files-size", size(&added), false);
    put("removed-files-size", size(removed), false);
    let added_deletes = count(&added, DataContentType::PositionDeletes)
        + count(&added, DataContentType::EqualityDeletes);
    let removed_deletes = count(removed, DataContentType::PositionDeletes)
        + count(removed, DataContentType::EqualityDeletes);
    put("added-delete-files", added_deletes, false);
    put("removed-delete-files", removed_deletes, false);
    let vectors = |files: &[DataFile]| {
        files
            .iter()
            .filter(|f| crate::deletion_vector::is_deletion_vector(f))
            .count() as u64
    };
    put("added-dvs", vectors(&added), false);
    put("removed-dvs", vectors(removed), false);
    put(
        "added-position-deletes",
        records(&added, DataContentType::PositionDeletes),
        false,
    );
    put(
        "removed-position-deletes",
        records(removed, DataContentType::PositionDeletes),
        false,
    );
    put(
        "added-equality-deletes",
        records(&added, DataContentType::EqualityDeletes),
        false,
    );
    put(
        "removed-equality-deletes",
        records(removed, DataContentType::EqualityDeletes),
        false,
    );
    let partitions: HashSet<String> = added
        .iter()
        .chain(removed.iter())
        .map(|f| format!("{:?}", f.partition()))
        .collect();
    put("changed-partition-count", partitions.len() as u64, true);
    put("total-records", records(live, DataContentType::Data), true);
    put("total-files-size", size(live), true);
    put("total-data-files", count(live, DataContentType::Data), true);
    put(
        "total-delete-files",
        count(live, DataContentType::PositionDeletes)
            + count(live, DataContentType::EqualityDeletes),
        true,
    );
    put(
        "total-position-deletes",
        records(live, DataContentType::PositionDeletes),
        true,
    );
    put(
        "total-equality-deletes",
        records(live, DataContentType::EqualityDeletes),
        true,
    );
    for (k, v) in &changes.summary {
        s.insert(k.clone(), v.clone());
    }
    s
}
