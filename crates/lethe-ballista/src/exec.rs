//! lethe's operators: DataFusion `ExecutionPlan`s whose partitions are the tasks of a job.
//!
//! - [`ProofScanExec`]: each partition reads its objects with their formats' readers
//!   ([`lethe_scan::scan_object`]) and emits one row per hit (file, place, trace kind,
//!   detail, count), or one row without a hit for a file holding none — so the client gets
//!   every file's status back.
//! - [`RewriteFilesExec`]: each partition rewrites its data files copy-on-write
//!   ([`lethe_iceberg::ops::rewrite_tasks::PreparedRewrite::run`]) and emits one row per file:
//!   what happened to it and the new files' metadata. It writes through the store; it never
//!   commits.
//!
//! Both run their blocking work on Tokio's blocking pool. `Debug` and the plan display show
//! counts only (Ballista logs plans; the jobs hold the subjects' traces).

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, RecordBatch, StringBuilder, UInt32Builder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt32Type, UInt64Type};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use lethe_iceberg::ops::rewrite_tasks::{FileOutcome, FileState, PreparedRewrite};
use lethe_scan::{
    FileFormat, FileReport, FileStatus, Hit, ObjectEntry, Place, TraceKind, TraceSet,
};

use crate::error::{Error, Result};
use crate::wire::{RewriteWork, ScanJob};

fn properties(schema: SchemaRef, partitions: usize) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(schema),
        Partitioning::UnknownPartitioning(partitions.max(1)),
        EmissionType::Final,
        Boundedness::Bounded,
    ))
}

/// `plan` itself for no new children: lethe's operators are leaves (they read objects, not
/// other plans' rows).
pub(crate) fn leaf_with_new_children(
    plan: Arc<dyn ExecutionPlan>,
    children: &[Arc<dyn ExecutionPlan>],
) -> DfResult<Arc<dyn ExecutionPlan>> {
    if children.is_empty() {
        Ok(plan)
    } else {
        Err(DataFusionError::Internal(format!(
            "{} has no children",
            plan.name()
        )))
    }
}

/// An error unless `partition` is one of the `tasks` partitions of `plan` (at least one).
pub(crate) fn check_partition(plan: &str, partition: usize, tasks: usize) -> DfResult<()> {
    if partition >= tasks.max(1) {
        return Err(DataFusionError::Internal(format!(
            "{plan} has no partition {partition}"
        )));
    }
    Ok(())
}

/// Runs `work` on the blocking pool as the single batch of a stream.
fn blocking_stream(
    schema: SchemaRef,
    work: impl FnOnce() -> Result<RecordBatch> + Send + 'static,
) -> SendableRecordBatchStream {
    let fut = async move {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| DataFusionError::Execution(format!("a lethe task panicked: {e}")))?
            .map_err(DataFusionError::from)
    };
    Box::pin(RecordBatchStreamAdapter::new(
        schema,
        futures::stream::once(fut),
    ))
}

/// The rows a [`ProofScanExec`] emits.
pub fn scan_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("object", DataType::UInt64, false),
        Field::new("file", DataType::Utf8, false),
        Field::new("format", DataType::Utf8, false),
        Field::new("gzip", DataType::Boolean, false),
        Field::new("bytes", DataType::UInt64, false),
        Field::new("unreadable", DataType::Utf8, true),
        Field::new("hits_omitted", DataType::UInt64, false),
        Field::new("subject", DataType::UInt32, true),
        Field::new("place", DataType::Utf8, true),
        Field::new("trace", DataType::Utf8, true),
        Field::new("trace_name", DataType::Utf8, true),
        Field::new("detail", DataType::Utf8, true),
        Field::new("count", DataType::UInt64, true),
    ]))
}

/// The proof scan's per-file work; partition `i` is task `i` of the job.
pub struct ProofScanExec {
    job: Arc<ScanJob>,
    traces: Arc<OnceLock<std::result::Result<Arc<TraceSet>, String>>>,
    props: Arc<PlanProperties>,
}

impl ProofScanExec {
    /// The operator for `job`.
    pub fn new(job: ScanJob) -> Self {
        let props = properties(scan_schema(), job.tasks.len());
        ProofScanExec {
            job: Arc::new(job),
            traces: Arc::new(OnceLock::new()),
            props,
        }
    }

    /// The job.
    pub fn job(&self) -> &ScanJob {
        &self.job
    }

