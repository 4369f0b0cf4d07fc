//! The client side: splits lethe's per-file work into tasks, submits it to a Ballista
//! scheduler and collects the results. Implements [`lethe_scan::ScanEngine`] and
//! [`lethe_iceberg::ops::rewrite_tasks::RewriteEngine`], so the proof scan and copy-on-write
//! rewrites run on the cluster while the client keeps the commit.
//!
//! Guarantees:
//! - A job's results are complete or the job fails: every object gets exactly one report,
//!   every rewrite task exactly one outcome (the attempt Ballista kept), or an error.
//! - A rewrite job that fails, or whose tasks ran more than once (an executor died mid-task
//!   and its tasks ran again elsewhere), leaves no file of its own behind that its outcomes
//!   don't name: the client lists the table's data folder for the job's run id and removes
//!   the rest. A file an attempt writes after that (an executor cut off, still running) is
//!   never referenced and goes with the next sweep.
//! - A job that fails on the cluster's side (an executor lost after its results were ready
//!   and before they were fetched) is submitted again, at most [`EngineSettings::retries`]
//!   times; tasks are idempotent (a rewrite task writes new files, and only the outcomes
//!   the client collects are committed).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use ballista_core::extension::{SessionConfigExt, SessionStateExt};
use datafusion::arrow::array::RecordBatch;
use datafusion::error::Result as DfResult;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use lethe_iceberg::ops::rewrite_tasks::{FileOutcome, RewriteEngine, RewriteJob};
use lethe_iceberg::store::FileStore;
use lethe_scan::{FileReport, ObjectEntry, Progress, ScanEngine, SubjectTraces};
use serde::Serialize;

use crate::codec::{LetheLogicalCodec, LethePhysicalCodec, WorkTable};
use crate::error::{Error, Result};
use crate::exec::{ProofScanExec, RewriteFilesExec, rewrite_outcomes, scan_reports};
use crate::query::{SnapshotTable, TableWork};
use crate::wire::{RewriteWork, ScanJob, StoreSpec, WireSubject, group_by_size};
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider};
use lethe_iceberg::ops::query_tasks::{QueryEngine, QueryOutcome, SnapshotFiles};

/// How the client reaches the cluster and cuts work into tasks. Defaults: tasks of at most
/// 64 MiB or 256 objects for the scan, one data file per rewrite task, two resubmissions, an
/// empty job every 3 s while a job runs.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The scheduler, `HOST:PORT` (or `http://HOST:PORT`).
    pub scheduler: String,
    /// The store the executors read and write.
    pub store: StoreSpec,
    /// Bytes of objects per scan task at most (a larger object is a task of its own).
    pub task_bytes: u64,
    /// Objects per scan task at most.
    pub task_objects: usize,
    /// Data files per rewrite task.
    pub rewrite_files_per_task: usize,
    /// Times a job that failed on the cluster's side is submitted again.
    pub retries: u32,
    /// While a job runs, an empty job is submitted this often (see
    /// [`BallistaEngine::collect_nudging`]); default 3 s.
    pub revive_every: std::time::Duration,
    /// The cluster's secret, sent on every call, and the CA for TLS (default: none of them).
    pub security: crate::security::ClientSecurity,
}

impl EngineSettings {
    /// Settings for the scheduler at `scheduler` with the defaults.
    pub fn new(scheduler: impl Into<String>) -> Self {
        EngineSettings {
            scheduler: scheduler.into(),
            store: StoreSpec::Local,
            task_bytes: 64 << 20,
            task_objects: 256,
            rewrite_files_per_task: 1,
            retries: 2,
            revive_every: std::time::Duration::from_secs(3),
            security: Default::default(),
        }
    }

    fn url(&self) -> Result<String> {
        let s = self.scheduler.trim();
        let hostport = s
            .strip_prefix("http://")
            .or_else(|| s.strip_prefix("https://"))
            .or_else(|| s.strip_prefix("df://"))
            .unwrap_or(s);
        let ok = hostport
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            return Err(Error::Invalid(format!(
                "scheduler `{s}` is not HOST:PORT (e.g. 127.0.0.1:50050)"
            )));
        }
        let scheme = if self.security.tls.is_some() {
            "https"
        } else {
            "http"
        };
        Ok(format!("{scheme}://{hostport}"))
    }
}

