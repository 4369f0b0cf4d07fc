//! `lethe properties generate|apply|check`.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use lethe::lifecycle::properties::{apply_one, generate, missing};

use crate::out;

#[derive(Debug, Subcommand)]
pub enum PropertiesCommand {
    /// Print the properties governance asks of every table (metrics off for personal,
    /// sensitive and unclassified columns; history.expire.* from [snapshots]).
    Generate {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set them, and rewrite each changed table's data once so the metrics modes take effect.
    Apply {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List tables missing their generated properties (exit 1 when any does).
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(c: PropertiesCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let gov = ws.governance()?;
    let wh = &ws.warehouse;
    // Classifications name nested fields by path: every one must exist.
    lethe::governance::paths::check(&gov, &lethe::governance::paths::catalog_schemas(wh).await?)?;
    match c {
        PropertiesCommand::Generate { json } => {
            let mut all = Vec::new();
            for n in wh.tables().await? {
                all.push(generate(&wh.load(&n).await?, &gov));
            }
            if json {
                out::json(&all)?;
            } else {
                for g in &all {
                    println!("{}", g.table);
                    for (k, v) in &g.set {
                        println!("  {k} = {v}");
                    }
                    for k in &g.remove {
                        println!("  remove {k}");
                    }
                    if !g.unclassified.is_empty() {
                        println!(
                            "  (unclassified, treated as protected: {})",
                            g.unclassified.join(", ")
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PropertiesCommand::Apply { json } => {
            // Every table before any changes: one lethe may not change stops the whole run.
            for n in wh.tables().await? {
                wh.check_changeable(&wh.load(&n).await?)?;
            }
            let mut all = Vec::new();
            for n in wh.tables().await? {
                if !json {
                    out::progress(&format!("applying properties to {n}"));
                }
                all.push(apply_one(wh, &n, &gov).await?);
            }
            if json {
                out::json(&all)?;
            } else {
                out::progress_done();
                let rows: Vec<Vec<String>> = all
                    .iter()
                    .map(|a| {
                        vec![
                            a.table.clone(),
                            a.changed.to_string(),
                            if a.rewritten {
                                "yes".into()
                            } else {
                                "no".into()
                            },
                            a.snapshot_id.map_or("-".into(), |s| s.to_string()),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    out::table(
                        &["table", "properties changed", "data rewritten", "snapshot"],
                        &rows
                    )
                );
                println!(
                    "the files from before still hold full bounds until `lethe expire` and `lethe sweep` remove them"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PropertiesCommand::Check { json } => {
            let mut lacking = Vec::new();
            for n in wh.tables().await? {
                let t = wh.load(&n).await?;
                let m = missing(&t, &generate(&t, &gov));
                if !m.is_empty() {
                    lacking.push(serde_json::json!({ "table": n.to_string(), "missing": m }));
                }
            }
            if json {
                out::json(&lacking)?;
            } else if lacking.is_empty() {
                println!("every table has its generated properties");
            } else {
                for l in &lacking {
                    println!("{} lacks:", l["table"].as_str().unwrap_or_default());
                    for m in l["missing"].as_array().into_iter().flatten() {
                        println!("  {}", m.as_str().unwrap_or_default());
                    }
                }
            }
            Ok(if lacking.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
