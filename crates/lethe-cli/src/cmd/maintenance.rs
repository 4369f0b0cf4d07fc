//! `lethe expire`, `lethe manifests rewrite`, `lethe sweep`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use lethe::workspace::Workspace;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::clock::{parse_duration, parse_instant};
use lethe_iceberg::ops::expire::{Cutoff, ExpireOptions, expire as expire_table};
use lethe_iceberg::ops::manifests::rewrite_manifests;
use lethe_iceberg::ops::sweep::sweep as sweep_table;

use crate::out;

/// Arguments of `lethe expire`.
#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// Tables to expire (default: every table).
    tables: Vec<String>,
    /// Expire snapshots older than this: RFC 3339, a day, or an age such as 5d.
    #[arg(long, conflicts_with = "by_age", value_parser = super::instant_flag)]
    older_than: Option<String>,
    /// Expire by each table's history.expire.max-snapshot-age-ms (default 5 days).
    #[arg(long)]
    by_age: bool,
    /// Report what would be expired; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Keep the files only expired snapshots reached (leave them to `lethe sweep`).
    #[arg(long)]
    keep_files: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ManifestsCommand {
    /// Rewrite the manifests of tables whose current snapshot keeps DELETED entries.
    ///
    /// A DELETED entry keeps the removed file's column bounds, which can be a removed person's
    /// values. The rewrite commits a `replace` snapshot; expire the snapshot before it and
    /// sweep to remove the old manifests.
    Rewrite {
        /// Tables (default: every table).
        tables: Vec<String>,
        /// Rewrite even when no manifest holds a DELETED entry.
        #[arg(long)]
        force: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `lethe sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Tables to sweep (default: every table).
    tables: Vec<String>,
    /// Minimum file age (default from governance/retention.toml [sweep], 72h). Use 0 only when
    /// a single process writes the catalog.
    #[arg(long, value_parser = super::duration_flag)]
    min_age: Option<String>,
    /// List the files; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

async fn names(ws: &Workspace, tables: &[String]) -> anyhow::Result<Vec<TableName>> {
    if tables.is_empty() {
        return Ok(ws.warehouse.tables().await?);
    }
    Ok(tables
        .iter()
        .map(|t| TableName::parse(t))
        .collect::<Result<_, _>>()?)
}

pub async fn expire(a: ExpireArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let cutoff = match (&a.older_than, a.by_age) {
        (Some(t), _) => Cutoff::OlderThan(parse_instant(t, ws.clock.now())?),
        (None, true) => Cutoff::ByAge,
        (None, false) => anyhow::bail!("say which snapshots: --older-than TIME or --by-age"),
    };
    let options = ExpireOptions {
        cutoff,
        dry_run: a.dry_run,
        keep_files: a.keep_files,
    };
    let mut reports = Vec::new();
    let mut refused = Vec::new();
    for name in names(&ws, &a.tables).await? {
        match expire_table(&ws.warehouse, &name, options, ws.clock.as_ref()).await {
            Ok(r) => reports.push(r),
            Err(lethe_iceberg::Error::Refused(why)) => refused.push(why),
            Err(e) => return Err(e.into()),
        }
    }
    if a.json {
        out::json(&serde_json::json!({ "expired": reports, "refused": refused }))?;
    } else {
        for r in &reports {
            println!(
                "{}: {} {} snapshot(s), kept {}, removed {} file(s){}",
                r.table,
                if a.dry_run { "would expire" } else { "expired" },
                r.expired.len(),
                r.kept.len(),
                r.files_deleted,
                if r.refs_removed.is_empty() {
                    String::new()
                } else {
                    format!(", refs removed: {}", r.refs_removed.join(", "))
                }
            );
            for k in &r.kept {
                println!("    kept {}: {}", k.snapshot_id, k.reason);
            }
        }
        for why in &refused {
            println!("refused: {why}");
        }
    }
    Ok(if refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub async fn manifests(c: ManifestsCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let ManifestsCommand::Rewrite {
        tables,
        force,
        json,
    } = c;
    let mut reports = Vec::new();
    for name in names(&ws, &tables).await? {
        reports.push(rewrite_manifests(&ws.warehouse, &name, BTreeMap::new(), force).await?);
    }
    if json {
        out::json(&reports)?;
    } else {
        for r in &reports {
            println!(
                "{}: {} manifest(s), {} with DELETED entries, {}",
                r.table,
                r.manifests_before,
                r.with_deleted_entries,
                r.snapshot_id
                    .map_or("nothing to rewrite".into(), |s| format!(
                        "rewritten in snapshot {s}"
                    ))
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn sweep(a: SweepArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let min_age = match &a.min_age {
        Some(s) => parse_duration(s)?,
        None => ws.governance()?.retention.min_file_age(),
    };
    let mut reports = Vec::new();
    let mut refused = Vec::new();
    for name in names(&ws, &a.tables).await? {
        match sweep_table(&ws.warehouse, &name, min_age, a.dry_run, ws.clock.as_ref()).await {
            Ok(r) => reports.push(r),
            Err(lethe_iceberg::Error::Refused(why)) => refused.push(why),
            Err(e) => return Err(e.into()),
        }
    }
    if a.json {
        out::json(&serde_json::json!({ "swept": reports, "refused": refused }))?;
    } else {
        for r in &reports {
            println!(
                "{}: {} file(s), {} referenced, {} unreferenced, {} {}, {} younger than {}h",
                r.table,
                r.files,
                r.referenced,
                r.unreferenced_count,
                r.removed,
                if a.dry_run {
                    "would be removed"
                } else {
                    "removed"
                },
                r.too_young,
                min_age.num_hours()
            );
            if a.dry_run {
                for u in &r.unreferenced {
                    println!(
                        "    {} ({} bytes, {}s old)",
                        u.location, u.size, u.age_seconds
                    );
                }
            }
        }
        for why in &refused {
            println!("refused: {why}");
        }
    }
    Ok(if refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
