//! The cluster's processes with lethe's codecs: a stock Ballista scheduler and executor
//! (the `ballista-scheduler` and `ballista-executor` libraries), as `lethe scheduler` and
//! `lethe executor` run them.
//!
//! Both listen on loopback (127.0.0.1) unless given another address, and say in their log
//! when they don't. With a cluster secret ([`ClusterSecret`]) the scheduler refuses every call
//! without its token (jobs, executors' registration, heartbeats and task reports) and so do
//! the executors' result servers; with `--tls-cert`/`--tls-key` they serve TLS. The
//! executors' task server, which Ballista builds with no hook, stays open and clear
//! (docs/cluster.md, "Security").
//!
//! Both run until stopped (SIGTERM, Ctrl-C). Timeouts are set for a cluster that notices a
//! lost executor in seconds, not Ballista's default three minutes: an executor sends a
//! heartbeat every [`ExecutorOptions::heartbeat`], and the scheduler gives up on one silent
//! for [`SchedulerOptions::executor_timeout`], then runs its tasks elsewhere.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use ballista_core::error::BallistaError;
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_core::utils::{GrpcServerConfig, create_grpc_server};
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_executor::flight_service::BallistaFlightService;
use ballista_executor::shutdown::Shutdown;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::create_scheduler;
use datafusion::prelude::SessionConfig;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use tonic::service::interceptor::InterceptedService;

use crate::codec::{LetheLogicalCodec, LethePhysicalCodec};
use crate::error::{Error, Result};
use crate::security::{ClientSecurity, ClientTls, ClusterSecret, Gate, ServerTls};

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
    /// The cluster's secret: every call must carry its token (None: calls are not checked).
    pub secret: Option<ClusterSecret>,
    /// The certificate served (None: clear).
    pub tls: Option<ServerTls>,
}

impl SchedulerOptions {
    /// Options for a scheduler listening on `bind`.
    pub fn new(bind: SocketAddr) -> Self {
        SchedulerOptions {
            bind,
            executor_timeout: Duration::from_secs(10),
            task_max_failures: 4,
            secret: None,
            tls: None,
        }
    }
}

/// Warns, at start, that a process listening where others can reach it is open to them as
/// far as it is.
fn warn_if_reachable(what: &str, ip: IpAddr, secret: bool, tls: bool) {
    if ip.is_loopback() {
        return;
    }
    if !secret || !tls {
        let missing = match (secret, tls) {
            (false, false) => "no cluster secret and no TLS",
            (false, true) => "no cluster secret",
            _ => "no TLS",
        };
        tracing::warn!(
            "{what} listening on {ip}, not loopback, with {missing}: whoever reaches this address can {} (docs/cluster.md)",
            if secret {
                "read jobs and results in clear, which carry subjects' IDs and value prefixes"
            } else {
                "submit jobs (run with the executors' storage credentials) and read jobs and results, which carry subjects' IDs and value prefixes"
            }
        );
    }
}

