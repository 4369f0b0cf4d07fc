//! SQL on the cluster: tables read as their current snapshots' data files.
//!
//! The client registers each table a query reads as a [`SnapshotTable`] (the table's schema,
//! its snapshot's data files, and how they are cut into tasks) and submits the query's
//! logical plan. The scheduler decodes the tables with lethe's logical codec and plans the
//! query as DataFusion would locally: each table's scan is a [`SnapshotScanExec`] whose
//! partitions are its tasks, the joins, aggregates and sorts above it are DataFusion's own.
//! An executor reads a task's files through its own store (the store the client's catalog
//! names, with the executor's own credentials) in the table's current schema, columns
//! matched by field id, as lethe reads data files everywhere.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::StreamExt;
use lethe_iceberg::ops::query_tasks::SnapshotFiles;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::wire::StoreSpec;

/// A table's snapshot as it travels: its files, the store they are in, and each task's files.
#[derive(Clone, Serialize, Deserialize)]
pub struct TableWork {
    /// The table's schema and files.
    pub files: SnapshotFiles,
    /// Where the files are.
    pub store: StoreSpec,
    /// Each task's indices into `files.files`.
    pub tasks: Vec<Vec<usize>>,
}

impl fmt::Debug for TableWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableWork")
            .field("files", &self.files)
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

impl TableWork {
    /// The table's Arrow schema (its current Iceberg schema's, as lethe reads files).
    pub fn arrow_schema(&self) -> Result<SchemaRef> {
        Ok(lethe_iceberg::writer::arrow_schema(
            &self.files.iceberg_schema()?,
        )?)
    }
}

/// A table whose scan reads a snapshot's data files on executors.
#[derive(Debug, Clone)]
pub struct SnapshotTable {
    work: Arc<TableWork>,
    schema: SchemaRef,
}

impl SnapshotTable {
    /// The table for `work`.
    pub fn new(work: TableWork) -> Result<Self> {
        let schema = work.arrow_schema()?;
        Ok(SnapshotTable {
            work: Arc::new(work),
            schema,
        })
    }

    /// What it reads.
    pub fn work(&self) -> &TableWork {
        &self.work
    }
}

#[async_trait]
impl TableProvider for SnapshotTable {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(SnapshotScanExec::new(
            self.work.clone(),
            projection.cloned(),
        )?))
    }
}

/// The scan of a [`SnapshotTable`]: partition `i` reads task `i`'s files.
pub struct SnapshotScanExec {
    work: Arc<TableWork>,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    props: Arc<PlanProperties>,
}

/// A [`SnapshotScanExec`] as it travels.
#[derive(Serialize, Deserialize)]
pub(crate) struct ScanWire {
    pub(crate) work: TableWork,
    pub(crate) projection: Option<Vec<usize>>,
}

impl SnapshotScanExec {
    /// The scan of `work`'s columns `projection` (None: all).
    pub fn new(work: Arc<TableWork>, projection: Option<Vec<usize>>) -> Result<Self> {
        let full = work.arrow_schema()?;
        let schema = match &projection {
            Some(p) => Arc::new(full.project(p)?),
            None => full,
        };
        let props = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(work.tasks.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(SnapshotScanExec {
            work,
            projection,
            schema,
            props,
        })
    }

    pub(crate) fn wire(&self) -> ScanWire {
        ScanWire {
            work: (*self.work).clone(),
            projection: self.projection.clone(),
        }
    }

    pub(crate) fn from_wire(w: ScanWire) -> Result<Self> {
        SnapshotScanExec::new(Arc::new(w.work), w.projection)
    }
}

impl fmt::Debug for SnapshotScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotScanExec")
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

impl DisplayAs for SnapshotScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SnapshotScanExec: table={}, tasks={}, files={}, columns={}",
            self.work.files.table,
            self.work.tasks.len(),
            self.work.files.files.len(),
            self.schema.fields().len()
        )
    }
}

impl ExecutionPlan for SnapshotScanExec {
    fn name(&self) -> &str {
        "SnapshotScanExec"
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
        crate::exec::leaf_with_new_children(self, &children)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        crate::exec::check_partition(self.name(), partition, self.work.tasks.len())?;
        let files: Vec<usize> = self.work.tasks.get(partition).cloned().unwrap_or_default();
        let work = self.work.clone();
        let projection = self.projection.clone();
        let schema = self.schema.clone();
        let iceberg_schema = Arc::new(work.files.iceberg_schema().map_err(Error::from)?);
        let store = work.store.open()?;
        // One file at a time on the blocking pool, its batches streamed as they are projected.
        let stream = futures::stream::iter(files)
            .then(move |i| {
                let (work, store, iceberg_schema, projection, schema) = (
                    work.clone(),
                    store.clone(),
                    iceberg_schema.clone(),
                    projection.clone(),
                    schema.clone(),
                );
                async move {
                    let read = tokio::task::spawn_blocking(move || -> Result<Vec<_>> {
                        let batches = work.files.read_file(store.as_ref(), &iceberg_schema, i)?;
                        batches
                            .into_iter()
                            .map(|b| {
                                let b = match &projection {
                                    Some(p) => b.project(p)?,
                                    None => b,
                                };
                                // The schema's own fields (metadata included), as planned.
                                Ok(datafusion::arrow::array::RecordBatch::try_new(
                                    schema.clone(),
                                    b.columns().to_vec(),
                                )?)
                            })
                            .collect()
                    })
                    .await
                    .map_err(|e| {
                        DataFusionError::Execution(format!("a lethe task panicked: {e}"))
                    })?;
                    read.map_err(DataFusionError::from)
                }
            })
            .flat_map(|r| match r {
                Ok(batches) => {
                    futures::stream::iter(batches.into_iter().map(Ok).collect::<Vec<_>>())
                }
                Err(e) => futures::stream::iter(vec![Err(e)]),
            });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}
