//! `lethe demo init` and `lethe demo run`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use lethe_demo::platform::appdb::{APP_DB_URL_ENV, AppDb};
use lethe_demo::platform::{DemoCatalog, DemoOptions, init as demo_init};

use crate::out;

/// The catalogs `demo init` builds in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoCatalogKind {
    /// The embedded SQLite catalog and a local warehouse folder.
    Sqlite,
    /// The SQL catalog on PostgreSQL, over S3.
    Postgres,
    /// An Iceberg REST catalog, over S3.
    Rest,
}

#[derive(Debug, Subcommand)]
pub enum DemoCommand {
    /// Build the demo online learning platform: catalog, warehouse, governance, pipelines.
    ///
    /// Deterministic for a seed. Scale 1 has 5,000 learners, 100,000 learning events, 2,000
    /// support tickets and about 17,500 payments in 12 Iceberg v2 tables (8 sources, 4 built
    /// by SQL pipelines whose column lineage is recorded in lineage/); the application database
    /// they are loaded from (app/app.db, or PostgreSQL with --app-db postgres); an evaluation
    /// set in Git (evalset/), a search index rebuilt from support tickets (search/), the
    /// helpdesk vendor's API (`lethe demo vendor`) and governance/stores.toml registering them.
    ///
    /// By default in the embedded SQLite catalog and a local warehouse folder (nothing to
    /// install). `--catalog postgres` builds it in the SQL catalog on PostgreSQL
    /// (--catalog-uri postgresql://user@host:port/db, password from $PGPASSWORD) over S3
    /// (--warehouse s3://bucket/prefix); `--catalog rest` in an Iceberg REST catalog
    /// (--catalog-uri http(s)://host:port, --warehouse s3://warehouse; OAuth2 client
    /// credentials id:secret from $LETHE_REST_CREDENTIAL, or --sigv4 s3tables). S3 keys come
    /// from $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY or the AWS chain.
    Init {
        /// The folder to build it in.
        #[arg(long, default_value = "demo")]
        dir: PathBuf,
        /// The catalog: sqlite (embedded), postgres or rest.
        #[arg(long, value_enum, default_value_t = DemoCatalogKind::Sqlite)]
        catalog: DemoCatalogKind,
        /// postgres / rest: the catalog's URI.
        #[arg(long, value_name = "URI", env = "LETHE_CATALOG_URI", required_if_eq_any = [("catalog", "postgres"), ("catalog", "rest")])]
        catalog_uri: Option<String>,
        /// The catalog name (catalog_name in iceberg_tables; default lethe).
        #[arg(long, value_name = "NAME")]
        catalog_name: Option<String>,
        /// postgres / rest: the warehouse, s3://bucket/prefix (rest: the warehouse it serves).
        #[arg(long, value_name = "LOCATION", env = "LETHE_WAREHOUSE", required_if_eq_any = [("catalog", "postgres"), ("catalog", "rest")])]
        warehouse: Option<String>,
        /// rest: sign requests with AWS SigV4 for this signing name (e.g. s3tables).
        #[arg(long, value_name = "SIGNING_NAME")]
        sigv4: Option<String>,
        /// Object storage settings.
        #[command(flatten)]
        storage: crate::cmd::StorageArgs,
        /// Scale units.
        #[arg(long, default_value_t = 1)]
        scale: u32,
        /// Random seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Rebuild when the folder already holds a demo.
        #[arg(long)]
        force: bool,
        /// Where the application database lives: sqlite (app/app.db) or postgres (the URI in
        /// LETHE_DEMO_APP_DB_URL; its tables are replaced).
        #[arg(long, value_enum, default_value_t = AppDbKind::Sqlite)]
        app_db: AppDbKind,
        /// Only the warehouse and the application database: no evaluation set, search index,
        /// vendor or stores.toml.
        #[arg(long)]
        warehouse_only: bool,
        /// Write a Parquet bloom filter on `learner_id` in every table the demo generates with
        /// one (the table property write.parquet.bloom-filter-enabled.column.learner_id), as a
        /// warehouse tuned for lookups by ID: finding a learner then skips the files whose
        /// filter rules them out (BENCHMARKS.md section 39). A bloom filter answers "maybe" for
        /// an absent ID now and then, which `lethe scan` reports as a possible trace.
        #[arg(long)]
        bloom_filters: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The search index's nightly rebuild from support.tickets (a delete there is undone by it
    /// unless support.tickets was erased first).
    RebuildIndex,
    /// Serve the helpdesk vendor's API on the port in governance/stores.toml until stopped
    /// (`lethe erase` reaches it through the helpdesk store).
    Vendor,
    /// The demo's nightly job: reload crm.learners and support.tickets from the application
    /// database (which holds whoever nobody erased there), rerun the pipelines and rebuild the
    /// search index. Run `lethe register check` after it; with --suppress the reload drops
    /// erased learners first.
    Reload {
        /// Filter the export against the erasure register before loading it.
        #[arg(long)]
        suppress: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The whole job on the demo, step by step: build it, apply retention for its "today",
    /// plan learner 3590's erasure, turn statistics off for protected columns, withdraw
    /// consent, list and check the stores outside the warehouse, erase everywhere (the
    /// application database first; the vendor's API is served by this process), rebuild the
    /// search index and verify it, scan every file and attest. Ends with the verdict and the
    /// manifest (exit 0 only when COMPLETE).
    Run {
        /// The folder to build the demo in (rebuilt if it exists).
        #[arg(long, default_value = "demo")]
        dir: PathBuf,
        /// Scale units.
        #[arg(long, default_value_t = 1)]
        scale: u32,
        /// Random seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

/// The demo's application database engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AppDbKind {
    /// app/app.db in the demo folder.
    Sqlite,
    /// The PostgreSQL database LETHE_DEMO_APP_DB_URL names.
    Postgres,
}

fn app_db(kind: AppDbKind) -> anyhow::Result<AppDb> {
    Ok(match kind {
        AppDbKind::Sqlite => AppDb::Sqlite,
        AppDbKind::Postgres => {
            let url = std::env::var(APP_DB_URL_ENV).map_err(|_| {
                anyhow::anyhow!("--app-db postgres needs {APP_DB_URL_ENV}: the database's URI")
            })?;
            AppDb::Postgres(std::sync::Arc::new(secrecy::SecretString::from(url)))
        }
    })
}

/// Starts the demo's vendor API in this process, on the port its stores.toml names.
async fn start_vendor(dir: &Path) -> anyhow::Result<Option<lethe_demo::platform::vendor::Vendor>> {
    let Some(url) = lethe_demo::platform::vendor_url(dir)? else {
        return Ok(None);
    };
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("the helpdesk store's URL {url} has no port"))?;
    Ok(Some(
        lethe_demo::platform::vendor::Vendor::start(dir, port).await?,
    ))
}

pub async fn run(c: DemoCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    match c {
        DemoCommand::Reload { suppress, json } => {
            let ws = super::workspace(config)?;
            let r = lethe_demo::platform::reload(&ws, suppress).await?;
            if json {
                out::json(&r)?;
            } else {
                println!(
                    "reloaded from the application database: crm.learners {} row(s) read, {} suppressed, {} loaded; support.tickets {} loaded; reran {}{}",
                    r.rows_in_export,
                    r.suppressed,
                    r.rows_loaded,
                    r.tickets_loaded,
                    r.pipelines.join(", "),
                    r.indexed
                        .map(|n| format!("; search index rebuilt ({n} documents)"))
                        .unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        DemoCommand::RebuildIndex => {
            run_rebuild(config).await?;
            Ok(ExitCode::SUCCESS)
        }
        DemoCommand::Vendor => {
            let ws = super::workspace(config)?;
            let Some(v) = start_vendor(&ws.config.root).await? else {
                anyhow::bail!("this demo has no helpdesk store (built with --warehouse-only?)");
            };
            println!(
                "the helpdesk vendor's API listens on http://{} (Ctrl-C stops it)",
                v.addr
            );
            let _vendor = v;
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            }
        }
        DemoCommand::Run { dir, scale, seed } => walkthrough(dir, scale, seed).await,
        DemoCommand::Init {
            dir,
            catalog,
            catalog_uri,
            catalog_name,
            warehouse,
            sigv4,
            storage,
            scale,
            seed,
            force,
            app_db: kind,
            warehouse_only,
            bloom_filters,
            json,
        } => {
            let quiet = json;
            let uri = catalog_uri.unwrap_or_default();
            let warehouse = warehouse.unwrap_or_default();
            let catalog = match catalog {
                DemoCatalogKind::Sqlite => DemoCatalog::Sqlite,
                DemoCatalogKind::Postgres => DemoCatalog::Postgres { uri, warehouse },
                DemoCatalogKind::Rest => DemoCatalog::Rest {
                    uri,
                    warehouse,
                    sigv4,
                },
            };
            let report = demo_init(
                &DemoOptions {
                    dir,
                    scale,
                    seed,
                    force,
                    app_db: app_db(kind)?,
                    stores: !warehouse_only,
                    catalog,
                    catalog_name,
                    storage: storage.config(),
                    bloom_filters,
                },
                &out::progress_unless(quiet),
            )
            .await?;
            if json {
                out::json(&report)?;
            } else {
                out::progress_done();
                println!("demo built in {}", report.dir.display());
                let rows: Vec<Vec<String>> = report
                    .tables
                    .iter()
                    .map(|(t, n)| vec![t.clone(), out::count(*n)])
                    .collect();
                print!("{}", out::table(&["table", "rows"], &rows));
                println!("next: cd {} && lethe tables", report.dir.display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn heading(n: usize, title: &str, command: &str) {
    println!("\n== {n}. {title}\n$ {command}");
}

/// The README's main job.
async fn walkthrough(dir: PathBuf, scale: u32, seed: u64) -> anyhow::Result<ExitCode> {
    use lethe::config::Config;
    use lethe::workspace::Workspace;
    let started = std::time::Instant::now();
    heading(
        1,
        "Build the demo learning platform",
        &format!(
            "lethe demo init --dir {} --scale {scale} --seed {seed} --force",
            dir.display()
        ),
    );
    let report = demo_init(
        &DemoOptions {
            stores: true,
            ..DemoOptions::embedded(dir.clone(), scale, seed, true)
        },
        &|m| out::progress(m),
    )
    .await?;
    out::progress_done();
    let ws = Workspace::open(&Config::load(&report.dir.join("lethe.toml"))?)?;
    let cfg = Some(report.dir.join("lethe.toml"));
    let cfg = cfg.as_deref();
    heading(2, "The tables", "lethe tables");
    super::inspect::tables(super::inspect::TablesArgs::plain(), cfg).await?;
    let day = lethe_demo::platform::data::TODAY;
    heading(
        3,
        "Retention for the demo's today",
        &format!("lethe retention due --day {day} && lethe retention apply --day {day}"),
    );
    super::retention::run(
        super::retention::RetentionCommand::Due {
            day: day.into(),
            look_ahead: false,
            json: false,
        },
        cfg,
    )
    .await?;
    super::retention::run(
        super::retention::RetentionCommand::Apply {
            day: day.into(),
            dry_run: false,
            look_ahead: false,
            json: false,
        },
        cfg,
    )
    .await?;
    let subject = format!("learner={}", lethe_demo::platform::data::DEMO_LEARNER);
    // The helpdesk vendor's API, served by this process while the walkthrough runs (the plan
    // probes it too, to see that its probe can see the learner).
    let vendor = start_vendor(&report.dir).await?;
    heading(
        4,
        "Plan the learner's erasure",
        &format!("lethe explain --subject {subject}"),
    );
    super::explain::explain(super::explain::ExplainArgs::plain(&subject), cfg).await?;
    heading(
        5,
        "Keep personal values out of manifests",
        "lethe properties apply",
    );
    super::properties::run(
        super::properties::PropertiesCommand::Apply { json: false },
        cfg,
    )
    .await?;
    super::consent::walkthrough(6, lethe_demo::platform::data::DEMO_LEARNER, cfg).await?;
    heading(
        7,
        "The stores outside the warehouse, sources first",
        "lethe stores list && lethe stores check --destinations governance/destinations.txt",
    );
    super::stores::run(super::stores::StoresCommand::List { json: false }, cfg).await?;
    super::stores::run(
        super::stores::StoresCommand::plain_check(report.dir.join("governance/destinations.txt")),
        cfg,
    )
    .await?;
    heading(
        8,
        "Erase everywhere: the application database first, the warehouse, then the stores built from it (one writer here, so no minimum file age)",
        &format!("lethe erase --subject {subject} --request erasure-0001 --min-age 0"),
    );
    let code = super::erase::erase(
        super::erase::EraseArgs::plain(&subject, "erasure-0001", "0"),
        cfg,
    )
    .await?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    heading(
        9,
        "The search index's nightly rebuild, then verify the stores left pending",
        "lethe demo rebuild-index && lethe verify --request erasure-0001",
    );
    run_rebuild(cfg).await?;
    let code = super::verify::verify(super::verify::VerifyArgs::plain("erasure-0001"), cfg).await?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    drop(vendor);
    heading(
        10,
        "Prove it: read every file",
        "lethe scan --request erasure-0001",
    );
    super::prove::scan(super::prove::ScanArgs::request("erasure-0001"), cfg).await?;
    heading(
        11,
        "Attest",
        &format!(
            "lethe attest --request erasure-0001 --html {}",
            report.dir.join("attestation.html").display()
        ),
    );
    let code = super::prove::attest(
        super::prove::AttestArgs::plain("erasure-0001", Some(report.dir.join("attestation.html"))),
        cfg,
    )
    .await?;
    let _ = ws;
    println!(
        "\n(the whole job took {:.1}s; the demo is in {})",
        started.elapsed().as_secs_f64(),
        report.dir.display()
    );
    Ok(code)
}

/// `lethe demo rebuild-index`.
async fn run_rebuild(config: Option<&Path>) -> anyhow::Result<()> {
    let ws = super::workspace(config)?;
    let n = lethe_demo::platform::rebuild_index(&ws).await?;
    println!("search index rebuilt from support.tickets: {n} document(s)");
    Ok(())
}
