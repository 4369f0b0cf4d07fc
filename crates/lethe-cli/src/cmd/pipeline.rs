//! `lethe pipeline run`.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use lethe::pipeline::{Pipeline, run as run_pipeline};

use crate::out;

#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Run one pipeline (by name) or every pipeline in pipelines/.
    ///
    /// The query runs in DataFusion over the Iceberg tables; its result replaces the target
    /// table's contents in one snapshot, and the run's column lineage (from the logical plan)
    /// is written to lineage/ as an OpenLineage RunEvent. A failing pipeline leaves its target
    /// as it was.
    Run {
        /// The pipeline's name (its file name without .sql).
        name: Option<String>,
        /// Run every pipeline, in name order.
        #[arg(long, conflicts_with = "name")]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the pipelines and their targets.
    List,
}

pub async fn run(c: PipelineCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let ws = super::workspace(config)?;
    let dir = ws.config.paths.pipelines.clone();
    match c {
        PipelineCommand::List => {
            let rows: Vec<Vec<String>> = Pipeline::load_all(&dir)?
                .into_iter()
                .map(|p| vec![p.name, p.target.to_string(), p.consent.join(", ")])
                .collect();
            print!("{}", out::table(&["pipeline", "target", "consent"], &rows));
            Ok(ExitCode::SUCCESS)
        }
        PipelineCommand::Run { name, all, json } => {
            let pipelines = match (name, all) {
                (Some(n), _) => vec![Pipeline::find(&dir, &n)?],
                (None, true) => Pipeline::load_all(&dir)?,
                (None, false) => {
                    anyhow::bail!("name a pipeline or pass --all (see `lethe pipeline list`)")
                }
            };
            let mut runs = Vec::new();
            for p in &pipelines {
                if !json {
                    out::progress(&format!("running {} -> {}", p.name, p.target));
                }
                runs.push(run_pipeline(&ws, p).await?);
            }
            if json {
                out::json(&runs)?;
            } else {
                out::progress_done();
                let rows: Vec<Vec<String>> = runs
                    .iter()
                    .map(|r| {
                        vec![
                            r.pipeline.clone(),
                            r.target.clone(),
                            out::count(r.rows),
                            r.snapshot_id.map_or("-".into(), |s| s.to_string()),
                            r.lineage_file.display().to_string(),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    out::table(
                        &["pipeline", "target", "rows", "snapshot", "lineage event"],
                        &rows
                    )
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
