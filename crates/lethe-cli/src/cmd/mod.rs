//! One module per command group.

pub mod bench;
pub mod cluster;
pub mod consent;
pub mod demo;
pub mod discover;
pub mod drill;
pub mod erase;
pub mod explain;
pub mod inspect;
pub mod maintenance;
pub mod pipeline;
pub mod properties;
pub mod prove;
pub mod query;
pub mod request;
pub mod retention;
pub mod review;
pub mod stores;
pub mod verify;

use std::path::Path;

use lethe::config::Config;
use lethe::workspace::Workspace;

/// clap's check of a duration flag (`--min-age 72h`): a duration of at most 100 years, else
/// clap's error naming the flag (exit code 2). The flag keeps its text; commands parse it again.
pub fn duration_flag(s: &str) -> Result<String, String> {
    lethe_iceberg::clock::parse_duration(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// clap's check of an instant flag (`--older-than 5d`, a day, RFC 3339), as [`duration_flag`].
pub fn instant_flag(s: &str) -> Result<String, String> {
    lethe_iceberg::clock::parse_instant(s, chrono::Utc::now())
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// Opens the workspace `lethe.toml` names.
pub fn workspace(config: Option<&Path>) -> anyhow::Result<Workspace> {
    let c = Config::discover(config)?;
    Ok(Workspace::open(&c)?)
}

/// Object storage flags of `init` and `demo init` (written to lethe.toml's `[storage]`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct StorageArgs {
    /// The S3 endpoint (default: AWS), e.g. http://127.0.0.1:8333.
    #[arg(long, value_name = "URL", env = "LETHE_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// The S3 region (default: $AWS_REGION, else us-east-1).
    #[arg(long, value_name = "REGION", env = "LETHE_S3_REGION")]
    pub s3_region: Option<String>,
    /// Path-style S3 addressing (endpoint/bucket/key), which most S3-compatible servers need.
    #[arg(long, value_name = "BOOL", env = "LETHE_S3_PATH_STYLE")]
    pub s3_path_style: Option<bool>,
    /// On a versioned bucket, let erasures delete the noncurrent versions they leave, by id.
    #[arg(long)]
    pub purge_versions: bool,
}

impl StorageArgs {
    /// The `[storage]` section these flags give.
    pub fn config(&self) -> lethe::config::StorageConfig {
        lethe::config::StorageConfig {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            path_style: self.s3_path_style,
            purge_versions: self.purge_versions,
            ..Default::default()
        }
    }
}