/// One job the engine ran, for reports and benchmarks (counts and sizes only).
#[derive(Debug, Clone, Serialize)]
pub struct JobStats {
    /// `scan`, `rewrite <table>` or `pipeline <name>`.
    pub job: String,
    /// Tasks (partitions) of the job; for a pipeline, of its tables' scans (the stages
    /// above them, joins and aggregates, add tasks of their own).
    pub tasks: usize,
    /// Objects (scan) or data files (rewrite, pipeline) in it.
    pub items: usize,
    /// Bytes of those objects or files.
    pub bytes: u64,
    /// Bytes of the encoded plan each task receives.
    pub plan_bytes: usize,
    /// Times it was submitted (1 unless resubmitted after a cluster failure).
    pub submissions: u32,
    /// Seconds from the first submission to the last result.
    pub seconds: f64,
}

/// lethe's work on a Ballista cluster.
#[derive(Debug)]
pub struct BallistaEngine {
    settings: EngineSettings,
    url: String,
    jobs: Mutex<Vec<JobStats>>,
}

impl BallistaEngine {
    /// An engine for the scheduler in `settings` (checked for form only; the first job
    /// connects).
    pub fn new(settings: EngineSettings) -> Result<Self> {
        let url = settings.url()?;
        Ok(BallistaEngine {
            settings,
            url,
            jobs: Mutex::new(Vec::new()),
        })
    }

    /// The jobs run so far.
    pub fn jobs(&self) -> Vec<JobStats> {
        self.jobs.lock().map(|j| j.clone()).unwrap_or_default()
    }

    fn context(&self, job_name: &str) -> Result<SessionContext> {
        let config = SessionConfig::new_with_ballista()
            .with_ballista_logical_extension_codec(Arc::new(LetheLogicalCodec::default()))
            .with_ballista_physical_extension_codec(Arc::new(LethePhysicalCodec::default()))
            .with_ballista_job_name(job_name)
            .with_ballista_use_tls(self.settings.security.tls.is_some());
        let config = if self.settings.security.is_empty() {
            config
        } else {
            config.with_ballista_override_create_grpc_client_endpoint(
                self.settings.security.endpoint_override(),
            )
        };
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .build()
            .upgrade_for_ballista(self.url.clone())?;
        Ok(SessionContext::new_with_state(state))
    }

    /// Runs `plan` on the cluster (resubmitting after a cluster-side failure) and returns
    /// every partition's rows. `between` runs before each resubmission.
    async fn run(
        &self,
        job_name: &str,
        plan: Arc<dyn ExecutionPlan>,
        stats: JobStats,
        between: &(dyn Fn() + Sync),
    ) -> Result<Vec<RecordBatch>> {
        self.run_df(job_name, stats, between, |ctx| {
            let plan = plan.clone();
            async move { Ok(ctx.read_table(Arc::new(WorkTable::new(plan)))?) }
        })
        .await
    }

    /// Runs the DataFrame `make` builds in a fresh session on the cluster (resubmitting after
    /// a cluster-side failure) and returns every partition's rows.
    async fn run_df<F, Fut>(
        &self,
        job_name: &str,
        mut stats: JobStats,
        between: &(dyn Fn() + Sync),
        make: F,
    ) -> Result<Vec<RecordBatch>>
    where
        F: Fn(SessionContext) -> Fut,
        Fut: std::future::Future<Output = Result<datafusion::dataframe::DataFrame>>,
    {
        let started = Instant::now();
        let mut last = None;
        for attempt in 0..=self.settings.retries {
            if attempt > 0 {
                tracing::warn!(
                    "{job_name}: the cluster failed ({}); submitting again ({attempt} of {})",
                    last.as_ref()
                        .map(|e: &Error| e.to_string())
                        .unwrap_or_default(),
                    self.settings.retries
                );
                between();
            }
            stats.submissions = attempt + 1;
            let df = make(self.context(job_name)?).await?;
            match self.collect_nudging(df).await {
                Ok(batches) => {
                    stats.seconds = started.elapsed().as_secs_f64();
                    if let Ok(mut j) = self.jobs.lock() {
                        j.push(stats);
                    }
                    return Ok(batches);
                }
                Err(e) => last = Some(Error::Cluster(e.to_string())),
            }
        }
        Err(last.unwrap_or_else(|| Error::Cluster("no attempt was made".into())))
    }

