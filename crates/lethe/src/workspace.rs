//! A workspace: a loaded `lethe.toml` with its warehouse, governance folder and clock.
//!
//! Opening one connects what the configuration names: the catalog (the SQL catalog on SQLite
//! or PostgreSQL, or a REST catalog) and the store its files are in (a local folder, or an S3
//! bucket). Secrets — the PostgreSQL password, the REST catalog's OAuth2 client credentials or
//! token, S3 keys — are read from the environment variables (or files) the configuration
//! names, into `secrecy` types; they are never written anywhere.

use std::sync::Arc;

use secrecy::SecretString;

use crate::config::{Config, WarehouseLocation, is_postgres_uri};
use crate::engine::Engines;
use crate::error::{Error, Result};
use crate::governance::Governance;
use lethe_iceberg::catalog::TableName;
use lethe_iceberg::catalog::rest::{RestAuth, RestCatalog, RestSettings};
use lethe_iceberg::catalog::{Catalog, SqlCatalog};
use lethe_iceberg::clock::{Clock, SystemClock};
use lethe_iceberg::store::s3::{S3Settings, S3Store};
use lethe_iceberg::store::{FileStore, LocalStore};
use lethe_iceberg::table::{Confinement, Warehouse};

/// Everything a command works on.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The configuration.
    pub config: Config,
    /// The catalog and file store.
    pub warehouse: Warehouse,
    /// The clock (wall-clock settings only: snapshot age, minimum file age).
    pub clock: Arc<dyn Clock>,
    /// Where the per-file work of scans and rewrites runs (default: here).
    pub engines: Engines,
}

/// A secret from an environment variable or a file (trailing newline dropped). `what` names it
/// in errors; the value never appears in one.
fn secret(
    env: Option<&str>,
    file: Option<&str>,
    config: &Config,
    what: &str,
) -> Result<Option<SecretString>> {
    if let Some(f) = file {
        let path = config.root.join(f);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::invalid(format!("{what}: can't read {}: {e}", path.display())))?;
        let value = text.trim_end_matches(['\n', '\r']).to_string();
        if value.is_empty() {
            return Err(Error::invalid(format!(
                "{what}: {} is empty",
                path.display()
            )));
        }
        return Ok(Some(SecretString::from(value)));
    }
    Ok(env
        .and_then(|v| std::env::var(v).ok())
        .filter(|v| !v.is_empty())
        .map(SecretString::from))
}

/// The S3 settings of `[storage]`, with keys from the environment.
pub fn s3_settings(config: &Config) -> Result<S3Settings> {
    let s = &config.storage;
    let env = |name: &Option<String>, default: &str| {
        std::env::var(name.as_deref().unwrap_or(default))
            .ok()
            .filter(|v| !v.is_empty())
            .map(SecretString::from)
    };
    let access_key_id = env(&s.access_key_id_env, "AWS_ACCESS_KEY_ID");
    let secret_access_key = env(&s.secret_access_key_env, "AWS_SECRET_ACCESS_KEY");
    if access_key_id.is_some() != secret_access_key.is_some() {
        return Err(Error::invalid(format!(
            "{}: [storage]: only one of the access key id (${}) and the secret access key (${}) is set",
            config.file.display(),
            s.access_key_id_env
                .as_deref()
                .unwrap_or("AWS_ACCESS_KEY_ID"),
            s.secret_access_key_env
                .as_deref()
                .unwrap_or("AWS_SECRET_ACCESS_KEY")
        )));
    }
    Ok(S3Settings {
        endpoint: s.endpoint.clone(),
        region: s.region.clone(),
        path_style: s.path_style.unwrap_or(false),
        access_key_id,
        secret_access_key,
        session_token: env(&s.session_token_env, "AWS_SESSION_TOKEN"),
        max_concurrency: s.max_concurrency.unwrap_or(16),
        ..S3Settings::default()
    })
}

/// Opens the catalog the configuration names (PostgreSQL connects now, creating the catalog
/// tables if missing; REST on first use).
pub fn open_catalog(config: &Config) -> Result<Arc<dyn Catalog>> {
    open_catalog_with(config, true)
}

