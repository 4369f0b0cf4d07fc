//! Consent as states with their history, the attributes derived from them, and the tables
//! built under a consent filter.
//!
//! A withdrawal of consent is not an erasure: it changes who may use the data from the next
//! query on and deletes nothing. This module keeps:
//!
//! - **Consent records**: one row per change — subject ID, purpose, state (`given`, `refused`,
//!   `withdrawn`, `expired`), when it changed and where from, when lethe recorded it — in an
//!   Iceberg table (`[consent] table` in `governance/policy.toml`, `consent.records` in the
//!   demo) appended through lethe's commit path. Rows are never updated: the history is the
//!   table. A subject with no record for a purpose is `unknown`.
//! - **Derived attributes**: the booleans the access policy and the pipelines read
//!   (`crm.learners.marketing_consent`) are kept in step with the current state, as a CRM's
//!   consent sync would: `given` is true, `refused`/`withdrawn`/`expired` false, `unknown`
//!   null (so a filter `= true` counts unknown as not given). [`set`] appends the record
//!   first, then rewrites the attribute copy-on-write for that subject; [`sync`] repairs every
//!   drift (after a reload of the table from its source, or a crash between the two commits);
//!   [`check`] reports drift.
//! - **Consent-built tables**: pipelines declare the purposes their filter reads
//!   (`-- lethe:consent marketing`). [`check`] lists the rows of each such table whose subject
//!   no longer consents (by ID), [`rebuild`] reruns the stale pipelines.
//!
//! Why attributes are synced rather than the policy joining the consent table: the pipelines
//! that build consent-filtered tables read the same attributes, so one mechanism serves both
//! the query path and rebuilds; row filters stay single-table expressions that a reviewer can
//! read; and the table the attribute lives in keeps every row (a withdrawal deletes nothing).
//! The price is that the attribute is a copy: whoever loads that table from elsewhere must run
//! [`sync`] afterwards, and [`check`] shows when nobody did.
//!
//! Erasure is a separate decision: nothing here deletes a subject's rows. The consent table
//! identifies subjects, so an erasure plan covers it like any other table.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, TimeUnit};
use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use iceberg::spec::{DataFile, FormatVersion, Operation};
use serde::{Deserialize, Serialize};

use crate::access::policy::{ConsentConfig, Policy};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::governance::identifiers::id_strings;
use crate::governance::subjects::{SubjectRef, split_column};
use crate::pipeline::{Pipeline, PipelineRun};
use crate::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::commit::{ActionCommit, TableAction, commit};
use lethe_iceberg::ops::rewrite::{append, candidate_files, has_delete_files, select_rows};
use lethe_iceberg::predicate::{Predicate, Value};
use lethe_iceberg::read::read_data_file;
use lethe_iceberg::snapshot::{SnapshotChanges, produce_written};
use lethe_iceberg::table::{LoadedTable, Warehouse};
use lethe_iceberg::writer::{TableWriter, WriteOptions};

/// A consent state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsentState {
    /// The subject agreed.
    Given,
    /// The subject was asked and said no.
    Refused,
    /// The subject agreed, then took it back.
    Withdrawn,
    /// The agreement ran out.
    Expired,
    /// No record: never asked (counts as not given).
    Unknown,
}

impl ConsentState {
    /// Parses `given`, `refused`, `withdrawn`, `expired` (`unknown` is never recorded).
    pub fn parse(s: &str) -> Result<ConsentState> {
        match s.trim() {
            "given" => Ok(ConsentState::Given),
            "refused" => Ok(ConsentState::Refused),
            "withdrawn" => Ok(ConsentState::Withdrawn),
            "expired" => Ok(ConsentState::Expired),
            "unknown" => Err(Error::invalid(
                "`unknown` is the absence of a record and can't be recorded; record given, refused, withdrawn or expired",
            )),
            other => Err(Error::invalid(format!(
                "unknown consent state `{other}` (given, refused, withdrawn, expired)"
            ))),
        }
    }

    /// The name stored in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsentState::Given => "given",
            ConsentState::Refused => "refused",
            ConsentState::Withdrawn => "withdrawn",
            ConsentState::Expired => "expired",
            ConsentState::Unknown => "unknown",
        }
    }

    /// The derived attribute: given is true, unknown null, anything else false.
    pub fn attribute(self) -> Option<bool> {
        match self {
            ConsentState::Given => Some(true),
            ConsentState::Unknown => None,
            _ => Some(false),
        }
    }

    /// Whether the subject consents (only `given` does).
    pub fn consents(self) -> bool {
        self == ConsentState::Given
    }
}

