//! The `lethe` command line.
//!
//! Exit codes: 0 when the command did what it was asked and the result is complete; 1 when it
//! ran but the result is not (an erasure plan INCOMPLETE, a refusal, files still holding a
//! subject, a register incident); 2 for bad input or an error.

mod cmd;
mod logging;
mod out;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's malloc: an erasure makes and frees many short-lived buffers
/// (pages, batches, manifests) on several threads, which glibc serves with fresh pages from
/// the kernel each time; mimalloc reuses them. Half the page faults and 5–8% of the wall time
/// of a one-learner erasure (BENCHMARKS.md section 36).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`: milliseconds before freed memory goes
/// back to the kernel, -1 for never), which `libmimalloc-sys` names no constant for.
///
/// The allocator is mimalloc 2 (`libmimalloc-sys`'s `v2` feature), not its default 3: a
/// scale-100 erasure spends ~40% less system time with it (mimalloc 3 touches more fresh
/// memory, each 2 MiB of it zeroed by the kernel on first touch) and finishes 8–13% sooner
/// (BENCHMARKS.md section 40).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// mimalloc's `mi_option_os_tag`, three places after the purge delay (`mimalloc.h`).
#[cfg(test)]
const MI_OPTION_OS_TAG: libmimalloc_sys::mi_option_t = 18;