/// Runs a scheduler with lethe's codecs until it is stopped.
pub async fn run_scheduler(opts: SchedulerOptions) -> Result<()> {
    warn_if_reachable(
        "the scheduler is",
        opts.bind.ip(),
        opts.secret.is_some(),
        opts.tls.is_some(),
    );
    let tls = opts.tls.as_ref().map(ServerTls::config).transpose()?;
    // The scheduler's calls to executors' task servers carry the token too (those servers
    // don't check it; they are clear, so no TLS).
    let calls = ClientSecurity {
        secret: opts.secret.clone(),
        tls: None,
    };
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
        override_create_grpc_client_endpoint: Some(calls.endpoint_override()),
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| Error::Cluster(e.to_string()))?;
    let (max_encoding, max_decoding) = (
        config.grpc_server_max_encoding_message_size as usize,
        config.grpc_server_max_decoding_message_size as usize,
    );
    let scheduler =
        create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
            .await
            .map_err(|e| Error::Cluster(e.to_string()))?;
    // Ballista's own `start_grpc_service` has no TLS and no interceptor: the same scheduler
    // service, served by tonic behind the gate (without the REST API and the Flight SQL
    // proxy, which lethe doesn't use).
    let service = InterceptedService::new(
        SchedulerGrpcServer::new(scheduler)
            .max_encoding_message_size(max_encoding)
            .max_decoding_message_size(max_decoding),
        Gate::new(opts.secret.as_ref()),
    );
    let mut server = tonic::transport::Server::builder().tcp_nodelay(true);
    if let Some(tls) = tls {
        server = server
            .tls_config(tls)
            .map_err(|e| Error::Invalid(format!("TLS: {e}")))?;
    }
    tracing::info!(
        "scheduler listening on {} ({}, {})",
        opts.bind,
        if opts.secret.is_some() {
            "cluster secret required"
        } else {
            "no cluster secret"
        },
        if opts.tls.is_some() { "TLS" } else { "clear" }
    );
    server
        .add_service(service)
        .serve(opts.bind)
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
    /// The cluster's secret: sent on every call, required by the result server.
    pub secret: Option<ClusterSecret>,
    /// The certificate the result server serves (None: clear).
    pub tls: Option<ServerTls>,
    /// The CA the scheduler's and other executors' certificates are verified against (None:
    /// they are reached in clear).
    pub tls_ca: Option<ClientTls>,
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
            secret: None,
            tls: None,
            tls_ca: None,
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
    warn_if_reachable(
        "the executor is",
        opts.bind,
        opts.secret.is_some(),
        opts.tls.is_some(),
    );
    let server_tls = opts.tls.as_ref().map(ServerTls::config).transpose()?;
    let calls = ClientSecurity {
        secret: opts.secret.clone(),
        tls: opts.tls_ca.clone(),
    };
    let (scheduler_host, scheduler_port) = (opts.scheduler.ip().to_string(), opts.scheduler.port());
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
    let endpoint = calls.endpoint_override();
    let use_tls = calls.tls.is_some();
    let producer_endpoint = endpoint.clone();
    let defaults = ExecutorProcessConfig::default();
    let flight = flight_server(
        Gate::new(opts.secret.as_ref()),
        server_tls,
        defaults.grpc_max_encoding_message_size as usize,
        defaults.grpc_max_decoding_message_size as usize,
    );
    let config = ExecutorProcessConfig {
        bind_host: opts.bind.to_string(),
        external_host: Some(opts.bind.to_string()),
        port,
        grpc_port,
        scheduler_host,
        scheduler_port,
        scheduler_connect_timeout_seconds: 30,
        concurrent_tasks: opts.concurrent_tasks,
        work_dir: Some(work_dir.display().to_string()),
        executor_heartbeat_interval_seconds: opts.heartbeat.as_secs().max(1),
        override_logical_codec: Some(Arc::new(LetheLogicalCodec::default())),
        override_physical_codec: Some(Arc::new(LethePhysicalCodec::default())),
        // Connections to the scheduler, and tasks' fetches from other executors.
        override_create_grpc_client_endpoint: Some(endpoint),
        override_config_producer: Some(Arc::new(move || {
            SessionConfig::new_with_ballista()
                .with_ballista_override_create_grpc_client_endpoint(producer_endpoint.clone())
                .with_ballista_use_tls(use_tls)
        })),
        override_arrow_flight_service: Some(flight),
        ..defaults
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

/// The executor's result (Arrow Flight) server: Ballista's own service behind the gate,
/// with TLS when given.
fn flight_server(
    gate: Gate,
    tls: Option<tonic::transport::ServerTlsConfig>,
    max_encoding: usize,
    max_decoding: usize,
) -> Arc<ballista_executor::ArrowFlightServerProvider> {
    Arc::new(
        move |work_dir: String,
              address: SocketAddr,
              mut shutdown: Shutdown,
              grpc: GrpcServerConfig| {
            let gate = gate.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let service = InterceptedService::new(
                    FlightServiceServer::new(BallistaFlightService::new(work_dir))
                        .max_encoding_message_size(max_encoding)
                        .max_decoding_message_size(max_decoding),
                    gate,
                );
                let mut server = create_grpc_server(&grpc);
                if let Some(tls) = tls {
                    server = server.tls_config(tls).map_err(BallistaError::TonicError)?;
                }
                tracing::info!("executor results served on {address}");
                server
                    .add_service(service)
                    .serve_with_shutdown(address, async move { shutdown.recv().await })
                    .await
                    .map_err(BallistaError::TonicError)
            })
        },
    )
}

/// A fresh folder under the system's temporary folder.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("lethe-executor-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::Invalid(format!("work dir {}: {e}", dir.display())))?;
    Ok(dir)
}