    /// Collects `df`'s rows, submitting an empty job every [`EngineSettings::revive_every`]
    /// while it runs. Ballista 53's scheduler (push-staged) resets the tasks of an executor it
    /// declares lost but schedules them again only on its next event — a task status, a job
    /// submitted (`ExecutorLost` in `query_stage_scheduler.rs` posts no `ReviveOffers`) — so
    /// without another event a job whose other tasks are done would wait forever; the empty
    /// job is that event.
    async fn collect_nudging(
        &self,
        df: datafusion::dataframe::DataFrame,
    ) -> DfResult<Vec<RecordBatch>> {
        let collect = df.collect();
        tokio::pin!(collect);
        let mut tick = tokio::time::interval(self.settings.revive_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                r = &mut collect => return r,
                _ = tick.tick() => {
                    let empty = ProofScanExec::new(ScanJob {
                        prefix_len: 1,
                        subjects: Vec::new(),
                        store: StoreSpec::Local,
                        tasks: Vec::new(),
                    });
                    // On a task of its own: the job's own collect keeps being polled meanwhile.
                    match self.context("lethe revive") {
                        Ok(ctx) => {
                            tokio::spawn(async move {
                                let nudged = match ctx
                                    .read_table(Arc::new(WorkTable::new(Arc::new(empty))))
                                {
                                    Ok(d) => d.collect().await.map(|_| ()),
                                    Err(e) => Err(e),
                                };
                                if let Err(e) = nudged {
                                    tracing::debug!(
                                        "the empty job to revive the scheduler failed: {e}"
                                    );
                                }
                            });
                        }
                        Err(e) => {
                            tracing::debug!("the empty job to revive the scheduler failed: {e}")
                        }
                    }
                }
            }
        }
    }

    /// The proof scan of `objects` on the cluster; one report per object, in order.
    pub async fn scan(
        &self,
        subjects: &[SubjectTraces],
        prefix_len: usize,
        objects: Vec<ObjectEntry>,
    ) -> Result<Vec<FileReport>> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let sizes: Vec<u64> = objects.iter().map(|o| o.bytes).collect();
        let groups = group_by_size(&sizes, self.settings.task_bytes, self.settings.task_objects);
        let n = objects.len();
        let mut objects = objects.into_iter();
        let tasks: Vec<Vec<ObjectEntry>> = groups
            .iter()
            .map(|g| objects.by_ref().take(g.len()).collect())
            .collect();
        let job = ScanJob {
            prefix_len,
            subjects: subjects
                .iter()
                .map(|s| WireSubject::of(s, prefix_len))
                .collect(),
            store: self.settings.store.clone(),
            tasks,
        };
        let plan = ProofScanExec::new(job);
        let stats = JobStats {
            job: "scan".into(),
            tasks: plan.job().tasks.len(),
            items: n,
            bytes: sizes.iter().sum(),
            plan_bytes: plan_bytes(&plan),
            submissions: 0,
            seconds: 0.0,
        };
        let batches = self
            .run("lethe scan", Arc::new(plan), stats, &|| ())
            .await?;
        let reports = scan_reports(&batches)?;
        if reports.len() != n || reports.iter().enumerate().any(|(i, (o, _))| *o != i as u64) {
            return Err(Error::Cluster(format!(
                "the cluster returned reports for {} of {n} objects",
                reports.len()
            )));
        }
        Ok(reports.into_iter().map(|(_, r)| r).collect())
    }

    /// The per-file work of `job` on the cluster; one outcome per task, in order.
    pub async fn rewrite(
        &self,
        job: &RewriteJob,
        store: &dyn FileStore,
    ) -> Result<Vec<FileOutcome>> {
        let prepared = job.prepare()?;
        if job.tasks.is_empty() {
            return Ok(Vec::new());
        }
        let sizes: Vec<u64> = job.tasks.iter().map(|t| t.bytes).collect();
        let groups = group_by_size(&sizes, u64::MAX, self.settings.rewrite_files_per_task);
        let work = RewriteWork {
            job: job.clone(),
            store: self.settings.store.clone(),
            tasks: groups,
        };
        let plan = RewriteFilesExec::new(work);
        let stats = JobStats {
            job: format!("rewrite {}", job.table),
            tasks: plan.work().tasks.len(),
            items: job.tasks.len(),
            bytes: sizes.iter().sum(),
            plan_bytes: plan_bytes(&plan),
            submissions: 0,
            seconds: 0.0,
        };
        let data = format!("{}/data", prepared.location());
        let remove_own = |keep: &HashSet<String>| {
            remove_job_files(store, &data, job, keep);
        };
        let name = format!("lethe rewrite {}", job.table);
        let batches = match self
            .run(
                &name,
                Arc::new(plan),
                stats,
                &|| remove_own(&HashSet::new()),
            )
            .await
        {
            Ok(b) => b,
            Err(e) => {
                remove_own(&HashSet::new());
                return Err(e);
            }
        };
        let checked = rewrite_outcomes(&prepared, &batches).and_then(|mut outcomes| {
            outcomes.sort_by_key(|(i, _)| *i);
            let complete = outcomes.len() == job.tasks.len()
                && outcomes.iter().enumerate().all(|(k, (i, _))| *i == k);
            if complete {
                Ok(outcomes)
            } else {
                Err(Error::Cluster(format!(
                    "the cluster returned {} outcomes for {} rewrite tasks",
                    outcomes.len(),
                    job.tasks.len()
                )))
            }
        });
        let outcomes = match checked {
            Ok(o) => o,
            Err(e) => {
                remove_own(&HashSet::new());
                return Err(e);
            }
        };
        let keep: HashSet<String> = outcomes
            .iter()
            .flat_map(|(_, o)| o.added.iter().map(|d| normalized(store, d.file_path())))
            .collect();
        remove_own(&keep);
        Ok(outcomes.into_iter().map(|(_, o)| o).collect())
    }
}

