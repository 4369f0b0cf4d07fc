//! `lethe query --as PRINCIPAL "SQL"` and `lethe policy check|show`.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use lethe::access::query::{Enforcer, query as run_query};

use crate::out;

/// Arguments of `lethe query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The principal to run as (a name in governance/policy.toml [principals]).
    #[arg(long = "as", value_name = "PRINCIPAL")]
    principal: String,
    /// One SELECT statement (or EXPLAIN of one).
    sql: String,
    /// Print JSON: the decision (principal, role, tables, rules) and the rows.
    #[arg(long)]
    json: bool,
}

impl QueryArgs {
    /// A query with text output.
    pub fn plain(principal: &str, sql: &str) -> Self {
        QueryArgs {
            principal: principal.into(),
            sql: sql.into(),
            json: false,
        }
    }
}

pub async fn query(a: QueryArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let result = match run_query(&ws, &a.principal, &a.sql).await {
        Ok(r) => r,
        Err(lethe::Error::Refused(why)) => {
            eprintln!("lethe: refused: {why}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    if a.json {
        out::json(&serde_json::json!({
            "principal": result.audit.principal,
            "role": result.audit.role,
            "tables": result.audit.tables,
            "rules": result.audit.rules,
            "rows": result.to_json()?,
        }))?;
    } else {
        println!("{}", result.to_text()?);
        eprintln!(
            "(as {}, role {}; {} rule(s) applied; decision recorded in {})",
            result.audit.principal,
            result.audit.role.as_deref().unwrap_or("-"),
            result.audit.rules.len(),
            ws.config
                .paths
                .state
                .join(lethe::access::audit::AUDIT_FILE)
                .display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Check governance/policy.toml against the catalog and metadata.toml: every table and
    /// column it names exists, masks fit their columns, row filters parse. Exit 0 when valid.
    Check,
    /// What a principal may read: per table, allowed with its rules, or refused with why.
    Show {
        /// The principal.
        #[arg(long = "as", value_name = "PRINCIPAL")]
        principal: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn policy(c: PolicyCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let enforcer = Enforcer::open(&ws).await?;
    match c {
        PolicyCommand::Check => {
            let doc = enforcer.policy().doc();
            println!(
                "{}: valid ({} principal(s), {} role(s))",
                enforcer.policy().file.path.display(),
                doc.principals.len(),
                doc.roles.len()
            );
            for (name, p) in &doc.principals {
                if p.role.as_deref().is_none_or(str::is_empty) {
                    println!(
                        "warning: principal `{name}` is in no role: every query it makes is refused"
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Show { principal, json } => {
            let decisions = match enforcer.decisions(&principal) {
                Ok(d) => d,
                Err(why) => {
                    eprintln!("lethe: refused: {why}");
                    return Ok(ExitCode::from(1));
                }
            };
            if json {
                out::json(&decisions)?;
            } else {
                let rows: Vec<Vec<String>> = decisions
                    .iter()
                    .map(|d| {
                        vec![
                            d.table.clone(),
                            if d.allowed { "allow" } else { "deny" }.to_string(),
                            if d.detail.is_empty() {
                                "(everything clear)".to_string()
                            } else {
                                d.detail.join("; ")
                            },
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    out::table(&["table", "decision", "rules / reason"], &rows)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
