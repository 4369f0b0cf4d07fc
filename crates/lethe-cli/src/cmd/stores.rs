//! `lethe stores`: the registry of stores outside the warehouse (governance/stores.toml).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use lethe::stores::registry;

use crate::out;

#[derive(Debug, Subcommand)]
pub enum StoresCommand {
    /// List the registered stores in erasure order: the warehouse's sources first, then the
    /// stores built from it, with kind, owner, retention, what each is built from and whether
    /// lethe can delete and probe it.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check the registry: every key and table it names, no cycle in depends_on, and (with
    /// --destinations) that every data destination of the platform is covered by a store.
    ///
    /// The destinations file is a list, one per line (`#` comments), e.g. the egress allowlist:
    /// `postgresql://app-db.internal:5432/app`, `https://api.helpdesk.example`, `git:evalset`,
    /// `file:exports`. A store covers its own settings (sqlite:PATH, postgres:VAR, git:PATH and
    /// its remotes, its URLs' origins, file:PATH) and the `destinations` it lists (exact, a
    /// prefix, or ending in `*`). Exit 1 naming every destination no store covers.
    Check {
        /// The platform's data destinations, one per line.
        #[arg(long, value_name = "FILE")]
        destinations: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(c: StoresCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let reg = registry::load(&ws.config.paths.governance)?;
    let tables: std::collections::BTreeSet<String> = ws
        .warehouse
        .tables()
        .await?
        .into_iter()
        .map(|t| t.to_string())
        .collect();
    registry::check_tables(&reg, &tables)?;
    match c {
        StoresCommand::List { json } => {
            let order = registry::order(&reg.value);
            let names: Vec<(&String, bool)> = order
                .before
                .iter()
                .map(|n| (n, true))
                .chain(order.after.iter().map(|n| (n, false)))
                .collect();
            if json {
                let list: Vec<serde_json::Value> = names
                    .iter()
                    .map(|(n, before)| {
                        let s = &reg.value.stores[*n];
                        serde_json::json!({
                            "store": n,
                            "before_warehouse": before,
                            "kind": s.kind,
                            "owner": s.owner,
                            "retention": s.retention,
                            "depends_on": s.sources(),
                            "deletable": s.deletable(),
                            "probed": s.probed(),
                            "basis": s.basis,
                        })
                    })
                    .collect();
                out::json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            if names.is_empty() {
                println!(
                    "no store registered in {} (every place outside the warehouse that holds a subject belongs there)",
                    reg.path.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let rows: Vec<Vec<String>> = names
                .iter()
                .map(|(n, before)| {
                    let s = &reg.value.stores[*n];
                    vec![
                        n.to_string(),
                        s.kind.to_string(),
                        s.owner.clone(),
                        if *before {
                            "before the warehouse".into()
                        } else {
                            "after the warehouse".into()
                        },
                        s.sources().join(", "),
                        s.retention.clone().unwrap_or_else(|| "-".into()),
                        match (s.deletable(), s.probed()) {
                            (true, true) => "delete + probe".into(),
                            (true, false) => format!(
                                "delete, no probe ({})",
                                s.basis.map(|b| b.to_string()).unwrap_or_default()
                            ),
                            (false, _) => format!(
                                "residual ({})",
                                s.basis.map(|b| b.to_string()).unwrap_or_default()
                            ),
                        },
                    ]
                })
                .collect();
            print!(
                "{}",
                out::table(
                    &[
                        "store",
                        "kind",
                        "owner",
                        "order",
                        "built from",
                        "retention",
                        "lethe can"
                    ],
                    &rows
                )
            );
            Ok(ExitCode::SUCCESS)
        }
        StoresCommand::Check { destinations, json } => {
            let uncovered = match &destinations {
                Some(f) => {
                    let text = std::fs::read_to_string(f)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
                    registry::uncovered(&reg, &ws.config.root, &text)
                }
                None => Vec::new(),
            };
            if json {
                out::json(&serde_json::json!({
                    "stores": reg.value.stores.len(),
                    "uncovered": uncovered,
                }))?;
            } else {
                println!(
                    "{}: {} store(s), every key and table checked, no cycle",
                    reg.path.display(),
                    reg.value.stores.len()
                );
                if let Some(f) = &destinations {
                    if uncovered.is_empty() {
                        println!("every destination in {} is covered by a store", f.display());
                    } else {
                        println!(
                            "not covered by any registered store ({} of the destinations in {}):",
                            uncovered.len(),
                            f.display()
                        );
                        for d in &uncovered {
                            println!("  {d}");
                        }
                        println!(
                            "register each in governance/stores.toml (or add it to a store's `destinations`)"
                        );
                    }
                }
            }
            Ok(if uncovered.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

impl StoresCommand {
    /// `check --destinations FILE`, text output.
    pub fn plain_check(destinations: PathBuf) -> Self {
        StoresCommand::Check {
            destinations: Some(destinations),
            json: false,
        }
    }
}