impl std::fmt::Display for ConsentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One consent record (a row of the consent table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentRecord {
    /// The subject's ID, as text.
    pub subject_id: String,
    /// The purpose.
    pub purpose: String,
    /// The state it changed to.
    pub state: ConsentState,
    /// When it changed.
    pub changed_at: DateTime<Utc>,
    /// Where the change came from (a form, a support ticket, an import).
    pub source: Option<String>,
    /// When lethe recorded it.
    pub recorded_at: DateTime<Utc>,
}

/// The consent configuration resolved against the catalog.
#[derive(Debug, Clone)]
pub struct Consent {
    /// `[consent]` of policy.toml.
    pub config: ConsentConfig,
    /// The consent table.
    pub table: TableName,
    /// The subject's name.
    pub subject: String,
    /// The subject's root table (`crm.learners`).
    pub root_table: String,
    /// The ID column (the root identifier's name, in the consent table too).
    pub id_column: String,
    /// The ID's Arrow type.
    pub id_type: DataType,
    /// Purpose -> (table, column) of its derived attribute.
    pub attributes: BTreeMap<String, (String, String)>,
}

const PURPOSE: &str = "purpose";
const STATE: &str = "state";
const CHANGED_AT: &str = "changed_at";
const SOURCE: &str = "source";
const RECORDED_AT: &str = "recorded_at";

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
}

impl Consent {
    /// Resolves `[consent]` of the policy against subjects.toml and the catalog.
    pub async fn load(ws: &Workspace) -> Result<Consent> {
        let gov = ws.governance()?;
        let policy = Policy::load(&gov.dir)?;
        Self::resolve(ws, &gov, &policy).await
    }

    /// [`Consent::load`] with the files already loaded.
    pub async fn resolve(ws: &Workspace, gov: &Governance, policy: &Policy) -> Result<Consent> {
        let config = policy.consent()?.clone();
        let table = TableName::parse(&config.table)?;
        let subject = gov.subjects.get(&config.subject)?;
        let (root_table, id_column) = subject.root()?;
        let root = ws.warehouse.load(&TableName::parse(&root_table)?).await?;
        let arrow = lethe_iceberg::writer::arrow_schema(root.metadata.current_schema())?;
        let id_type = arrow
            .field_with_name(&id_column)
            .map_err(|_| Error::invalid(format!("`{root_table}` has no column `{id_column}`")))?
            .data_type()
            .clone();
        if !matches!(id_type, DataType::Int64 | DataType::Int32 | DataType::Utf8) {
            return Err(Error::invalid(format!(
                "`{root_table}.{id_column}` is {id_type}: consent records support integer and string IDs"
            )));
        }
        let mut attributes = BTreeMap::new();
        for (purpose, attr) in &config.purposes {
            attributes.insert(purpose.clone(), split_column(attr)?);
        }
        Ok(Consent {
            subject: config.subject.clone(),
            config,
            table,
            root_table,
            id_column,
            id_type,
            attributes,
        })
    }

    /// The consent table's Arrow schema.
    pub fn arrow_schema(&self) -> ArrowSchema {
        ArrowSchema::new(vec![
            Field::new(&self.id_column, self.id_type.clone(), false),
            Field::new(PURPOSE, DataType::Utf8, false),
            Field::new(STATE, DataType::Utf8, false),
            Field::new(CHANGED_AT, utc_micros(), false),
            Field::new(SOURCE, DataType::Utf8, true),
            Field::new(RECORDED_AT, utc_micros(), false),
        ])
    }

