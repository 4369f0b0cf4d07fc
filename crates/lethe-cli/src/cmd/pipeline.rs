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
    ///
    /// With `--engine ballista` the query runs on the cluster: each table it reads is the
    /// Parquet files of its current snapshot, read by the executors; the rows come back here,
    /// where they are written and committed, and the lineage is recorded as for a local run.
    /// A pipeline runs in this process instead (logged with -v, shown in the `engine` column)
    /// while a restriction is in force, when the warehouse is a local folder, when an input
    /// table's current snapshot has delete files or is format v3, or when its plan can't be
    /// sent to the cluster.
    Run {
        /// The pipeline's name (its file name without .sql).
        name: Option<String>,
        /// Run every pipeline, in name order.
        #[arg(long, conflicts_with = "name")]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        engine: super::cluster::EngineArgs,
    },
    /// List the pipelines and their targets.
    List,
}

pub async fn run(c: PipelineCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut ws = super::workspace(config)?;
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
        PipelineCommand::Run {
            name,
            all,
            json,
            engine,
        } => {
            let (engines, cluster) = engine.engines(&ws)?;
            ws = ws.with_engines(engines);
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
            super::cluster::report_jobs(cluster.as_deref());
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
                            r.engine.clone(),
                            r.lineage_file.display().to_string(),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    out::table(
                        &[
                            "pipeline",
                            "target",
                            "rows",
                            "snapshot",
                            "engine",
                            "lineage event"
                        ],
                        &rows
                    )
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