/// Opens the catalog the configuration names; with `create` false a PostgreSQL catalog must
/// already exist and nothing is created (`lethe init` only reads).
pub fn open_catalog_with(config: &Config, create: bool) -> Result<Arc<dyn Catalog>> {
    let c = &config.catalog;
    if c.kind == "rest" {
        let mut settings = RestSettings::new(&c.uri);
        settings.warehouse = Some(c.warehouse.clone());
        settings.access_delegation = c.access_delegation.clone();
        if let Some(t) = c.timeout_seconds {
            settings.timeout = std::time::Duration::from_secs(t.max(1));
        }
        let token = secret(
            Some(c.token_env.as_deref().unwrap_or("LETHE_REST_TOKEN")),
            c.token_file.as_deref(),
            config,
            "the REST catalog's bearer token",
        )?;
        let credential = secret(
            Some(
                c.credential_env
                    .as_deref()
                    .unwrap_or("LETHE_REST_CREDENTIAL"),
            ),
            c.credential_file.as_deref(),
            config,
            "the REST catalog's OAuth2 client credential",
        )?;
        settings.auth = if c.sigv4 == Some(true) {
            let s3 = s3_settings(config)?;
            RestAuth::SigV4 {
                signing_name: c.signing_name.clone().unwrap_or_else(|| "s3tables".into()),
                region: c
                    .signing_region
                    .clone()
                    .unwrap_or_else(|| s3.region_or_default()),
                keys: match (s3.access_key_id, s3.secret_access_key) {
                    (Some(k), Some(v)) => Some((k, v, s3.session_token)),
                    _ => None,
                },
            }
        } else if let Some(cred) = credential {
            use secrecy::ExposeSecret;
            let text = cred.expose_secret();
            let (id, secret) = text.split_once(':').ok_or_else(|| {
                Error::invalid(format!(
                    "the REST catalog's OAuth2 client credential (${}) must be `client_id:client_secret`",
                    c.credential_env.as_deref().unwrap_or("LETHE_REST_CREDENTIAL")
                ))
            })?;
            RestAuth::OAuth2 {
                client_id: SecretString::from(id.to_string()),
                client_secret: SecretString::from(secret.to_string()),
                token_uri: c.oauth2_server_uri.clone(),
                scope: c.scope.clone(),
            }
        } else if let Some(t) = token {
            RestAuth::Bearer(t)
        } else {
            RestAuth::None
        };
        return Ok(Arc::new(RestCatalog::new(&c.name, settings)?));
    }
    if is_postgres_uri(&c.uri) {
        let password = postgres_password(config)?;
        let (name, uri) = (c.name.clone(), c.uri.clone());
        let catalog = lethe_iceberg::io::block_on(async move {
            if create {
                SqlCatalog::connect_postgres(&name, &uri, password).await
            } else {
                SqlCatalog::connect_postgres_existing(&name, &uri, password).await
            }
        })??;
        return Ok(Arc::new(catalog));
    }
    let db = config
        .catalog_db()
        .ok_or_else(|| Error::Internal("a sql catalog without a database".into()))?;
    Ok(Arc::new(SqlCatalog::open(&c.name, &db)?))
}

/// The PostgreSQL password the configuration points at (`password_file`, `password_env`,
/// default `$PGPASSWORD`), if any.
pub fn postgres_password(config: &Config) -> Result<Option<SecretString>> {
    let c = &config.catalog;
    secret(
        Some(c.password_env.as_deref().unwrap_or("PGPASSWORD")),
        c.password_file.as_deref(),
        config,
        "the PostgreSQL password",
    )
}

/// Opens the store the warehouse is in (creating a local folder); for S3, checks the bucket
/// and the credentials.
pub fn open_store(config: &Config) -> Result<(Arc<dyn FileStore>, String)> {
    open_store_with(config, true)
}

/// Opens the store of an existing warehouse, creating nothing.
pub fn open_store_existing(config: &Config) -> Result<(Arc<dyn FileStore>, String)> {
    open_store_with(config, false)
}

fn open_store_with(config: &Config, create: bool) -> Result<(Arc<dyn FileStore>, String)> {
    match config.warehouse_location() {
        WarehouseLocation::Local(dir) => {
            if create {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Error::io(dir.display().to_string(), e))?;
            }
            let store = LocalStore::new();
            let root = store.location_of(&dir);
            Ok((Arc::new(store), root))
        }
        WarehouseLocation::Object(root) => {
            let store = S3Store::for_location(&root, s3_settings(config)?)?;
            store.check()?;
            Ok((Arc::new(store), root))
        }
    }
}

/// The tables outside the warehouse that `[tables_outside_warehouse]` lets lethe change.
fn confinement(config: &Config) -> Result<Confinement> {
    let mut outside = Vec::new();
    for (table, location) in &config.tables_outside_warehouse {
        outside.push((TableName::parse(table)?, location.clone()));
    }
    Ok(Confinement {
        outside,
        listed_in: format!("[tables_outside_warehouse] of {}", config.file.display()),
    })
}

impl Workspace {
    /// Opens the catalog and store a configuration names.
    pub fn open(config: &Config) -> Result<Workspace> {
        let (store, root) = open_store(config)?;
        let catalog = open_catalog(config)?;
        Ok(Workspace {
            config: config.clone(),
            warehouse: Warehouse::new(catalog, store, root).with_confinement(confinement(config)?),
            clock: Arc::new(SystemClock),
            engines: Engines::default(),
        })
    }

    /// Replaces the clock (tests pin it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Runs the per-file work of scans and erasures' rewrites on `engines`.
    pub fn with_engines(mut self, engines: Engines) -> Self {
        self.engines = engines;
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