    /// Creates the consent table when it doesn't exist yet.
    pub async fn ensure_table(&self, wh: &Warehouse) -> Result<()> {
        if wh.catalog.table_exists(&self.table).await? {
            return Ok(());
        }
        let schema = iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&self.arrow_schema())?;
        wh.create_table(
            &self.table,
            schema,
            None,
            None,
            HashMap::new(),
            FormatVersion::V2,
        )
        .await?;
        Ok(())
    }

    /// Checks a purpose is configured.
    pub fn check_purpose(&self, purpose: &str) -> Result<()> {
        if self.attributes.contains_key(purpose) {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "unknown purpose `{purpose}` (purposes in [consent.purposes] of policy.toml: {})",
            self.attributes
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// The typed value of an ID given as text.
    pub fn id_value(&self, id: &str) -> Result<Value> {
        match self.id_type {
            DataType::Int64 | DataType::Int32 => id
                .trim()
                .parse::<i64>()
                .map(Value::Int)
                .map_err(|_| Error::invalid(format!("`{}` IDs are integers", self.subject))),
            _ => Ok(Value::Str(id.to_string())),
        }
    }

    fn id_array(&self, ids: &[String]) -> Result<ArrayRef> {
        Ok(match self.id_type {
            DataType::Int64 => Arc::new(Int64Array::from(
                ids.iter()
                    .map(|i| {
                        i.parse::<i64>()
                            .map_err(|_| Error::invalid("an ID is not an integer"))
                    })
                    .collect::<Result<Vec<_>>>()?,
            )),
            DataType::Int32 => Arc::new(Int32Array::from(
                ids.iter()
                    .map(|i| {
                        i.parse::<i32>()
                            .map_err(|_| Error::invalid("an ID is not a 32-bit integer"))
                    })
                    .collect::<Result<Vec<_>>>()?,
            )),
            _ => Arc::new(StringArray::from(ids.to_vec())),
        })
    }

    /// The records as a batch of the consent table.
    pub fn batch(&self, records: &[ConsentRecord]) -> Result<RecordBatch> {
        let ids: Vec<String> = records.iter().map(|r| r.subject_id.clone()).collect();
        let ts = |f: &dyn Fn(&ConsentRecord) -> DateTime<Utc>| -> ArrayRef {
            Arc::new(
                TimestampMicrosecondArray::from(
                    records
                        .iter()
                        .map(|r| f(r).timestamp_micros())
                        .collect::<Vec<_>>(),
                )
                .with_timezone("+00:00"),
            )
        };
        Ok(RecordBatch::try_new(
            Arc::new(self.arrow_schema()),
            vec![
                self.id_array(&ids)?,
                Arc::new(StringArray::from(
                    records
                        .iter()
                        .map(|r| r.purpose.clone())
                        .collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    records.iter().map(|r| r.state.as_str()).collect::<Vec<_>>(),
                )),
                ts(&|r| r.changed_at),
                Arc::new(StringArray::from(
                    records.iter().map(|r| r.source.clone()).collect::<Vec<_>>(),
                )),
                ts(&|r| r.recorded_at),
            ],
        )?)
    }

    /// Every record, in the order they were recorded (a missing table has none).
    pub async fn records(&self, wh: &Warehouse) -> Result<Vec<ConsentRecord>> {
        if !wh.catalog.table_exists(&self.table).await? {
            return Ok(Vec::new());
        }
        let table = wh.load(&self.table).await?;
        let batches = select_rows(wh, &table, &Predicate::True).await?;
        let mut out = Vec::new();
        for b in &batches {
            out.extend(self.parse_batch(b)?);
        }
        out.sort_by_key(|r| r.recorded_at);
        Ok(out)
    }

    fn parse_batch(&self, b: &RecordBatch) -> Result<Vec<ConsentRecord>> {
        let ids = id_strings(b, &self.id_column)?;
        let col = |name: &str| {
            b.column_by_name(name)
                .cloned()
                .ok_or_else(|| Error::invalid(format!("`{}` has no column `{name}`", self.table)))
        };
        let purpose = col(PURPOSE)?;
        let purpose = purpose.as_string::<i32>();
        let state = col(STATE)?;
        let state = state.as_string::<i32>();
        let source = col(SOURCE)?;
        let source = source.as_string::<i32>();
        let micros = |name: &str| -> Result<Vec<Option<i64>>> {
            let c = arrow::compute::cast(
                &col(name)?,
                &DataType::Timestamp(TimeUnit::Microsecond, None),
            )?;
            let c = c.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            Ok((0..c.len())
                .map(|i| c.is_valid(i).then(|| c.value(i)))
                .collect())
        };
        let changed = micros(CHANGED_AT)?;
        let recorded = micros(RECORDED_AT)?;
        let mut out = Vec::with_capacity(b.num_rows());
        for i in 0..b.num_rows() {
            let (Some(id), true, true) = (&ids[i], purpose.is_valid(i), state.is_valid(i)) else {
                return Err(Error::invalid(format!(
                    "`{}` holds a record without an ID, purpose or state",
                    self.table
                )));
            };
            let at = |v: Option<i64>| {
                v.and_then(|m| Utc.timestamp_micros(m).single())
                    .ok_or_else(|| {
                        Error::invalid(format!("`{}` holds a record without a time", self.table))
                    })
            };
            out.push(ConsentRecord {
                subject_id: id.clone(),
                purpose: purpose.value(i).to_string(),
                state: ConsentState::parse(state.value(i))?,
                changed_at: at(changed[i])?,
                source: source.is_valid(i).then(|| source.value(i).to_string()),
                recorded_at: at(recorded[i])?,
            });
        }
        Ok(out)
    }
}

/// The current state of every (subject, purpose) that has a record.
#[derive(Debug, Clone, Default)]
pub struct CurrentConsent {
    latest: HashMap<(String, String), ConsentRecord>,
}

impl CurrentConsent {
    /// From records: the latest change wins (by `changed_at`, then `recorded_at`, then order).
    pub fn from_records(records: &[ConsentRecord]) -> CurrentConsent {
        let mut latest: HashMap<(String, String), ConsentRecord> = HashMap::new();
        for r in records {
            let key = (r.subject_id.clone(), r.purpose.clone());
            match latest.get(&key) {
                Some(old) if (old.changed_at, old.recorded_at) > (r.changed_at, r.recorded_at) => {}
                _ => {
                    latest.insert(key, r.clone());
                }
            }
        }
        CurrentConsent { latest }
    }

    /// A subject's state for a purpose (`unknown` without a record).
    pub fn state(&self, id: &str, purpose: &str) -> ConsentState {
        self.latest
            .get(&(id.to_string(), purpose.to_string()))
            .map_or(ConsentState::Unknown, |r| r.state)
    }

    /// The record behind the current state, if any.
    pub fn record(&self, id: &str, purpose: &str) -> Option<&ConsentRecord> {
        self.latest.get(&(id.to_string(), purpose.to_string()))
    }
}

/// A change to record.
#[derive(Debug, Clone)]
pub struct ConsentChange {
    /// The subject (`learner=3590`).
    pub subject: SubjectRef,
    /// The purpose.
    pub purpose: String,
    /// The new state.
    pub state: ConsentState,
    /// Where it came from.
    pub source: Option<String>,
    /// When it changed (default: now).
    pub changed_at: Option<DateTime<Utc>>,
}

/// What [`set`] did.
#[derive(Debug, Clone, Serialize)]
pub struct SetReport {
    /// The record appended.
    pub record: ConsentRecord,
    /// The state before.
    pub previous: ConsentState,
    /// The state now (a backdated change may not be the latest).
    pub current: ConsentState,
    /// The consent table's new snapshot.
    pub snapshot_id: Option<i64>,
    /// The attribute sync.
    pub sync: SyncReport,
}

/// Records a consent change and brings the derived attributes in step for that subject.
///
/// The subject must exist in its root table. The record is committed first; if the attribute
/// sync then fails, the error says so and `lethe consent sync` finishes it.
pub async fn set(ws: &Workspace, change: &ConsentChange) -> Result<SetReport> {
    let c = Consent::load(ws).await?;
    if change.subject.subject != c.subject {
        return Err(Error::invalid(format!(
            "consent is kept for `{}` subjects (policy.toml [consent] subject), not `{}`",
            c.subject, change.subject.subject
        )));
    }
    c.check_purpose(&change.purpose)?;
    let id_value = c.id_value(&change.subject.id)?;
    let wh = &ws.warehouse;
    let root = wh.load(&TableName::parse(&c.root_table)?).await?;
    let only = Predicate::is_in(c.id_column.clone(), vec![id_value.clone()]);
    let (n, _) = lethe_iceberg::ops::rewrite::count_rows(wh, &root, &only).await?;
    if n == 0 {
        return Err(Error::invalid(format!(
            "no {} with that ID in `{}`: nothing recorded",
            c.subject, c.root_table
        )));
    }
    let id_text = match &id_value {
        Value::Int(i) => i.to_string(),
        Value::Str(s) => s.clone(),
        _ => change.subject.id.clone(),
    };
    let before = CurrentConsent::from_records(&c.records(wh).await?);
    let previous = before.state(&id_text, &change.purpose);
    let now = ws.clock.now();
    let record = ConsentRecord {
        subject_id: id_text.clone(),
        purpose: change.purpose.clone(),
        state: change.state,
        changed_at: change.changed_at.unwrap_or(now),
        source: change.source.clone(),
        recorded_at: now,
    };
    c.ensure_table(wh).await?;
    let mut summary = BTreeMap::new();
    summary.insert("lethe-consent".to_string(), change.purpose.clone());
    let snapshot_id = append(
        wh,
        &c.table,
        &[c.batch(std::slice::from_ref(&record))?],
        summary,
        WriteOptions::default(),
    )
    .await?;
    let records = c.records(wh).await?;
    let current = CurrentConsent::from_records(&records);
    let sync = sync_with(ws, &c, &current, Some(vec![id_value]))
        .await
        .map_err(|e| {
            Error::invalid(format!(
                "the consent change was recorded, but the derived attributes could not be brought in step ({e}): run `lethe consent sync`"
            ))
        })?;
    Ok(SetReport {
        current: current.state(&id_text, &change.purpose),
        record,
        previous,
        snapshot_id,
        sync,
    })
}

/// A subject's consent: the current state per purpose and the history.
#[derive(Debug, Clone, Serialize)]
pub struct SubjectConsent {
    /// Purpose -> current state.
    pub current: BTreeMap<String, ConsentState>,
    /// Every record of the subject, oldest first.
    pub history: Vec<ConsentRecord>,
}

/// A subject's consent states and history.
pub async fn show(ws: &Workspace, subject: &SubjectRef) -> Result<SubjectConsent> {
    let c = Consent::load(ws).await?;
    if subject.subject != c.subject {
        return Err(Error::invalid(format!(
            "consent is kept for `{}` subjects, not `{}`",
            c.subject, subject.subject
        )));
    }
    let id = match c.id_value(&subject.id)? {
        Value::Int(i) => i.to_string(),
        Value::Str(s) => s,
        _ => subject.id.clone(),
    };
    let records = c.records(&ws.warehouse).await?;
    let current = CurrentConsent::from_records(&records);
    let mut history: Vec<ConsentRecord> =
        records.into_iter().filter(|r| r.subject_id == id).collect();
    history.sort_by_key(|r| (r.changed_at, r.recorded_at));
    Ok(SubjectConsent {
        current: c
            .attributes
            .keys()
            .map(|p| (p.clone(), current.state(&id, p)))
            .collect(),
        history,
    })
}

/// What a sync changed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncReport {
    /// Per attribute table: rows whose attributes changed.
    pub rows_changed: BTreeMap<String, u64>,
    /// Per attribute table: the snapshot committed (none when nothing changed).
    pub snapshots: BTreeMap<String, i64>,
}

