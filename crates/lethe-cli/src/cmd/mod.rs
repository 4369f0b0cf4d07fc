//! One module per command group.

pub mod bench;
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
pub mod stores;
pub mod verify;

use std::path::Path;

use lethe::config::Config;
use lethe::workspace::Workspace;

/// Opens the workspace `lethe.toml` names.
pub fn workspace(config: Option<&Path>) -> anyhow::Result<Workspace> {
    let c = Config::discover(config)?;
    Ok(Workspace::open(&c)?)
}
