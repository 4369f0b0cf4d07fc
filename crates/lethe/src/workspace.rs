//! A workspace: a loaded `lethe.toml` with its warehouse, governance folder and clock.

use std::sync::Arc;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::governance::Governance;
use lethe_iceberg::catalog::SqlCatalog;
use lethe_iceberg::clock::{Clock, SystemClock};
use lethe_iceberg::store::{FileStore, LocalStore};
use lethe_iceberg::table::Warehouse;

/// Everything a command works on.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The configuration.
    pub config: Config,
    /// The catalog and file store.
    pub warehouse: Warehouse,
    /// The clock (wall-clock settings only: snapshot age, minimum file age).
    pub clock: Arc<dyn Clock>,
}

impl Workspace {
    /// Opens the catalog and store a configuration names.
    pub fn open(config: &Config) -> Result<Workspace> {
        let db = config.catalog_db();
        let catalog = SqlCatalog::open(&config.catalog.name, &db)?;
        let store = LocalStore::new();
        let root = store.location_of(&config.warehouse_dir());
        std::fs::create_dir_all(config.warehouse_dir())
            .map_err(|e| Error::io(config.warehouse_dir().display().to_string(), e))?;
        Ok(Workspace {
            config: config.clone(),
            warehouse: Warehouse::new(
                Arc::new(catalog),
                Arc::new(store) as Arc<dyn FileStore>,
                root,
            ),
            clock: Arc::new(SystemClock),
        })
    }

    /// Replaces the clock (tests pin it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Loads the governance files.
    pub fn governance(&self) -> Result<Governance> {
        Governance::load(&self.config.paths.governance)
    }

    /// The OpenLineage namespace lethe writes its datasets under.
    pub fn lineage_namespace(&self) -> String {
        self.warehouse.root.clone()
    }
}