    /// The traces compiled once per process.
    fn traces(&self) -> Result<Arc<TraceSet>> {
        self.traces
            .get_or_init(|| {
                let subjects: Vec<_> = self.job.subjects.iter().map(|s| s.traces()).collect();
                TraceSet::new(&subjects, self.job.prefix_len)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(Error::Wire)
    }
}

impl fmt::Debug for ProofScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProofScanExec")
            .field("job", &self.job)
            .finish()
    }
}

impl DisplayAs for ProofScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "ProofScanExec: tasks={}, objects={}, subjects={}",
            self.job.tasks.len(),
            self.job.tasks.iter().map(Vec::len).sum::<usize>(),
            self.job.subjects.len()
        )
    }
}

impl ExecutionPlan for ProofScanExec {
    fn name(&self) -> &str {
        "ProofScanExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        leaf_with_new_children(self, &children)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let traces = self.traces()?;
        let job = self.job.clone();
        check_partition(self.name(), partition, job.tasks.len())?;
        Ok(blocking_stream(scan_schema(), move || {
            scan_task(&job, &traces, partition)
        }))
    }
}

/// Scans the objects of task `partition` and returns their rows.
fn scan_task(job: &ScanJob, traces: &TraceSet, partition: usize) -> Result<RecordBatch> {
    let store = job.store.open()?;
    let first: usize = job.tasks.iter().take(partition).map(Vec::len).sum();
    // As the client's scan opens them: a listed object by its listed size, a noncurrent
    // version by its id.
    let open = |e: &ObjectEntry| match &e.version {
        Some(v) => store
            .open_version(&e.location, v)
            .map_err(|e| e.to_string()),
        None => store
            .open_listed(&e.location, e.bytes)
            .map_err(|e| e.to_string()),
    };
    let mut rows = ScanRows::default();
    // An executor holds no Parquet master keys: an encrypted file it scans is unreadable,
    // naming its keys (docs/cluster.md).
    let keys = lethe_scan::ParquetKeys::default();
    for (i, entry) in job.tasks.get(partition).into_iter().flatten().enumerate() {
        let report = lethe_scan::scan_object(traces, entry, &open, &keys);
        rows.push((first + i) as u64, &report);
    }
    rows.finish()
}

#[derive(Default)]
struct ScanRows {
    object: UInt64Builder,
    file: StringBuilder,
    format: StringBuilder,
    gzip: BooleanBuilder,
    bytes: UInt64Builder,
    unreadable: StringBuilder,
    hits_omitted: UInt64Builder,
    subject: UInt32Builder,
    place: StringBuilder,
    trace: StringBuilder,
    trace_name: StringBuilder,
    detail: StringBuilder,
    count: UInt64Builder,
}

/// The serde name of a unit enum variant (`DataValue`, `Parquet`).
fn variant_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

fn from_variant_name<T: for<'de> serde::Deserialize<'de>>(name: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|e| Error::Wire(format!("`{name}`: {e}")))
}

impl ScanRows {
    fn push(&mut self, object: u64, r: &FileReport) {
        let file = r.path.to_string_lossy();
        let format = variant_name(&r.format);
        let unreadable = match &r.status {
            FileStatus::Read => None,
            FileStatus::Unreadable { reason } => Some(reason.as_str()),
        };
        let mut row = |hit: Option<&Hit>| {
            self.object.append_value(object);
            self.file.append_value(&file);
            self.format.append_value(&format);
            self.gzip.append_value(r.gzip);
            self.bytes.append_value(r.bytes);
            self.unreadable.append_option(unreadable);
            self.hits_omitted.append_value(r.hits_omitted);
            match hit {
                None => {
                    self.subject.append_null();
                    self.place.append_null();
                    self.trace.append_null();
                    self.trace_name.append_null();
                    self.detail.append_null();
                    self.count.append_null();
                }
                Some(h) => {
                    self.subject.append_value(h.subject as u32);
                    self.place.append_value(variant_name(&h.place));
                    let (kind, name) = match &h.trace {
                        TraceKind::Id { column } => ("id", column),
                        TraceKind::Value { kind } => ("value", kind),
                    };
                    self.trace.append_value(kind);
                    self.trace_name.append_value(name);
                    self.detail.append_value(&h.detail);
                    self.count.append_value(h.count);
                }
            }
        };
        if r.hits.is_empty() {
            row(None);
        }
        for h in &r.hits {
            row(Some(h));
        }
    }

