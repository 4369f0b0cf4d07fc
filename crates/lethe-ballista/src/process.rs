//! The cluster's processes with lethe's codecs: a stock Ballista scheduler and executor
//! (the `ballista-scheduler` and `ballista-executor` libraries), as `lethe scheduler` and
//! `lethe executor` run them.
//!
//! Both listen on loopback (127.0.0.1) unless given another address, and say in their log
//! when they don't: the cluster has no authentication and no TLS (docs/cluster.md), so an
//! address others can reach lets them submit jobs and read results.
//!
//! Both run until stopped (SIGTERM, Ctrl-C). Timeouts are set for a cluster that notices a
//! lost executor in seconds, not Ballista's default three minutes: an executor sends a
//! heartbeat every [`ExecutorOptions::heartbeat`], and the scheduler gives up on one silent
//! for [`SchedulerOptions::executor_timeout`], then runs its tasks elsewhere.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;

use crate::codec::{LetheLogicalCodec, LethePhysicalCodec};
use crate::error::{Error, Result};

/// How `lethe scheduler` runs. Defaults: executors lost after 10 s of silence, a task tried
/// 4 times.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Where to listen (executors and clients connect here).
    pub bind: SocketAddr,
    /// An executor silent this long is lost; its tasks run again elsewhere.
    pub executor_timeout: Duration,
    /// Attempts of one task before its job fails.
    pub task_max_failures: usize,
}

impl SchedulerOptions {
    /// Options for a scheduler listening on `bind`.
    pub fn new(bind: SocketAddr) -> Self {
        SchedulerOptions {
            bind,
            executor_timeout: Duration::from_secs(10),
            task_max_failures: 4,
        }
    }
}

/// Warns, at start, that a process listening where others can reach it is open to them.
fn warn_if_reachable(what: &str, ip: IpAddr) {
    if !ip.is_loopback() {
        tracing::warn!(
            "{what} listening on {ip}, not loopback: lethe's Ballista cluster has no authentication and no TLS — whoever reaches this address can submit jobs (run with the executors' storage credentials) and read jobs and results, which carry subjects' IDs and value prefixes in clear; keep it on a network only the cluster reaches (docs/cluster.md)"
        );
    }
}

/// Runs a scheduler with lethe's codecs until it is stopped.
pub async fn run_scheduler(opts: SchedulerOptions) -> Result<()> {
    warn_if_reachable("the scheduler is", opts.bind.ip());
    let timeout = opts.executor_timeout.as_secs().max(1);
    let config = SchedulerConfig {
        bind_host: opts.bind.ip().to_string(),
        external_host: opts.bind.ip().to_string(),
        bind_port: opts.bind.port(),
        executor_timeout_seconds: timeout,
        expire_dead_executor_interval_seconds: (timeout / 4).max(1),
        task_max_failures: opts.task_max_failures.max(1),
        // Finished jobs' results are fetched right away; their shuffle files go soon.
        finished_job_data_clean_up_interval_seconds: 60,
        finished_job_state_clean_up_interval_seconds: 300,
        override_logical_codec: Some(Arc::new(LetheLogicalCodec::default())),
        override_physical_codec: Some(Arc::new(LethePhysicalCodec::default())),
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| Error::Cluster(e.to_string()))?;
    tracing::info!("scheduler listening on {}", opts.bind);
    start_server(cluster, opts.bind, Arc::new(config))
        .await
        .map_err(|e| Error::Cluster(e.to_string()))
}

/// How `lethe executor` runs. Defaults: listening on 127.0.0.1, a task per core, a heartbeat
/// every 2 s, ports chosen free.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler's address.
    pub scheduler: SocketAddr,
    /// The address to listen on (and advertise to the scheduler). Default 127.0.0.1: an
    /// executor on another host than the scheduler and the clients must be given its address.
    pub bind: IpAddr,
    /// The Arrow Flight port results are fetched from (0: a free one).
    pub flight_port: u16,
    /// The port the scheduler sends tasks to (0: a free one).
    pub grpc_port: u16,
    /// Tasks run at once (0: one per core).
    pub concurrent_tasks: usize,
    /// Where task results are kept until fetched (None: a temporary folder).
    pub work_dir: Option<PathBuf>,
    /// How often the executor tells the scheduler it is alive.
    pub heartbeat: Duration,
}

impl ExecutorOptions {
    /// Options for an executor of the scheduler at `scheduler`.
    pub fn new(scheduler: SocketAddr) -> Self {
        ExecutorOptions {
            scheduler,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            flight_port: 0,
            grpc_port: 0,
            concurrent_tasks: 0,
            work_dir: None,
            heartbeat: Duration::from_secs(2),
        }
    }
}

/// A port on `ip` that was free a moment ago.
fn free_port(ip: IpAddr) -> Result<u16> {
    let l = TcpListener::bind((ip, 0))
        .map_err(|e| Error::Invalid(format!("no free port on {ip}: {e}")))?;
    Ok(l.local_addr()
        .map_err(|e| Error::Invalid(format!("no free port on {ip}: {e}")))?
        .port())
}

/// Runs an executor with lethe's codecs until it is stopped.
pub async fn run_executor(opts: ExecutorOptions) -> Result<()> {
    warn_if_reachable("the executor is", opts.bind);
    let port = match opts.flight_port {
        0 => free_port(opts.bind)?,
        p => p,
    };
    let grpc_port = match opts.grpc_port {
        0 => free_port(opts.bind)?,
        p => p,
    };
    // Held for the process's life: Ballista's own temporary folder would be gone at once.
    let temp;
    let work_dir = match &opts.work_dir {
        Some(d) => d.clone(),
        None => {
            temp = tempfile_dir()?;
            temp.clone()
        }
    };
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| Error::Invalid(format!("work dir {}: {e}", work_dir.display())))?;
    let config = ExecutorProcessConfig {
        bind_host: opts.bind.to_string(),
        external_host: Some(opts.bind.to_string()),
        port,
        grpc_port,
        scheduler_host: opts.scheduler.ip().to_string(),
        scheduler_port: opts.scheduler.port(),
        scheduler_connect_timeout_seconds: 30,
        concurrent_tasks: opts.concurrent_tasks,
        work_dir: Some(work_dir.display().to_string()),
        executor_heartbeat_interval_seconds: opts.heartbeat.as_secs().max(1),
        override_logical_codec: Some(Arc::new(LetheLogicalCodec::default())),
        override_physical_codec: Some(Arc::new(LethePhysicalCodec::default())),
        ..ExecutorProcessConfig::default()
    };
    tracing::info!(
        "executor on {}:{port} (tasks on {grpc_port}) for scheduler {}",
        opts.bind,
        opts.scheduler
    );
    let result = start_executor_process(Arc::new(config))
        .await
        .map_err(|e| Error::Cluster(e.to_string()));
    if opts.work_dir.is_none() {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    result
}

/// A fresh folder under the system's temporary folder.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("lethe-executor-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::Invalid(format!("work dir {}: {e}", dir.display())))?;
    Ok(dir)
}
