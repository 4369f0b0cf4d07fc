//! `lethe tables` and `lethe inspect`.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use lethe_iceberg::catalog::TableName;

use crate::out;

/// Arguments of `lethe tables`.
#[derive(Debug, Args)]
pub struct TablesArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lethe inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The table (namespace.table).
    table: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Show manifest entries with bounds for every column (default: at most 8 columns each).
    #[arg(long)]
    all_columns: bool,
}

pub async fn tables(a: TablesArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let t = lethe_iceberg::inspect::tables(&ws.warehouse).await?;
    if a.json {
        out::json(&t)?;
    } else {
        let rows: Vec<Vec<String>> = t
            .iter()
            .map(|s| {
                vec![
                    s.table.clone(),
                    match s.rows {
                        Some(n) => out::count(n),
                        None => format!("? ({} stored)", out::count(s.rows_stored)),
                    },
                    s.data_files.to_string(),
                    s.delete_files.to_string(),
                    s.snapshots.to_string(),
                    s.refs.join(", "),
                ]
            })
            .collect();
        print!(
            "{}",
            out::table(
                &[
                    "table",
                    "rows",
                    "data files",
                    "delete files",
                    "snapshots",
                    "refs"
                ],
                &rows
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn inspect(a: InspectArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let v = lethe_iceberg::inspect::inspect(&ws.warehouse, &TableName::parse(&a.table)?).await?;
    if a.json {
        out::json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("table     {}", v.table);
    println!("location  {}", v.location);
    println!(
        "metadata  {} (format v{}, {} earlier metadata files in the log)",
        v.metadata_location, v.format_version, v.metadata_log
    );
    println!(
        "partition {}",
        if v.partition_spec.is_empty() {
            "unpartitioned"
        } else {
            &v.partition_spec
        }
    );
    println!("\nschema");
    for (id, name, t, req) in &v.schema {
        println!(
            "  {id:>3}  {name}  {t}{}",
            if *req { " (required)" } else { "" }
        );
    }
    println!("\nproperties");
    if v.properties.is_empty() {
        println!("  (none)");
    }
    for (k, val) in &v.properties {
        println!("  {k} = {val}");
    }
    println!("\nrefs");
    for (n, (kind, id)) in &v.refs {
        println!("  {n} ({kind}) -> {id}");
    }
    println!("\nsnapshots (oldest first)");
    for s in &v.snapshots {
        let keys: Vec<String> = s.summary.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "  {}  {}  {}  {}",
            s.snapshot_id,
            s.committed_at,
            s.operation,
            keys.join(" ")
        );
    }
    println!("\nmanifest entries of the current snapshot");
    for e in &v.entries {
        println!(
            "  {} {} {} rows  {}",
            e.status, e.content, e.records, e.file
        );
        for (i, (col, b)) in e.columns.iter().enumerate() {
            if i >= 8 && !a.all_columns {
                println!(
                    "      ... {} more columns (--all-columns)",
                    e.columns.len() - 8
                );
                break;
            }
            println!(
                "      {col}: {} .. {}  (values {}, nulls {})",
                b.lower.as_deref().unwrap_or("-"),
                b.upper.as_deref().unwrap_or("-"),
                b.values.map_or("-".into(), |x| x.to_string()),
                b.nulls.map_or("-".into(), |x| x.to_string())
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

impl TablesArgs {
    /// Text output.
    pub fn plain() -> Self {
        TablesArgs { json: false }
    }
}