    fn finish(mut self) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.object.finish()),
            Arc::new(self.file.finish()),
            Arc::new(self.format.finish()),
            Arc::new(self.gzip.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.unreadable.finish()),
            Arc::new(self.hits_omitted.finish()),
            Arc::new(self.subject.finish()),
            Arc::new(self.place.finish()),
            Arc::new(self.trace.finish()),
            Arc::new(self.trace_name.finish()),
            Arc::new(self.detail.finish()),
            Arc::new(self.count.finish()),
        ];
        Ok(RecordBatch::try_new(scan_schema(), columns)?)
    }
}

/// The file reports in `batches` (rows of [`ProofScanExec`]), by object index.
pub fn scan_reports(batches: &[RecordBatch]) -> Result<Vec<(u64, FileReport)>> {
    let mut out: std::collections::BTreeMap<u64, FileReport> = Default::default();
    for b in batches {
        let col = |name: &str| -> Result<&ArrayRef> {
            b.column_by_name(name)
                .ok_or_else(|| Error::Wire(format!("scan rows without column `{name}`")))
        };
        let object = col("object")?.as_primitive::<UInt64Type>();
        let file = col("file")?.as_string::<i32>();
        let format = col("format")?.as_string::<i32>();
        let gzip = col("gzip")?.as_boolean();
        let bytes = col("bytes")?.as_primitive::<UInt64Type>();
        let unreadable = col("unreadable")?.as_string::<i32>();
        let omitted = col("hits_omitted")?.as_primitive::<UInt64Type>();
        let subject = col("subject")?.as_primitive::<UInt32Type>();
        let place = col("place")?.as_string::<i32>();
        let trace = col("trace")?.as_string::<i32>();
        let trace_name = col("trace_name")?.as_string::<i32>();
        let detail = col("detail")?.as_string::<i32>();
        let count = col("count")?.as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            let report = match out.entry(object.value(i)) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => v.insert(FileReport {
                    path: file.value(i).into(),
                    format: from_variant_name::<FileFormat>(format.value(i))?,
                    gzip: gzip.value(i),
                    bytes: bytes.value(i),
                    status: if unreadable.is_null(i) {
                        FileStatus::Read
                    } else {
                        FileStatus::Unreadable {
                            reason: unreadable.value(i).to_string(),
                        }
                    },
                    hits: Vec::new(),
                    hits_omitted: omitted.value(i),
                }),
            };
            if subject.is_null(i) {
                continue;
            }
            let name = trace_name.value(i).to_string();
            report.hits.push(Hit {
                subject: subject.value(i) as usize,
                place: from_variant_name::<Place>(place.value(i))?,
                trace: match trace.value(i) {
                    "id" => TraceKind::Id { column: name },
                    _ => TraceKind::Value { kind: name },
                },
                detail: detail.value(i).to_string(),
                count: count.value(i),
            });
        }
    }
    Ok(out.into_iter().collect())
}

/// The rows a [`RewriteFilesExec`] emits.
pub fn rewrite_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("task", DataType::UInt64, false),
        Field::new("data_file", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("matched", DataType::UInt64, false),
        Field::new("purged", DataType::UInt64, false),
        Field::new("kept_rows", DataType::UInt64, false),
        // The new files' metadata: a JSON array of Iceberg data-file JSON objects.
        Field::new("added", DataType::Utf8, false),
        Field::new("attempt", DataType::Utf8, false),
    ]))
}

/// The copy-on-write rewrite's per-file work; partition `i` is task group `i` of the job.
pub struct RewriteFilesExec {
    work: Arc<RewriteWork>,
    prepared: Arc<OnceLock<std::result::Result<Arc<PreparedRewrite>, String>>>,
    props: Arc<PlanProperties>,
}

impl RewriteFilesExec {
    /// The operator for `work`.
    pub fn new(work: RewriteWork) -> Self {
        let props = properties(rewrite_schema(), work.tasks.len());
        RewriteFilesExec {
            work: Arc::new(work),
            prepared: Arc::new(OnceLock::new()),
            props,
        }
    }

    /// The work.
    pub fn work(&self) -> &RewriteWork {
        &self.work
    }