/// Brings every derived attribute in step with the current consent states (copy-on-write; a
/// table already in step is not touched).
pub async fn sync(ws: &Workspace) -> Result<SyncReport> {
    let c = Consent::load(ws).await?;
    let current = CurrentConsent::from_records(&c.records(&ws.warehouse).await?);
    sync_with(ws, &c, &current, None).await
}

async fn sync_with(
    ws: &Workspace,
    c: &Consent,
    current: &CurrentConsent,
    only: Option<Vec<Value>>,
) -> Result<SyncReport> {
    let mut by_table: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (purpose, (t, col)) in &c.attributes {
        by_table
            .entry(t.clone())
            .or_default()
            .push((purpose.clone(), col.clone()));
    }
    let mut report = SyncReport::default();
    for (t, columns) in by_table {
        let mut action = SyncAction {
            id_column: c.id_column.clone(),
            columns,
            current,
            only: only
                .as_ref()
                .map(|v| Predicate::is_in(c.id_column.clone(), v.clone())),
            rows_changed: 0,
        };
        let name = TableName::parse(&t)?;
        let committed = commit(&ws.warehouse, &name, &mut action).await?;
        report.rows_changed.insert(t.clone(), action.rows_changed);
        if let Some(s) = committed.and_then(|c| c.snapshot_id) {
            report.snapshots.insert(t, s);
        }
    }
    Ok(report)
}

