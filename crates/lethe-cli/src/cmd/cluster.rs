//! `--engine` on the commands whose per-file work can run on a cluster, and the cluster's
//! processes: `lethe scheduler` and `lethe executor` (a Ballista scheduler and executor with
//! lethe's operators).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use lethe::config::{EngineKind, WarehouseLocation};
use lethe::engine::Engines;
use lethe::workspace::Workspace;
use lethe_ballista::process::{ExecutorOptions, SchedulerOptions, run_executor, run_scheduler};
use lethe_ballista::security::{ClientSecurity, ClientTls, ClusterSecret, ServerTls};
use lethe_ballista::wire::StoreSpec;
use lethe_ballista::{BallistaEngine, EngineSettings};
use lethe_iceberg::clock::parse_duration;

/// Which engine runs the per-file work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    /// This process.
    Local,
    /// A Ballista cluster (`lethe scheduler` and `lethe executor`s sharing the warehouse).
    Ballista,
}

/// Where a command's per-file work runs.
#[derive(Debug, Clone, Default, Args)]
pub struct EngineArgs {
    /// Where the per-file work (reading and searching files, rewriting data files, a
    /// pipeline's SQL) runs: `local` (this process) or `ballista` (tasks on a Ballista cluster
    /// whose executors read and write the same warehouse). Default: lethe.toml's [engine]
    /// kind, else local.
    #[arg(long, value_enum)]
    pub engine: Option<EngineChoice>,
    /// The Ballista scheduler, HOST:PORT (default: lethe.toml's [engine] scheduler).
    #[arg(long, value_name = "HOST:PORT")]
    pub scheduler: Option<String>,
}

impl EngineArgs {
    /// The engines for `ws`: the flags over lethe.toml's `[engine]`. Returns the Ballista
    /// engine too, to report its jobs after the command.
    pub fn engines(
        &self,
        ws: &Workspace,
    ) -> anyhow::Result<(Engines, Option<Arc<BallistaEngine>>)> {
        let cfg = &ws.config.engine;
        let kind = match self.engine {
            Some(EngineChoice::Local) => EngineKind::Local,
            Some(EngineChoice::Ballista) => EngineKind::Ballista,
            None => cfg.kind,
        };
        if kind == EngineKind::Local {
            return Ok((Engines::default(), None));
        }
        let Some(scheduler) = self.scheduler.clone().or_else(|| cfg.scheduler.clone()) else {
            anyhow::bail!(
                "--engine ballista needs the scheduler: pass --scheduler HOST:PORT or set scheduler in lethe.toml's [engine]"
            );
        };
        let mut settings = EngineSettings::new(scheduler);
        settings.store = match ws.config.warehouse_location() {
            WarehouseLocation::Local(_) => StoreSpec::Local,
            WarehouseLocation::Object(root) => {
                let st = &ws.config.storage;
                StoreSpec::S3 {
                    bucket: lethe_iceberg::store::s3::bucket_of(&root)?,
                    endpoint: st.endpoint.clone(),
                    region: st.region.clone(),
                    path_style: st.path_style.unwrap_or(false),
                }
            }
        };
        if let Some(m) = cfg.task_mib {
            settings.task_bytes = m << 20;
        }
        if let Some(n) = cfg.task_objects {
            settings.task_objects = n;
        }
        settings.security = ClientSecurity {
            secret: ClusterSecret::load(cfg.secret_file.as_deref())?,
            tls: cfg.tls_ca.clone().map(ClientTls::new).transpose()?,
        };
        let engine = Arc::new(BallistaEngine::new(settings)?);
        Ok((
            Engines {
                scan: Some(engine.clone()),
                rewrite: Some(engine.clone()),
                query: Some(engine.clone()),
            },
            Some(engine),
        ))
    }
}

/// Prints what the cluster ran (one line per job, on stderr: counts and sizes only).
pub fn report_jobs(engine: Option<&BallistaEngine>) {
    let Some(engine) = engine else { return };
    let jobs = engine.jobs();
    for j in &jobs {
        eprintln!(
            "ballista: {}: {} tasks, {} files, {:.1} MiB ({:.2} MiB per task), plan {} KiB, {} submission(s), {:.2} s",
            j.job,
            j.tasks,
            j.items,
            j.bytes as f64 / 1048576.0,
            j.bytes as f64 / 1048576.0 / j.tasks.max(1) as f64,
            j.plan_bytes / 1024,
            j.submissions,
            j.seconds
        );
    }
}