impl BallistaEngine {
    /// Registers `tables` in `ctx` as `namespace.name`, each read as its snapshot's files in
    /// tasks of one file.
    fn register(&self, ctx: &SessionContext, tables: &[SnapshotFiles]) -> Result<()> {
        let catalog = ctx
            .catalog("datafusion")
            .ok_or_else(|| Error::Invalid("DataFusion has no default catalog".into()))?;
        for t in tables {
            let name = lethe_iceberg::catalog::TableName::parse(&t.table)?;
            let ns = name.namespace_str();
            let schema = match catalog.schema(&ns) {
                Some(s) => s,
                None => {
                    let s: Arc<dyn SchemaProvider> = Arc::new(MemorySchemaProvider::new());
                    catalog.register_schema(&ns, s.clone())?;
                    s
                }
            };
            let work = TableWork {
                files: t.clone(),
                store: self.settings.store.clone(),
                tasks: (0..t.files.len()).map(|i| vec![i]).collect(),
            };
            schema.register_table(name.name.clone(), Arc::new(SnapshotTable::new(work)?))?;
        }
        Ok(())
    }

    /// `sql` over `tables` on the cluster; declined when its plan can't be sent (a function
    /// or an operator the scheduler's codec doesn't know).
    pub async fn query(
        &self,
        name: &str,
        sql: &str,
        tables: &[SnapshotFiles],
    ) -> Result<QueryOutcome> {
        let job_name = format!("lethe pipeline {name}");
        let ctx = self.context(&job_name)?;
        self.register(&ctx, tables)?;
        let df = ctx.sql(sql).await?;
        let plan_bytes = match datafusion_proto::bytes::logical_plan_to_bytes_with_extension_codec(
            df.logical_plan(),
            &LetheLogicalCodec::default(),
        ) {
            Ok(b) => b.len(),
            Err(e) => {
                return Ok(QueryOutcome::Declined(format!(
                    "its plan can't be sent to the cluster ({e})"
                )));
            }
        };
        let stats = JobStats {
            job: format!("pipeline {name}"),
            tasks: tables.iter().map(|t| t.files.len().max(1)).sum(),
            items: tables.iter().map(|t| t.files.len()).sum(),
            bytes: tables
                .iter()
                .flat_map(|t| t.files.iter().map(|f| f.bytes))
                .sum(),
            plan_bytes,
            submissions: 0,
            seconds: 0.0,
        };
        let batches = self
            .run_df(&job_name, stats, &|| (), |ctx| async move {
                self.register(&ctx, tables)?;
                Ok(ctx.sql(sql).await?)
            })
            .await?;
        Ok(QueryOutcome::Rows(batches))
    }
}

