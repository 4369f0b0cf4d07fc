//! lethe's extension codecs and the table that carries a job into a plan.
//!
//! The client submits a logical plan that scans a [`WorkTable`]; the scheduler decodes the
//! table with [`LetheLogicalCodec`] and plans it into lethe's operator, splits the plan into
//! tasks (one per partition) and sends each to an executor, encoded with
//! [`LethePhysicalCodec`]. The scheduler and every executor must be built with both codecs
//! (`lethe scheduler`, `lethe executor`). Anything that is not lethe's goes to Ballista's own
//! codecs unchanged.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, Extension, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::TableReference;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;

use crate::exec::{ProofScanExec, RewriteFilesExec};
use crate::query::{ScanWire, SnapshotScanExec, SnapshotTable, TableWork};
use crate::wire::{REWRITE_MAGIC, SCAN_MAGIC, TABLE_MAGIC, TABLE_SCAN_MAGIC, decode, encode};

/// A table whose scan is one of lethe's operators: how a job enters a Ballista plan.
#[derive(Debug, Clone)]
pub struct WorkTable {
    plan: Arc<dyn ExecutionPlan>,
}

impl WorkTable {
    /// A table scanning as `plan` ([`ProofScanExec`] or [`RewriteFilesExec`]).
    pub fn new(plan: Arc<dyn ExecutionPlan>) -> Self {
        WorkTable { plan }
    }
}

#[async_trait]
impl TableProvider for WorkTable {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        self.plan.schema()
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
        let all = self.plan.schema().fields().len();
        if let Some(p) = projection
            && (p.len() != all || p.iter().enumerate().any(|(i, c)| i != *c))
        {
            return Err(DataFusionError::NotImplemented(
                "lethe's work tables are read whole".into(),
            ));
        }
        Ok(self.plan.clone())
    }
}

pub(crate) fn encode_plan(plan: &dyn ExecutionPlan, buf: &mut Vec<u8>) -> Option<DfResult<()>> {
    let any = plan.as_any();
    if let Some(p) = any.downcast_ref::<ProofScanExec>() {
        return Some(encode(SCAN_MAGIC, p.job(), buf).map_err(Into::into));
    }
    if let Some(p) = any.downcast_ref::<RewriteFilesExec>() {
        return Some(encode(REWRITE_MAGIC, p.work(), buf).map_err(Into::into));
    }
    if let Some(p) = any.downcast_ref::<SnapshotScanExec>() {
        return Some(encode(TABLE_SCAN_MAGIC, &p.wire(), buf).map_err(Into::into));
    }
    None
}

fn decode_plan(buf: &[u8]) -> Option<DfResult<Arc<dyn ExecutionPlan>>> {
    if let Some(job) = decode(SCAN_MAGIC, buf) {
        return Some(
            job.map(|j| Arc::new(ProofScanExec::new(j)) as Arc<dyn ExecutionPlan>)
                .map_err(Into::into),
        );
    }
    if let Some(work) = decode(REWRITE_MAGIC, buf) {
        return Some(
            work.map(|w| Arc::new(RewriteFilesExec::new(w)) as Arc<dyn ExecutionPlan>)
                .map_err(Into::into),
        );
    }
    if let Some(wire) = decode::<ScanWire>(TABLE_SCAN_MAGIC, buf) {
        return Some(
            wire.and_then(SnapshotScanExec::from_wire)
                .map(|p| Arc::new(p) as Arc<dyn ExecutionPlan>)
                .map_err(Into::into),
        );
    }
    None
}

/// The logical codec: lethe's [`WorkTable`]s, everything else Ballista's.
#[derive(Debug, Default)]
pub struct LetheLogicalCodec {
    inner: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for LetheLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> DfResult<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> DfResult<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn TableProvider>> {
        if let Some(plan) = decode_plan(buf) {
            return Ok(Arc::new(WorkTable::new(plan?)));
        }
        if let Some(work) = decode::<TableWork>(TABLE_MAGIC, buf) {
            return Ok(Arc::new(SnapshotTable::new(work?)?));
        }
        self.inner
            .try_decode_table_provider(buf, table_ref, schema, ctx)
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> DfResult<()> {
        if let Some(t) = node.as_any().downcast_ref::<WorkTable>()
            && let Some(r) = encode_plan(t.plan.as_ref(), buf)
        {
            return r;
        }
        if let Some(t) = node.as_any().downcast_ref::<SnapshotTable>() {
            return encode(TABLE_MAGIC, t.work(), buf).map_err(Into::into);
        }
        self.inner.try_encode_table_provider(table_ref, node, buf)
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn datafusion::datasource::file_format::FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn datafusion::datasource::file_format::FileFormatFactory>,
    ) -> DfResult<()> {
        self.inner.try_encode_file_format(buf, node)
    }
}

/// The physical codec: lethe's operators, everything else Ballista's.
#[derive(Debug, Default)]
pub struct LethePhysicalCodec {
    inner: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for LethePhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        match decode_plan(buf) {
            Some(plan) => plan,
            None => self.inner.try_decode(buf, inputs, ctx),
        }
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> DfResult<()> {
        match encode_plan(node.as_ref(), buf) {
            Some(r) => r,
            None => self.inner.try_encode(node, buf),
        }
    }
}