    fn prepared(&self) -> Result<Arc<PreparedRewrite>> {
        self.prepared
            .get_or_init(|| {
                self.work
                    .job
                    .prepare()
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(Error::Wire)
    }
}

impl fmt::Debug for RewriteFilesExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RewriteFilesExec")
            .field("work", &self.work)
            .finish()
    }
}

impl DisplayAs for RewriteFilesExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "RewriteFilesExec: table={}, tasks={}, files={}",
            self.work.job.table,
            self.work.tasks.len(),
            self.work.job.tasks.len()
        )
    }
}

impl ExecutionPlan for RewriteFilesExec {
    fn name(&self) -> &str {
        "RewriteFilesExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        leaf_with_new_children(self, &children)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let prepared = self.prepared()?;
        let work = self.work.clone();
        check_partition(self.name(), partition, work.tasks.len())?;
        Ok(blocking_stream(rewrite_schema(), move || {
            rewrite_task(&work, &prepared, partition)
        }))
    }
}

/// Rewrites the files of task `partition` and returns their rows.
fn rewrite_task(
    work: &RewriteWork,
    prepared: &PreparedRewrite,
    partition: usize,
) -> Result<RecordBatch> {
    let store = work.store.open()?;
    // This attempt's files are told apart from another attempt's of the same task.
    let attempt = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let (mut task, mut file, mut state) = (
        UInt64Builder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut matched, mut purged, mut kept) = (
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
    );
    let (mut added, mut attempts) = (StringBuilder::new(), StringBuilder::new());
    for &i in work.tasks.get(partition).into_iter().flatten() {
        let o: FileOutcome = prepared.run(store.as_ref(), i, &attempt)?;
        // Tests kill the executor here: the task's new files are written, its outcome not
        // yet returned.
        #[cfg(feature = "failpoints")]
        if fail::eval("executor-dies-mid-task", |_| ()).is_some() {
            std::process::abort();
        }
        let files = o
            .added
            .into_iter()
            .map(|d| prepared.encode_data_file(d))
            .collect::<lethe_iceberg::Result<Vec<String>>>()?;
        task.append_value(i as u64);
        file.append_value(&o.data_file);
        state.append_value(variant_name(&o.state));
        matched.append_value(o.matched);
        purged.append_value(o.purged);
        kept.append_value(o.kept_rows);
        added.append_value(serde_json::to_string(&files).map_err(|e| Error::Wire(e.to_string()))?);
        attempts.append_value(&attempt);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(task.finish()),
        Arc::new(file.finish()),
        Arc::new(state.finish()),
        Arc::new(matched.finish()),
        Arc::new(purged.finish()),
        Arc::new(kept.finish()),
        Arc::new(added.finish()),
        Arc::new(attempts.finish()),
    ];
    Ok(RecordBatch::try_new(rewrite_schema(), columns)?)
}

/// The outcomes in `batches` (rows of [`RewriteFilesExec`]), by task index, with the
/// attempt that produced each.
pub fn rewrite_outcomes(
    prepared: &PreparedRewrite,
    batches: &[RecordBatch],
) -> Result<Vec<(usize, FileOutcome)>> {
    let mut out = Vec::new();
    for b in batches {
        let col = |name: &str| -> Result<&ArrayRef> {
            b.column_by_name(name)
                .ok_or_else(|| Error::Wire(format!("rewrite rows without column `{name}`")))
        };
        let task = col("task")?.as_primitive::<UInt64Type>();
        let file = col("data_file")?.as_string::<i32>();
        let state = col("state")?.as_string::<i32>();
        let matched = col("matched")?.as_primitive::<UInt64Type>();
        let purged = col("purged")?.as_primitive::<UInt64Type>();
        let kept = col("kept_rows")?.as_primitive::<UInt64Type>();
        let added = col("added")?.as_string::<i32>();
        for i in 0..b.num_rows() {
            let files: Vec<String> = serde_json::from_str(added.value(i))
                .map_err(|e| Error::Wire(format!("added files: {e}")))?;
            out.push((
                task.value(i) as usize,
                FileOutcome {
                    data_file: file.value(i).to_string(),
                    state: from_variant_name::<FileState>(state.value(i))?,
                    matched: matched.value(i),
                    purged: purged.value(i),
                    kept_rows: kept.value(i),
                    added: files
                        .iter()
                        .map(|f| prepared.decode_data_file(f))
                        .collect::<lethe_iceberg::Result<_>>()?,
                },
            ));
        }
    }
    Ok(out)
}