fn normalized(store: &dyn FileStore, location: &str) -> String {
    store
        .normalize(location)
        .unwrap_or_else(|_| location.to_string())
}

/// Removes the files of `job` under `data` that `keep` doesn't name: attempts whose outcome
/// was not used. A file that can't be listed or removed stays for the sweep.
fn remove_job_files(store: &dyn FileStore, data: &str, job: &RewriteJob, keep: &HashSet<String>) {
    let listed = match store.list(data) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("could not list {data} for the files of unfinished tasks: {e}");
            return;
        }
    };
    for f in listed {
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("listing {data} for the files of unfinished tasks failed: {e}");
                return;
            }
        };
        if job.is_own_file(&f.location) && !keep.contains(&normalized(store, &f.location)) {
            match store.delete(&f.location) {
                Ok(()) => tracing::info!(
                    "removed {} (a task attempt whose outcome was not used)",
                    f.location
                ),
                Err(e) => tracing::warn!("could not remove {}: {e}; the sweep will", f.location),
            }
        }
    }
}

fn plan_bytes(plan: &dyn ExecutionPlan) -> usize {
    let mut buf = Vec::new();
    match crate::codec::encode_plan(plan, &mut buf) {
        Some(Ok(())) => buf.len(),
        _ => 0,
    }
}

#[async_trait]
impl ScanEngine for BallistaEngine {
    fn name(&self) -> &str {
        "ballista"
    }

    async fn scan_objects(
        &self,
        subjects: &[SubjectTraces],
        prefix_len: usize,
        objects: Vec<ObjectEntry>,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> lethe_scan::Result<Vec<FileReport>> {
        let files_total = objects.len() as u64;
        let bytes_total = objects.iter().map(|o| o.bytes).sum();
        let reports = self.scan(subjects, prefix_len, objects).await?;
        progress(Progress {
            files_done: files_total,
            files_total,
            bytes_done: bytes_total,
            bytes_total,
        });
        Ok(reports)
    }
}

#[async_trait]
impl RewriteEngine for BallistaEngine {
    fn name(&self) -> &str {
        "ballista"
    }

    async fn rewrite_files(
        &self,
        job: &RewriteJob,
        store: &dyn FileStore,
    ) -> lethe_iceberg::Result<Vec<FileOutcome>> {
        Ok(self.rewrite(job, store).await?)
    }
}

#[async_trait]
impl QueryEngine for BallistaEngine {
    fn name(&self) -> &str {
        "ballista"
    }

    async fn query(
        &self,
        name: &str,
        sql: &str,
        tables: &[SnapshotFiles],
    ) -> lethe_iceberg::Result<QueryOutcome> {
        Ok(BallistaEngine::query(self, name, sql, tables).await?)
    }
}