/// Rewrites the attribute columns of one table where they differ from the current states.
struct SyncAction<'a> {
    id_column: String,
    /// (purpose, column).
    columns: Vec<(String, String)>,
    current: &'a CurrentConsent,
    only: Option<Predicate>,
    rows_changed: u64,
}

#[async_trait]
impl TableAction for SyncAction<'_> {
    async fn plan(
        &mut self,
        wh: &Warehouse,
        table: &LoadedTable,
    ) -> lethe_iceberg::Result<Option<ActionCommit>> {
        if lethe_iceberg::lineage::has_row_lineage(&table.metadata) {
            // The sync rewrites rows without carrying their row ids over yet.
            return Err(lethe_iceberg::Error::Unsupported {
                table: table.name.to_string(),
                feature: "consent attributes in a format v3 table".into(),
                detail: "the consent sync does not keep row lineage (_row_id) yet".into(),
            });
        }
        self.rows_changed = 0;
        let schema = table.metadata.current_schema().clone();
        let files = wh.current_files(table).await?;
        if has_delete_files(&files) {
            return Err(lethe_iceberg::Error::Unsupported {
                table: table.name.to_string(),
                feature: "merge-on-read delete files".into(),
                detail: "consent attributes can't be synced in a table with delete files yet"
                    .into(),
            });
        }
        let wanted = match &self.only {
            Some(p) => Some(candidate_files(wh, table, p).await?),
            None => None,
        };
        let mut writer =
            TableWriter::new(wh.store.as_ref(), &table.metadata, WriteOptions::default())?;
        let mut removed: HashSet<String> = HashSet::new();
        let result: Result<()> = async {
            for f in files.iter().filter(|f| f.is_data()) {
                let path = f.entry.data_file.file_path();
                if let Some(w) = &wanted
                    && !w.contains(&wh.store.normalize(path)?)
                {
                    continue;
                }
                let batches = read_data_file(wh.store.as_ref(), path, &schema)?;
                let mut out = Vec::with_capacity(batches.len());
                let mut changed = 0u64;
                for b in &batches {
                    let (nb, n) = self.apply(b)?;
                    changed += n;
                    out.push(nb);
                }
                if changed == 0 {
                    continue;
                }
                self.rows_changed += changed;
                removed.insert(path.to_string());
                for b in &out {
                    writer.write(b)?;
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            for l in writer.locations() {
                let _ = wh.store.delete(&l);
            }
            return Err(e.into());
        }
        if removed.is_empty() {
            for l in writer.locations() {
                let _ = wh.store.delete(&l);
            }
            return Ok(None);
        }
        let added: Vec<DataFile> = writer.finish()?;
        let mut changes = SnapshotChanges::new(Operation::Overwrite);
        changes.added_data = added;
        changes.removed = removed;
        changes.summary.insert(
            "lethe-consent-sync".into(),
            "derived consent attributes".into(),
        );
        Ok(Some(produce_written(wh, table, changes).await?))
    }
}

impl SyncAction<'_> {
    /// The batch with its attribute columns derived from the current states, and how many
    /// rows changed.
    fn apply(&self, b: &RecordBatch) -> Result<(RecordBatch, u64)> {
        let ids = id_strings(b, &self.id_column)?;
        let mut columns: Vec<ArrayRef> = b.columns().to_vec();
        let mut changed_rows = vec![false; b.num_rows()];
        for (purpose, col) in &self.columns {
            let i = b.schema().index_of(col)?;
            let old = b.column(i).as_boolean_opt().ok_or_else(|| {
                Error::invalid(format!("consent attribute `{col}` is not a boolean column"))
            })?;
            let new: BooleanArray = ids
                .iter()
                .enumerate()
                .map(|(row, id)| match id {
                    Some(id) => self.current.state(id, purpose).attribute(),
                    // A row without an ID keeps what it has.
                    None => old.is_valid(row).then(|| old.value(row)),
                })
                .collect();
            for (row, flag) in changed_rows.iter_mut().enumerate() {
                let before = old.is_valid(row).then(|| old.value(row));
                let after = new.is_valid(row).then(|| new.value(row));
                if before != after {
                    *flag = true;
                }
            }
            columns[i] = Arc::new(new);
        }
        let n = changed_rows.iter().filter(|c| **c).count() as u64;
        Ok((RecordBatch::try_new(b.schema(), columns)?, n))
    }
}