/// lethe erases a person from an Apache Iceberg lakehouse and proves it.
///
/// It plans an erasure from the catalog and column lineage, deletes rows copy-on-write,
/// expires old snapshots, rewrites manifests and removes unreferenced files, then reads every
/// file to show that none still holds the person. Retention rules and consent live in reviewed
/// files under governance/.
///
/// Start with `lethe demo init --dir demo` and `cd demo`, then `lethe tables`.
///
/// Exit codes: 0 when the result is complete; 1 when the command ran but the result is not (an
/// INCOMPLETE plan, a refusal, files still holding the subject, a register incident); 2 for bad
/// input or an error.
#[derive(Debug, Parser)]
#[command(name = "lethe", version, propagate_version = true)]
struct Cli {
    /// The configuration file (default: ./lethe.toml).
    #[arg(long, global = true, value_name = "FILE", env = "LETHE_CONFIG")]
    config: Option<PathBuf>,
    /// More log output: -v info, -vv debug (or LETHE_LOG=DIRECTIVES). Other crates' events
    /// (DataFusion, tokio-postgres, HTTP clients...) stop at info whatever is asked: their
    /// debug output carries statements' parameters and plans' literals.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build and tour the demo learning platform.
    #[command(subcommand)]
    Demo(cmd::demo::DemoCommand),
    /// Start a lethe folder for a catalog you already have: lethe.toml and skeleton governance
    /// files. Never changes the catalog or the warehouse.
    Init(cmd::discover::InitArgs),
    /// Propose classifications and identifiers (derived ones too) from column names and a
    /// bounded sample of values, as a diff against governance/metadata.toml; --write adds
    /// them, keeping every reviewed entry. Exit 1 when a table couldn't be read.
    Discover(cmd::discover::DiscoverArgs),
    /// List tables with rows, files, snapshots and refs.
    Tables(cmd::inspect::TablesArgs),
    /// Show a table's properties, snapshots, refs and manifest entries with readable bounds.
    Inspect(cmd::inspect::InspectArgs),
    /// Run SQL pipelines that build derived tables (and record their column lineage).
    #[command(subcommand)]
    Pipeline(cmd::pipeline::PipelineCommand),
    /// Apply the retention rules of governance/retention.toml for a given day.
    #[command(subcommand)]
    Retention(cmd::retention::RetentionCommand),
    /// Expire old snapshots, honouring each table's gc.enabled, history.expire.* and refs.
    Expire(cmd::maintenance::ExpireArgs),
    /// Rewrite manifests so that no live manifest keeps a DELETED entry (and its bounds).
    #[command(subcommand)]
    Manifests(cmd::maintenance::ManifestsCommand),
    /// Remove files no metadata references, older than a minimum age.
    Sweep(cmd::maintenance::SweepArgs),
    /// EXPLAIN ERASURE: plan one subject's erasure from the catalog and column lineage.
    ///
    /// Prints one step per table (DELETE, REWRITE, RECOMPUTE, NO_ACTION, UNRESOLVED), the
    /// coverage, the tables whose settings block an erasure, and the verdict. Changes nothing.
    /// Exit 0 only when the plan is COMPLETE.
    Explain(cmd::explain::ExplainArgs),
    /// ERASE: carry out a subject's plan, then expire, rewrite manifests and sweep.
    ///
    /// Refuses before changing anything when a table's settings would keep the subject.
    /// Notes the subject's traces in a case file (mode 0600), writes the register entry, runs
    /// the plan's steps (each commit records only erasure-request), then cleans up. Journaled:
    /// run the same command again (or --resume REQUEST) to finish an erasure that stopped.
    /// Needs the register key (LETHE_REGISTER_KEY or LETHE_REGISTER_KEY_FILE).
    Erase(cmd::erase::EraseArgs),
    /// The erasure drill: seed a synthetic subject (a reserved ID range in subjects.toml)
    /// through every source table and every registered store's seeding hook, run the
    /// pipelines, plan, erase, verify zero residual in every system of the manifest, and
    /// remove what it seeded. Exit 1, naming them, for stores without a probe or that can't be
    /// seeded, tables no lineage accounts for, tables it reached that no step covers,
    /// residuals, and systems past their time budget. Run it weekly (see the README).
    Drill(cmd::drill::DrillArgs),
    /// Requests as a workflow: record what a controller instructed (an erasure, or a
    /// restriction that never deletes), list them with days left and overdue ones, extend a
    /// due date with a reason, lift a restriction.
    #[command(subcommand)]
    Request(cmd::request::RequestCommand),
    /// Table properties generated from the classifications (metrics modes, expiry settings).
    #[command(subcommand)]
    Properties(cmd::properties::PropertiesCommand),
    /// PROVE: read every file of the warehouse (and [scan] roots) and search for a subject's
    /// traces. Exit 0 only when every file was read and none holds a trace.
    Scan(cmd::prove::ScanArgs),
    /// ATTEST: evidence of an erasure as data (JSON or one HTML page); exit 0 only when COMPLETE.
    ///
    /// Lists the kinds of trace the scan searched for; a column classified personal or
    /// sensitive (nested fields too) in a table the erasure changed that is neither an
    /// identifier, nor one of the subject's values, nor declared in subjects.toml
    /// `not_identifying` is named, and the physical purge is INCOMPLETE until it is.
    Attest(cmd::prove::AttestArgs),
    /// The erasure register: check tables and stores for erased subjects, replay erasures
    /// after a restore, filter batches before loading.
    #[command(subcommand)]
    Register(cmd::prove::RegisterCommand),
    /// The stores outside the warehouse (governance/stores.toml): list them in erasure order,
    /// check the registry and that every data destination is covered.
    #[command(subcommand)]
    Stores(cmd::stores::StoresCommand),
    /// What waits on a person — mentions of a subject in other rows, parts a legal hold
    /// keeps, stores waiting for a rebuild or a fix — and the decisions reviewers record on
    /// mentions (`lethe review decide`). Exit 1 while anything waits.
    Review(cmd::review::ReviewArgs),
    /// Re-probe the stores an erasure left pending: rebuilt stores after their next rebuild,
    /// stores left to their retention after its day. Prints the request's manifest; exit 0
    /// only when every store is verified.
    Verify(cmd::verify::VerifyArgs),
    /// Benchmark set-ups and timed operations (see BENCHMARKS.md).
    #[command(subcommand, hide = true)]
    Bench(cmd::bench::BenchCommand),
    /// Run a Ballista scheduler with lethe's operators (for `--engine ballista`); runs until
    /// stopped. Executors (`lethe executor`) and clients connect to it.
    Scheduler(cmd::cluster::SchedulerArgs),
    /// Run a Ballista executor with lethe's operators; runs until stopped. It reads and writes
    /// the warehouse the clients' catalogs name (a folder mounted at the same path, or object
    /// storage with this process's credentials) and logs nothing about a subject.
    Executor(cmd::cluster::ExecutorArgs),
    /// Questions about the recorded lineage.
    #[command(subcommand)]
    Lineage(cmd::explain::LineageCommand),
    /// Consent states and their history; tables built under a consent filter.
    #[command(subcommand)]
    Consent(cmd::consent::ConsentCommand),
    /// Run SQL as a principal, under governance/policy.toml (row filters, masks), audited.
    Query(cmd::query::QueryArgs),
    /// Check the access policy against the catalog; show what a principal may read.
    #[command(subcommand)]
    Policy(cmd::query::PolicyCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Libraries' errors record a backtrace when they are made if RUST_BACKTRACE is set, and
    // iceberg makes some on its normal path (a requirement checked at each commit, a column
    // asked whether it is a metadata column): a stack walk each, never shown, since lethe
    // prints errors without them. Panics still print theirs as RUST_BACKTRACE says; setting
    // RUST_LIB_BACKTRACE turns libraries' backtraces back on.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: no other thread runs yet (the runtime starts below).
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
    // `lethe tables | head` should end quietly, as Unix tools do, not panic on a closed pipe.
    // The cluster's servers keep SIGPIPE ignored: a peer that closes a connection must not
    // kill them.
    #[cfg(unix)]
    if !matches!(cli.command, Command::Scheduler(_) | Command::Executor(_)) {
        // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // Tests stop lethe at named failpoints through the FAILPOINTS variable (only in builds with
    // the `failpoints` feature).
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    logging::init(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lethe: can't start: {e}");
            return ExitCode::from(2);
        }
    };
    let config = cli.config.clone();
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Demo(c) => cmd::demo::run(c, config.as_deref()).await,
            Command::Init(a) => cmd::discover::init(a, config.as_deref()).await,
            Command::Discover(a) => cmd::discover::discover(a, config.as_deref()).await,
            Command::Tables(a) => cmd::inspect::tables(a, config.as_deref()).await,
            Command::Inspect(a) => cmd::inspect::inspect(a, config.as_deref()).await,
            Command::Pipeline(c) => cmd::pipeline::run(c, config.as_deref()).await,
            Command::Retention(c) => cmd::retention::run(c, config.as_deref()).await,
            Command::Expire(a) => cmd::maintenance::expire(a, config.as_deref()).await,
            Command::Manifests(c) => cmd::maintenance::manifests(c, config.as_deref()).await,
            Command::Sweep(a) => cmd::maintenance::sweep(a, config.as_deref()).await,
            Command::Explain(a) => cmd::explain::explain(a, config.as_deref()).await,
            Command::Review(a) => cmd::review::review(a, config.as_deref()).await,
            Command::Erase(a) => cmd::erase::erase(a, config.as_deref()).await,
            Command::Drill(a) => cmd::drill::drill(a, config.as_deref()).await,
            Command::Request(c) => cmd::request::run(c, config.as_deref()).await,
            Command::Properties(c) => cmd::properties::run(c, config.as_deref()).await,
            Command::Scan(a) => cmd::prove::scan(a, config.as_deref()).await,
            Command::Attest(a) => cmd::prove::attest(a, config.as_deref()).await,
            Command::Register(c) => cmd::prove::register(c, config.as_deref()).await,
            Command::Stores(c) => cmd::stores::run(c, config.as_deref()).await,
            Command::Verify(a) => cmd::verify::verify(a, config.as_deref()).await,
            Command::Bench(c) => cmd::bench::run(c, config.as_deref()).await,
            Command::Scheduler(a) => cmd::cluster::scheduler(a).await,
            Command::Executor(a) => cmd::cluster::executor(a).await,
            Command::Lineage(c) => cmd::explain::lineage(c, config.as_deref()).await,
            Command::Consent(c) => cmd::consent::run(c, config.as_deref()).await,
            Command::Query(a) => cmd::query::query(a, config.as_deref()).await,
            Command::Policy(c) => cmd::query::policy(c, config.as_deref()).await,
        }
    });
    // Every piece of work the command started has been awaited: the worker threads need not be
    // woken and joined one by one on the way out (the process's exit ends them).
    runtime.shutdown_background();
    // At exit mimalloc's last collection gives every freed page back to the kernel, one
    // `madvise` per span (~140 after a one-learner erasure, 3–6 ms), just before the kernel
    // takes the whole address space anyway: purging is turned off for the way out.
    // SAFETY: sets one of mimalloc's options; any thread may, at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lethe: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MI_OPTION_OS_TAG, MI_OPTION_PURGE_DELAY};

    #[test]
    fn the_purge_delay_option_is_mimallocs_own() {
        // mimalloc 2's default purge delay is 10 ms and its OS tag, three options on, 100 (no
        // neighbour of either shares both defaults): a wrong index — or mimalloc 3's option
        // table, where the delay defaults to 1000 — would switch off something else at exit.
        let env = |k| std::env::var_os(k).is_some();
        if !env("MIMALLOC_PURGE_DELAY") && !env("MIMALLOC_OS_TAG") {
            // SAFETY: reads two of mimalloc's options.
            let (delay, tag) = unsafe {
                (
                    libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
                    libmimalloc_sys::mi_option_get(MI_OPTION_OS_TAG),
                )
            };
            assert_eq!((delay, tag), (10, 100));
        }
    }
}