/// The cluster's secret and TLS, for `lethe scheduler` and `lethe executor`.
#[derive(Debug, Args)]
pub struct SecurityArgs {
    /// The file holding the cluster's shared secret (mode 0600, at least 16 characters);
    /// default: the file LETHE_CLUSTER_SECRET_FILE names, else LETHE_CLUSTER_SECRET. Every call
    /// to this process must then carry it; without any, calls are not checked.
    #[arg(long, value_name = "PATH")]
    secret_file: Option<PathBuf>,
    /// The certificate (PEM) this process serves TLS with (with --tls-key).
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM, mode 0600) of --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl SecurityArgs {
    fn secret(&self) -> anyhow::Result<Option<ClusterSecret>> {
        Ok(ClusterSecret::load(self.secret_file.as_deref())?)
    }

    fn tls(&self) -> Option<ServerTls> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(ServerTls {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        }
    }
}

/// Arguments of `lethe scheduler`.
#[derive(Debug, Args)]
pub struct SchedulerArgs {
    /// Where to listen; executors and clients connect here (default loopback; another
    /// address only with a cluster secret and TLS, docs/cluster.md).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50050")]
    bind: SocketAddr,
    #[command(flatten)]
    security: SecurityArgs,
    /// An executor silent this long is lost and its tasks run again elsewhere.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::duration_flag)]
    executor_timeout: String,
    /// Attempts of one task before its job fails.
    #[arg(long, default_value_t = 4)]
    task_max_failures: usize,
}

/// Arguments of `lethe executor`.
#[derive(Debug, Args)]
pub struct ExecutorArgs {
    /// The scheduler to join.
    #[arg(long, value_name = "HOST:PORT")]
    scheduler: SocketAddr,
    /// The address to listen on and advertise (default 127.0.0.1: a cluster on one host).
    /// Give this machine's address for a cluster across hosts — with a cluster secret and TLS,
    /// on a network only the cluster reaches: the task port stays open and clear
    /// (docs/cluster.md).
    #[arg(long, value_name = "IP")]
    bind: Option<std::net::IpAddr>,
    #[command(flatten)]
    security: SecurityArgs,
    /// The CA (PEM) the scheduler's and other executors' certificates are checked against:
    /// the scheduler and the other executors' result servers are reached over TLS.
    #[arg(long, value_name = "PATH")]
    tls_ca: Option<PathBuf>,
    /// The port results are fetched from (default: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The port the scheduler sends tasks to (default: a free one).
    #[arg(long, default_value_t = 0)]
    grpc_port: u16,
    /// Tasks run at once (default: one per core).
    #[arg(long, default_value_t = 0)]
    tasks: usize,
    /// Where task results wait until fetched (default: a temporary folder, removed at exit).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

/// `lethe scheduler`: runs until stopped.
pub async fn scheduler(a: SchedulerArgs) -> anyhow::Result<ExitCode> {
    let mut opts = SchedulerOptions::new(a.bind);
    opts.executor_timeout = parse_duration(&a.executor_timeout)?
        .to_std()
        .map_err(|_| anyhow::anyhow!("--executor-timeout must be positive"))?;
    opts.task_max_failures = a.task_max_failures;
    opts.secret = a.security.secret()?;
    opts.tls = a.security.tls();
    eprintln!("lethe scheduler on {} (Ballista 53)", a.bind);
    run_scheduler(opts).await?;
    Ok(ExitCode::SUCCESS)
}

/// `lethe executor`: runs until stopped.
pub async fn executor(a: ExecutorArgs) -> anyhow::Result<ExitCode> {
    let mut opts = ExecutorOptions::new(a.scheduler);
    if let Some(b) = a.bind {
        opts.bind = b;
    }
    opts.flight_port = a.port;
    opts.grpc_port = a.grpc_port;
    opts.concurrent_tasks = a.tasks;
    opts.work_dir = a.work_dir;
    opts.secret = a.security.secret()?;
    opts.tls = a.security.tls();
    opts.tls_ca = a.tls_ca.map(ClientTls::new).transpose()?;
    eprintln!("lethe executor for scheduler {}", a.scheduler);
    run_executor(opts).await?;
    Ok(ExitCode::SUCCESS)
}