/// One consent-built table compared with current consent.
#[derive(Debug, Clone, Serialize)]
pub struct StaleTable {
    /// The pipeline that builds it.
    pub pipeline: String,
    /// The table.
    pub table: String,
    /// The purposes the pipeline's filter reads.
    pub purposes: Vec<String>,
    /// How rows were tied to subjects: the ID column, or `column -> table.id` through a key.
    pub via: Option<String>,
    /// Rows in the table.
    pub rows: u64,
    /// Rows whose subject doesn't consent today (to any of the purposes).
    pub stale_rows: u64,
    /// Those subjects' IDs.
    pub stale_ids: Vec<String>,
    /// Why the table couldn't be checked (then it counts as stale).
    pub unchecked: Option<String>,
}

/// An attribute that disagrees with the current states.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    /// `table.column`.
    pub attribute: String,
    /// The purpose.
    pub purpose: String,
    /// Rows whose value differs from the one derived from the current state.
    pub rows: u64,
}

/// What `lethe consent check` found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Every pipeline with a consent header.
    pub tables: Vec<StaleTable>,
    /// Attributes out of step with consent (run `lethe consent sync`).
    pub drift: Vec<Drift>,
}

impl CheckReport {
    /// Whether every consent-built table and attribute is in step.
    pub fn clean(&self) -> bool {
        self.drift.is_empty()
            && self
                .tables
                .iter()
                .all(|t| t.stale_rows == 0 && t.unchecked.is_none())
    }
}

/// Compares every consent-built table (and every derived attribute) with current consent.
pub async fn check(ws: &Workspace) -> Result<CheckReport> {
    let gov = ws.governance()?;
    let policy = Policy::load(&gov.dir)?;
    let c = Consent::resolve(ws, &gov, &policy).await?;
    let current = CurrentConsent::from_records(&c.records(&ws.warehouse).await?);
    let mut tables = Vec::new();
    for p in Pipeline::load_all(&ws.config.paths.pipelines)? {
        if p.consent.is_empty() {
            continue;
        }
        tables.push(check_table(ws, &gov, &c, &current, &p).await?);
    }
    let mut drift = Vec::new();
    for (purpose, (t, col)) in &c.attributes {
        let table = ws.warehouse.load(&TableName::parse(t)?).await?;
        let batches = select_rows(&ws.warehouse, &table, &Predicate::True).await?;
        let mut rows = 0u64;
        for b in &batches {
            let ids = id_strings(b, &c.id_column)?;
            let col_arr = b
                .column_by_name(col)
                .ok_or_else(|| Error::invalid(format!("`{t}` has no column `{col}`")))?;
            let vals = col_arr.as_boolean_opt().ok_or_else(|| {
                Error::invalid(format!(
                    "consent attribute `{t}.{col}` is not a boolean column"
                ))
            })?;
            for (i, id) in ids.iter().enumerate() {
                if let Some(id) = id {
                    let stored = vals.is_valid(i).then(|| vals.value(i));
                    if stored != current.state(id, purpose).attribute() {
                        rows += 1;
                    }
                }
            }
        }
        if rows > 0 {
            drift.push(Drift {
                attribute: format!("{t}.{col}"),
                purpose: purpose.clone(),
                rows,
            });
        }
    }
    Ok(CheckReport { tables, drift })
}

/// The subject ID of each row of a consent-built table: from its own ID column, or through a
/// table whose single-column key the target carries (`review_id -> learning.reviews`).
async fn subject_ids(
    ws: &Workspace,
    gov: &Governance,
    c: &Consent,
    table: &LoadedTable,
    batches: &[RecordBatch],
) -> Result<std::result::Result<(String, Vec<Option<String>>), String>> {
    let tname = table.name.to_string();
    let columns = table.column_names();
    let direct =
        crate::governance::identifiers::identifier_columns(gov, &c.subject, &tname, &columns);
    if let Some(col) = direct.first() {
        let mut out = Vec::new();
        for b in batches {
            out.extend(id_strings(b, col)?);
        }
        return Ok(Ok((col.clone(), out)));
    }
    for (other, meta) in &gov.metadata.value.tables {
        let [key] = meta.key.as_slice() else { continue };
        if other == &tname || !columns.contains(key) {
            continue;
        }
        let Ok(name) = TableName::parse(other) else {
            continue;
        };
        let Ok(mapping) = ws.warehouse.load(&name).await else {
            continue;
        };
        let mcols = mapping.column_names();
        let ids =
            crate::governance::identifiers::identifier_columns(gov, &c.subject, other, &mcols);
        let Some(id_col) = ids.first() else { continue };
        let mut map: HashMap<String, String> = HashMap::new();
        for b in select_rows(&ws.warehouse, &mapping, &Predicate::True).await? {
            let keys = id_strings(&b, key)?;
            let vals = id_strings(&b, id_col)?;
            for (k, v) in keys.into_iter().zip(vals) {
                if let (Some(k), Some(v)) = (k, v) {
                    map.insert(k, v);
                }
            }
        }
        let mut out = Vec::new();
        for b in batches {
            for k in id_strings(b, key)? {
                out.push(k.and_then(|k| map.get(&k).cloned()));
            }
        }
        return Ok(Ok((format!("{key} -> {other}.{id_col}"), out)));
    }
    Ok(Err(format!(
        "`{tname}` has no column identifying a {} and no key of a table that has one",
        c.subject
    )))
}

