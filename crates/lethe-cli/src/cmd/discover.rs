//! `lethe init` and `lethe discover`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use lethe::onboarding::discover::{
    DiscoverOptions, Status, check, discover as run_discover, mirror,
};
use lethe::onboarding::init::{InitOptions, init as run_init};

use crate::out;

/// Arguments of `lethe init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The catalog: the Iceberg SQL catalog on SQLite (sqlite:PATH, sqlite:////ABSOLUTE/PATH, or
    /// the file's path — the database PyIceberg's SqlCatalog or Java's JdbcCatalog uses), on
    /// PostgreSQL (postgresql://user@host:port/db, password from $PGPASSWORD), or an Iceberg REST
    /// catalog (rest+http(s)://host:port; OAuth2 client credentials id:secret from
    /// $LETHE_REST_CREDENTIAL, a bearer token from $LETHE_REST_TOKEN, or --sigv4).
    #[arg(long, value_name = "URI")]
    catalog: String,
    /// The warehouse: a folder (a path or file:///ABSOLUTE) or s3://bucket/prefix (for a REST
    /// catalog, the warehouse it serves, e.g. s3://warehouse).
    #[arg(long, value_name = "LOCATION")]
    warehouse: String,
    /// Object storage settings for an s3:// warehouse.
    #[command(flatten)]
    storage: crate::cmd::StorageArgs,
    /// REST: sign requests with AWS SigV4 for this service name (e.g. s3tables) instead of
    /// OAuth2; keys from $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY or the AWS chain.
    #[arg(long, value_name = "SIGNING_NAME")]
    sigv4: Option<String>,
    /// The catalog's name (catalog_name in iceberg_tables); found in the catalog when it holds
    /// only one.
    #[arg(long)]
    name: Option<String>,
    /// The folder to write lethe.toml and governance/ into.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Write lethe.toml again in a folder that holds a configuration (governance files are
    /// always kept).
    #[arg(long)]
    force: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lethe discover`.
#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// Rows sampled per table at most.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    sample: usize,
    /// Seconds per table at most, for sampling and for reading an identifier column.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    budget: u64,
    /// The random seed of the samples.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Add the proposals for unclassified columns to governance/metadata.toml (entries a
    /// person wrote are never changed).
    #[arg(long, conflicts_with_all = ["check", "mirror"])]
    write: bool,
    /// Compare metadata.toml with the tables' lethe.pii.* properties; exit 1 on drift. Samples
    /// nothing.
    #[arg(long, conflicts_with = "mirror")]
    check: bool,
    /// Write metadata.toml's classifications into each table's lethe.pii.* properties (a
    /// properties-only commit per table that differs). Samples nothing.
    #[arg(long)]
    mirror: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn init(a: InitArgs, _config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let report = run_init(&InitOptions {
        dir: a.dir,
        catalog: a.catalog,
        warehouse: a.warehouse,
        name: a.name,
        force: a.force,
        storage: a.storage.config(),
        sigv4_signing_name: a.sigv4,
    })
    .await?;
    if a.json {
        out::json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "lethe folder written in {} for catalog `{}` ({}), warehouse {}",
        report.dir.display(),
        report.catalog_name,
        report.catalog,
        report.warehouse
    );
    println!("the catalog and the warehouse were only read");
    let rows: Vec<Vec<String>> = report
        .tables
        .iter()
        .map(|t| {
            vec![
                t.table.clone(),
                t.columns.to_string(),
                t.unreadable.clone().unwrap_or_else(|| "ok".into()),
            ]
        })
        .collect();
    print!("{}", out::table(&["table", "columns", "metadata"], &rows));
    for p in &report.written {
        println!(
            "wrote {}",
            p.strip_prefix(&report.dir).unwrap_or(p).display()
        );
    }
    for p in &report.kept {
        println!(
            "kept {} as it was",
            p.strip_prefix(&report.dir).unwrap_or(p).display()
        );
    }
    println!("next, in {}:", report.dir.display());
    for n in &report.next {
        println!("  {n}");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn discover(a: DiscoverArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    if a.check {
        let drift = check(&ws).await?;
        let dirty: Vec<_> = drift.iter().filter(|d| !d.is_clean()).collect();
        if a.json {
            out::json(&drift)?;
        } else if dirty.is_empty() {
            println!("every table's lethe.pii.* properties match governance/metadata.toml");
        } else {
            for d in &dirty {
                println!(
                    "{}{}",
                    d.table,
                    if d.mirrored {
                        ""
                    } else {
                        " (not mirrored: run `lethe discover --mirror`)"
                    }
                );
                for m in &d.missing {
                    println!("  missing   {m}");
                }
                for m in &d.different {
                    println!("  different {m}");
                }
                for m in &d.stale {
                    println!("  stale     {m} (metadata.toml doesn't classify it so)");
                }
                for c in &d.unknown_columns {
                    println!("  metadata.toml classifies `{c}`, which the table doesn't have");
                }
            }
        }
        return Ok(if dirty.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    if a.mirror {
        let done = mirror(&ws).await?;
        if a.json {
            out::json(&done)?;
        } else if done.is_empty() {
            println!("every table already carries its classifications");
        } else {
            for m in &done {
                println!("{}: {} set, {} removed", m.table, m.set, m.removed);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let quiet = a.json;
    let report = run_discover(
        &ws,
        &DiscoverOptions {
            sample: a.sample,
            budget: Duration::from_secs(a.budget),
            seed: a.seed,
            write: a.write,
            ..Default::default()
        },
        &out::progress_unless(quiet),
    )
    .await?;
    let code = if report.unreadable.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if a.json {
        out::json(&report)?;
        return Ok(code);
    }
    out::progress_done();
    for t in &report.tables {
        println!(
            "\n{}: {} of {} rows sampled from {} of {} files{}",
            t.table,
            out::count(t.rows_sampled as u64),
            out::count(t.rows_total),
            t.files_read,
            t.files_total,
            if t.cut_short {
                " (cut short by the time budget)"
            } else {
                ""
            }
        );
        let rows: Vec<Vec<String>> = t
            .columns
            .iter()
            .map(|c| {
                let proposed = c.proposal.as_ref().map_or_else(
                    || "-".to_string(),
                    |p| {
                        let mut s = p.classification.to_string();
                        if let Some(i) = &p.identifies {
                            s.push_str(&format!(", identifies {i}"));
                        }
                        if let Some(d) = &p.derived {
                            s.push_str(&format!(", derived {} from {}", d.describe(), d.from));
                        }
                        s
                    },
                );
                let status = match c.status {
                    Status::New => "new".to_string(),
                    Status::Agrees => "agrees".to_string(),
                    Status::Differs => format!("kept {}", c.reviewed.clone().unwrap_or_default()),
                    Status::Reviewed => {
                        format!("reviewed {}", c.reviewed.clone().unwrap_or_default())
                    }
                    Status::Unclassified => "unclassified".to_string(),
                    Status::Fields => "its fields, below".to_string(),
                };
                let why = c
                    .proposal
                    .as_ref()
                    .map(|p| p.reasons.join("; "))
                    .unwrap_or_default();
                vec![c.column.clone(), c.ty.clone(), proposed, status, why]
            })
            .collect();
        print!(
            "{}",
            out::table(
                &["column", "type", "proposed", "metadata.toml", "why"],
                &rows
            )
        );
        if let Some(k) = &t.key {
            println!("proposed key: {} ({})", k.columns.join(", "), k.reason);
        }
    }
    for u in &report.unreadable {
        println!("\ncan't read {}: {}", u.table, u.error);
    }
    for n in &report.notes {
        println!("note: {n}");
    }
    let undeclared: Vec<_> = report.subjects.iter().filter(|s| !s.declared).collect();
    if !undeclared.is_empty() {
        println!(
            "\nproposed subjects (metadata.toml names them in `identifies`; declare the one an erasure names in governance/subjects.toml):"
        );
        for s in undeclared {
            for l in s.toml().lines() {
                println!("  {l}");
            }
        }
    }
    if report.diff.is_empty() {
        println!("\nno new proposals for governance/metadata.toml");
    } else {
        println!("\n{}", report.diff.trim_end());
    }
    println!(
        "\n{} column(s) {}, {} reviewed entr{} kept although discovery proposes otherwise, {} column(s) still unclassified (treated as closed)",
        report.proposed,
        if report.written {
            "added to governance/metadata.toml"
        } else {
            "proposed"
        },
        report.differing,
        if report.differing == 1 { "y" } else { "ies" },
        report.unclassified
    );
    if !report.unreadable.is_empty() {
        println!(
            "{} table(s) could not be read: their columns have no proposals",
            report.unreadable.len()
        );
    }
    if !report.written && (report.proposed > 0 || report.tables.iter().any(|t| t.key.is_some())) {
        println!("next: review the diff, then `lethe discover --write`");
    }
    Ok(code)
}