async fn check_table(
    ws: &Workspace,
    gov: &Governance,
    c: &Consent,
    current: &CurrentConsent,
    p: &Pipeline,
) -> Result<StaleTable> {
    let mut out = StaleTable {
        pipeline: p.name.clone(),
        table: p.target.to_string(),
        purposes: p.consent.clone(),
        via: None,
        rows: 0,
        stale_rows: 0,
        stale_ids: Vec::new(),
        unchecked: None,
    };
    if let Some(unknown) = p.consent.iter().find(|x| !c.attributes.contains_key(*x)) {
        out.unchecked = Some(format!(
            "the pipeline reads purpose `{unknown}`, which policy.toml [consent.purposes] doesn't define"
        ));
        return Ok(out);
    }
    if !ws.warehouse.catalog.table_exists(&p.target).await? {
        return Ok(out);
    }
    let table = ws.warehouse.load(&p.target).await?;
    let batches = select_rows(&ws.warehouse, &table, &Predicate::True).await?;
    out.rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    let (via, ids) = match subject_ids(ws, gov, c, &table, &batches).await? {
        Ok(x) => x,
        Err(why) => {
            out.unchecked = Some(why);
            return Ok(out);
        }
    };
    out.via = Some(via);
    let mut stale: BTreeSet<String> = BTreeSet::new();
    for id in ids {
        // A row tied to no subject can't be checked: counted stale, as it may be anyone's.
        let consents = id.as_ref().is_some_and(|id| {
            p.consent
                .iter()
                .all(|purpose| current.state(id, purpose).consents())
        });
        if !consents {
            out.stale_rows += 1;
            stale.insert(id.unwrap_or_else(|| "(no id)".to_string()));
        }
    }
    let mut ids: Vec<String> = stale.into_iter().collect();
    ids.sort_by(|a, b| match (a.parse::<i64>(), b.parse::<i64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    });
    out.stale_ids = ids;
    Ok(out)
}

/// What [`rebuild`] did.
#[derive(Debug, Clone, Serialize)]
pub struct RebuildReport {
    /// The attribute sync run first.
    pub sync: SyncReport,
    /// Pipelines rerun.
    pub runs: Vec<PipelineRun>,
    /// The check after the rebuild.
    pub after: CheckReport,
}

/// Brings attributes in step, reruns every pipeline whose table holds rows of people who no
/// longer consent, and checks again.
pub async fn rebuild(ws: &Workspace) -> Result<RebuildReport> {
    let sync = sync(ws).await?;
    let before = check(ws).await?;
    let mut runs = Vec::new();
    for t in before.tables.iter().filter(|t| t.stale_rows > 0) {
        let p = Pipeline::find(&ws.config.paths.pipelines, &t.pipeline)?;
        runs.push(crate::pipeline::run(ws, &p).await?);
    }
    let after = check(ws).await?;
    Ok(RebuildReport { sync, runs, after })
}

/// Seeds the consent table from the attributes as they stand (the demo, or adopting lethe on
/// a platform that kept booleans): true becomes `given`, false `refused`, null no record
/// (`unknown`). The change time is the subject's `first_seen` column when subjects.toml names
/// one. Returns the records written; does nothing when the table already exists.
pub async fn seed_from_attributes(ws: &Workspace, source: &str) -> Result<u64> {
    let gov = ws.governance()?;
    let policy = Policy::load(&gov.dir)?;
    let c = Consent::resolve(ws, &gov, &policy).await?;
    if ws.warehouse.catalog.table_exists(&c.table).await? {
        return Ok(0);
    }
    let first_seen = gov.subjects.get(&c.subject)?.first_seen.clone();
    let now = ws.clock.now();
    let mut records = Vec::new();
    for (purpose, (t, col)) in &c.attributes {
        let table = ws.warehouse.load(&TableName::parse(t)?).await?;
        for b in select_rows(&ws.warehouse, &table, &Predicate::True).await? {
            let ids = id_strings(&b, &c.id_column)?;
            let vals = b
                .column_by_name(col)
                .and_then(|a| a.as_boolean_opt().cloned())
                .ok_or_else(|| Error::invalid(format!("`{t}.{col}` is not a boolean column")))?;
            let since: Vec<Option<i64>> = match first_seen
                .as_deref()
                .and_then(|f| b.column_by_name(f))
            {
                Some(a) => {
                    let a =
                        arrow::compute::cast(a, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
                    let a = a.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
                    (0..a.len())
                        .map(|i| a.is_valid(i).then(|| a.value(i)))
                        .collect()
                }
                None => vec![None; b.num_rows()],
            };
            for (i, id) in ids.into_iter().enumerate() {
                let (Some(id), true) = (id, vals.is_valid(i)) else {
                    continue;
                };
                records.push(ConsentRecord {
                    subject_id: id,
                    purpose: purpose.clone(),
                    state: if vals.value(i) {
                        ConsentState::Given
                    } else {
                        ConsentState::Refused
                    },
                    changed_at: since[i]
                        .and_then(|m| Utc.timestamp_micros(m).single())
                        .unwrap_or(now),
                    source: Some(source.to_string()),
                    // Recorded when it was given: the seed is deterministic for a given table.
                    recorded_at: since[i]
                        .and_then(|m| Utc.timestamp_micros(m).single())
                        .unwrap_or(now),
                });
            }
        }
    }
    c.ensure_table(&ws.warehouse).await?;
    if records.is_empty() {
        return Ok(0);
    }
    let n = records.len() as u64;
    let mut summary = BTreeMap::new();
    summary.insert(
        "lethe-consent".to_string(),
        "seeded from attributes".to_string(),
    );
    append(
        &ws.warehouse,
        &c.table,
        &[c.batch(&records)?],
        summary,
        WriteOptions {
            max_rows_per_file: Some(50_000),
        },
    )
    .await?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        id: &str,
        purpose: &str,
        state: ConsentState,
        changed: i64,
        recorded: i64,
    ) -> ConsentRecord {
        ConsentRecord {
            subject_id: id.into(),
            purpose: purpose.into(),
            state,
            changed_at: Utc.timestamp_opt(changed, 0).single().unwrap(),
            source: None,
            recorded_at: Utc.timestamp_opt(recorded, 0).single().unwrap(),
        }
    }

    #[test]
    fn latest_change_wins_and_missing_is_unknown() {
        let r = vec![
            rec("1", "marketing", ConsentState::Given, 10, 10),
            rec("1", "marketing", ConsentState::Withdrawn, 20, 20),
            // Recorded later but changed earlier: history, not the current state.
            rec("1", "marketing", ConsentState::Refused, 15, 30),
            rec("2", "marketing", ConsentState::Given, 5, 5),
        ];
        let c = CurrentConsent::from_records(&r);
        assert_eq!(c.state("1", "marketing"), ConsentState::Withdrawn);
        assert_eq!(c.state("2", "marketing"), ConsentState::Given);
        assert_eq!(c.state("2", "ai_training"), ConsentState::Unknown);
        assert_eq!(c.state("3", "marketing"), ConsentState::Unknown);
    }

    #[test]
    fn attributes_count_unknown_as_not_given() {
        assert_eq!(ConsentState::Given.attribute(), Some(true));
        for s in [
            ConsentState::Refused,
            ConsentState::Withdrawn,
            ConsentState::Expired,
        ] {
            assert_eq!(s.attribute(), Some(false));
            assert!(!s.consents());
        }
        assert_eq!(ConsentState::Unknown.attribute(), None);
        assert!(!ConsentState::Unknown.consents());
    }

    #[test]
    fn states_parse_and_unknown_is_not_recordable() {
        for s in ["given", "refused", "withdrawn", "expired"] {
            assert_eq!(ConsentState::parse(s).unwrap().as_str(), s);
        }
        assert!(ConsentState::parse("unknown").is_err());
        assert!(ConsentState::parse("maybe").is_err());
    }

    #[test]
    fn sync_derives_attributes_and_counts_changed_rows() {
        let current = CurrentConsent::from_records(&[
            rec("1", "m", ConsentState::Withdrawn, 1, 1),
            rec("2", "m", ConsentState::Given, 1, 1),
        ]);
        let action = SyncAction {
            id_column: "id".into(),
            columns: vec![("m".into(), "m_consent".into())],
            current: &current,
            only: None,
            rows_changed: 0,
        };
        let b = RecordBatch::try_from_iter_with_nullable(vec![
            (
                "id",
                Arc::new(Int64Array::from(vec![Some(1), Some(2), Some(3), None])) as ArrayRef,
                true,
            ),
            (
                "m_consent",
                Arc::new(BooleanArray::from(vec![
                    Some(true),
                    Some(true),
                    Some(true),
                    Some(true),
                ])) as ArrayRef,
                true,
            ),
        ])
        .unwrap();
        let (nb, n) = action.apply(&b).unwrap();
        let m = nb.column(1).as_boolean();
        assert!(m.is_valid(0) && !m.value(0)); // withdrawn
        assert!(m.is_valid(1) && m.value(1)); // given
        assert!(m.is_null(2)); // unknown
        assert!(m.is_valid(3) && m.value(3)); // no id: kept
        assert_eq!(n, 2);
    }
}
