//! `lethe init`: a lethe folder for a catalog a team already has.
//!
//! Writes `lethe.toml` for the catalog and warehouse, a skeleton `governance/` — `subjects.toml`
//! and `metadata.toml` with explanations only, `retention.toml` with a commented-out rule per
//! table and no exceptions — and empty `pipelines/`, `lineage/` and `state/` folders.
//!
//! What it guarantees:
//! - it never changes the catalog or the warehouse: a SQLite catalog database is opened
//!   read-only and a PostgreSQL one only queried, each checked to be an Iceberg SQL catalog (the
//!   `iceberg_tables` table PyIceberg's `SqlCatalog` and Java's `JdbcCatalog` share); a REST
//!   catalog is only asked for its configuration and tables; an S3 bucket is only listed;
//!   table metadata is only read — all before anything is written;
//! - it refuses a folder that already holds a configuration (`lethe.toml`, or governance files)
//!   unless forced, and even forced it never overwrites a governance file: a person's reviewed
//!   decisions are kept, only `lethe.toml` is written again;
//! - a missing catalog file, a file that isn't SQLite, a SQLite file that isn't an Iceberg SQL
//!   catalog, an unreachable or refusing catalog, a missing bucket and a warehouse that is
//!   neither a local folder nor `s3://` are errors that say so.
//!
//! `--catalog` takes `sqlite:PATH` (or the file's path), `postgresql://user@host:port/db` (the
//! password from `$PGPASSWORD`) or `rest+http(s)://host:port` (auth from
//! `$LETHE_REST_CREDENTIAL` / `$LETHE_REST_TOKEN`, or SigV4); `--warehouse` a folder or
//! `s3://bucket/prefix` (a REST catalog's warehouse, e.g. `s3://warehouse`).
//!
//! When the catalog holds one catalog name, it is used; with several, `--name` picks one.

use std::path::{Path, PathBuf};

use iceberg::spec::{PrimitiveType, TableMetadata, Type};
use serde::Serialize;

use crate::config::{
    CONFIG_FILE, CatalogConfig, Config, StorageConfig, WarehouseLocation, is_postgres_uri,
    redact_uri, sqlite_path, uri_has_password, warehouse_location,
};
use crate::error::{Error, Result};
use lethe_iceberg::catalog::{list_sql_catalog, probe_sql_catalog};
use lethe_iceberg::table::parse_metadata;

/// Options of `lethe init`.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The folder to write into (created if missing).
    pub dir: PathBuf,
    /// The catalog: `sqlite:PATH`, `sqlite:////ABSOLUTE`, a path to the SQLite file,
    /// `postgresql://user@host:port/db` or `rest+http(s)://host:port`.
    pub catalog: String,
    /// The warehouse: a folder, `file:///ABSOLUTE`, or `s3://bucket/prefix`.
    pub warehouse: String,
    /// `[storage]` settings for an `s3://` warehouse (endpoint, region, path style).
    pub storage: StorageConfig,
    /// REST: sign requests with SigV4 (signing name) instead of OAuth2 / bearer tokens.
    pub sigv4_signing_name: Option<String>,
    /// The catalog name (`catalog_name` in `iceberg_tables`); found in the catalog when omitted.
    pub name: Option<String>,
    /// Write `lethe.toml` again although the folder holds a configuration.
    pub force: bool,
}

/// A table as `init` saw it.
#[derive(Debug, Clone, Serialize)]
pub struct TableSeen {
    /// `namespace.table`.
    pub table: String,
    /// Top-level columns.
    pub columns: usize,
    /// Why its metadata couldn't be read, if it couldn't.
    pub unreadable: Option<String>,
}

/// What `init` did.
#[derive(Debug, Clone, Serialize)]
pub struct InitReport {
    /// The folder.
    pub dir: PathBuf,
    /// The catalog name used.
    pub catalog_name: String,
    /// The catalog, as lethe.toml names it (no password).
    pub catalog: String,
    /// The warehouse location.
    pub warehouse: String,
    /// The catalog's tables.
    pub tables: Vec<TableSeen>,
    /// Files written.
    pub written: Vec<PathBuf>,
    /// Governance files kept as they were (with `--force`).
    pub kept: Vec<PathBuf>,
    /// What to review next, as commands and files.
    pub next: Vec<String>,
}

fn absolute(p: &Path) -> Result<PathBuf> {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io(".", e))?
            .join(p)
    };
    // Without `.` components, so that paths inside the folder are written relative to it.
    Ok(p.components().collect())
}

/// What a `--catalog` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogArg {
    /// A SQLite catalog database.
    Sqlite(PathBuf),
    /// A SQL catalog on PostgreSQL (a URI without password).
    Postgres(String),
    /// A REST catalog's base URI.
    Rest(String),
}

/// Parses a `--catalog` argument, resolving paths against the working directory.
pub fn catalog_arg(arg: &str) -> Result<CatalogArg> {
    if is_postgres_uri(arg) {
        if uri_has_password(arg) {
            return Err(Error::invalid(format!(
                "`{}`: don't put the password in the URI (it would land in lethe.toml and in the shell's history); set PGPASSWORD",
                redact_uri(arg)
            )));
        }
        return Ok(CatalogArg::Postgres(arg.to_string()));
    }
    if let Some(rest) = arg.strip_prefix("rest+") {
        if !(rest.starts_with("http://") || rest.starts_with("https://")) {
            return Err(Error::invalid(format!(
                "`{}` is not a REST catalog URI: use rest+http://host:port or rest+https://host",
                redact_uri(arg)
            )));
        }
        if uri_has_password(rest) {
            return Err(Error::invalid(format!(
                "`{}`: don't put credentials in the URI; set LETHE_REST_CREDENTIAL or LETHE_REST_TOKEN",
                redact_uri(arg)
            )));
        }
        return Ok(CatalogArg::Rest(rest.trim_end_matches('/').to_string()));
    }
    Ok(CatalogArg::Sqlite(catalog_db(arg)?))
}

/// The catalog database a `--catalog` argument names, resolved against the working directory.
pub fn catalog_db(arg: &str) -> Result<PathBuf> {
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    if arg.starts_with("sqlite:") {
        return sqlite_path(&cwd, arg).ok_or_else(|| {
            Error::invalid(format!(
                "`{arg}` is not a SQLite URI: use sqlite:PATH or sqlite:////ABSOLUTE/PATH"
            ))
        });
    }
    if arg.contains("://") {
        return Err(Error::invalid(format!(
            "`{}`: give sqlite:PATH, postgresql://user@host:port/db or rest+http(s)://host:port",
            redact_uri(arg)
        )));
    }
    absolute(Path::new(arg))
}

/// How a path is written into lethe.toml: relative to the folder when inside it.
fn written_path(dir: &Path, p: &Path) -> String {
    match p.strip_prefix(dir) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => p.display().to_string(),
    }
}

/// `metadata.toml` before discovery.
pub const METADATA_SKELETON: &str = "# What each column holds: personal, sensitive, internal or public.\n\
# A column nobody classified is treated as closed: the access policy hides it and manifests\n\
# keep no statistics of it. `lethe discover` proposes entries from names and sampled values;\n\
# review its diff, then `lethe discover --write` adds them here without touching your entries.\n\
#\n\
# [tables.\"ns.table\".columns]\n\
# customer_id = { classification = \"personal\", identifies = \"customer\" }\n\
# email = \"personal\"\n";

/// `subjects.toml` before anyone is declared.
pub const SUBJECTS_SKELETON: &str = "# The people an erasure request can name. Nobody is declared yet: `lethe discover` proposes a\n\
# subject for each table of people with a unique key; declare the one you erase, e.g.\n\
#\n\
# [customer]\n\
# identifiers = [\"shop.customers.customer_id\"]   # root identifier column: namespace.table.column\n\
# values = [\"email\", \"phone\", \"full_name\"]      # identifying values the proof scan searches\n\
#                                                # (nested paths too: \"contact.email\", \"addresses.element.street\")\n\
# [customer.no_action]\n\
# \"ref.products\" = \"the product catalogue holds no customer data\"\n\
# [customer.not_identifying]                     # personal columns the proof needn't search for\n\
# \"shop.orders.amount\" = \"an amount doesn't single a customer out\"\n";

fn retention_skeleton(tables: &[(String, Option<TableMetadata>)]) -> String {
    let mut out = String::from(
        "# Retention rules and legal exceptions to erasure. Every rule below is commented out: none\n\
         # applies until a person decides the period with the data's owner (and the legal team).\n\
         # Rules are applied against a day the scheduler passes in (`lethe retention apply --day`),\n\
         # never the clock. No exceptions are recorded: every erasure erases everything.\n",
    );
    for (t, meta) in tables {
        // A timestamp before a date, and never a date of birth.
        let date_col = meta.as_ref().and_then(|m| {
            let fields = m.current_schema().as_struct().fields().to_vec();
            let of = |want: &[PrimitiveType]| {
                fields.iter().find_map(|f| match f.field_type.as_ref() {
                    Type::Primitive(p)
                        if want.contains(p)
                            && crate::onboarding::discover::rules::by_name(&f.name)
                                != Some(crate::onboarding::discover::rules::Kind::DateOfBirth) =>
                    {
                        Some(f.name.clone())
                    }
                    _ => None,
                })
            };
            of(&[PrimitiveType::Timestamp, PrimitiveType::Timestamptz])
                .or_else(|| of(&[PrimitiveType::Date]))
        });
        out.push_str(&format!(
            "\n# [tables.{}]\n",
            crate::onboarding::discover::merge::quote(t)
        ));
        match date_col {
            Some(c) => out.push_str(&format!(
                "# keep_days = 365                  # decide the period\n# counted_from = {}\n",
                crate::onboarding::discover::merge::quote(&c)
            )),
            None => out.push_str("# (no date or timestamp column to count from)\n"),
        }
    }
    out.push_str(
        "\n# [erasure.exceptions.\"ns.table\"]  # only with a rule that ends the rows kept\n\
         # reason = \"the legal obligation and the law it comes from\"\n\
         # decided_by = \"legal team\"\n\
         # erase_columns = [\"card_number\"]\n",
    );
    out
}

fn has_configuration(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let cfg = dir.join(CONFIG_FILE);
    if cfg.exists() {
        out.push(cfg);
    }
    for f in ["metadata.toml", "retention.toml", "subjects.toml"] {
        let p = dir.join("governance").join(f);
        if p.exists() {
            out.push(p);
        }
    }
    out
}

/// The catalog name to use: the one asked for, or the only one the catalog holds.
fn pick_name(asked: &Option<String>, names: &[(String, usize)], place: &str) -> Result<String> {
    match asked {
        Some(n) => {
            if !names.is_empty() && !names.iter().any(|(x, _)| x == n) {
                return Err(Error::invalid(format!(
                    "the catalog has no tables under the name `{n}` (names in {place}: {})",
                    names
                        .iter()
                        .map(|(x, c)| format!("{x} ({c} tables)"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            Ok(n.clone())
        }
        None => match names {
            [] => Ok("lethe".to_string()),
            [(one, _)] => Ok(one.clone()),
            many => Err(Error::invalid(format!(
                "{place} holds several catalogs ({}): pick one with --name",
                many.iter()
                    .map(|(x, c)| format!("{x} ({c} tables)"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        },
    }
}

/// Writes a lethe folder for an existing catalog.
pub async fn init(opts: &InitOptions) -> Result<InitReport> {
    let dir = absolute(&opts.dir)?;
    let existing = has_configuration(&dir);
    if !existing.is_empty() && !opts.force {
        return Err(Error::Refused(format!(
            "{} already holds a lethe configuration ({}); nothing was written. Use another folder, or --force to write lethe.toml again (governance files are kept)",
            dir.display(),
            existing
                .iter()
                .map(|p| p.strip_prefix(&dir).unwrap_or(p).display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let target = catalog_arg(&opts.catalog)?;
    let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
    let warehouse = warehouse_location(&cwd, &opts.warehouse).ok_or_else(|| {
        Error::invalid(format!(
            "`{}` is not a warehouse location: use a folder, file:///ABSOLUTE or s3://bucket/prefix",
            opts.warehouse
        ))
    })?;
    let warehouse = match warehouse {
        WarehouseLocation::Local(p) => {
            let p: PathBuf = p.components().collect();
            if matches!(target, CatalogArg::Rest(_)) {
                return Err(Error::invalid(format!(
                    "`{}`: a REST catalog's warehouse is in object storage: give it as s3://bucket",
                    opts.warehouse
                )));
            }
            if !p.is_dir() {
                return Err(Error::invalid(format!(
                    "the warehouse folder {} does not exist",
                    p.display()
                )));
            }
            WarehouseLocation::Local(p)
        }
        other => other,
    };
    // What lethe.toml will say, parsed as lethe will parse it (nothing is written yet).
    let (kind, uri, place) = match &target {
        CatalogArg::Sqlite(db) => {
            let db: PathBuf = db.components().collect();
            let w = written_path(&dir, &db);
            let uri = if Path::new(&w).is_absolute() {
                format!("sqlite:///{w}")
            } else {
                format!("sqlite:{w}")
            };
            ("sql", uri, db.display().to_string())
        }
        CatalogArg::Postgres(u) => ("sql", u.clone(), redact_uri(u)),
        CatalogArg::Rest(u) => ("rest", u.clone(), u.clone()),
    };
    let names = match &target {
        CatalogArg::Sqlite(db) => probe_sql_catalog(db)?.names,
        _ => Vec::new(),
    };
    let render = |name: &str| {
        let catalog = CatalogConfig {
            kind: kind.into(),
            name: name.into(),
            uri: uri.clone(),
            warehouse: match &warehouse {
                WarehouseLocation::Local(p) => written_path(&dir, p),
                WarehouseLocation::Object(s) => s.clone(),
            },
            sigv4: opts.sigv4_signing_name.as_ref().map(|_| true),
            signing_name: opts.sigv4_signing_name.clone(),
            ..Default::default()
        };
        Config::render_with(&catalog, &opts.storage, &[])
    };
    let cfg = dir.join(CONFIG_FILE);
    // The tables, read only.
    let mut seen = Vec::new();
    let mut metas: Vec<(String, Option<TableMetadata>)> = Vec::new();
    let name;
    let config;
    match &target {
        CatalogArg::Sqlite(db) => {
            name = pick_name(&opts.name, &names, &place)?;
            config = Config::from_text(&cfg, &render(&name))?;
            let (store, _) = crate::workspace::open_store_existing(&config)?;
            for (t, loc) in list_sql_catalog(db, &name)? {
                let m = match loc {
                    Some(l) => store
                        .read(&l)
                        .and_then(|bytes| parse_metadata(&l, &bytes))
                        .map_err(Error::from),
                    None => Err(Error::invalid("no metadata location in the catalog")),
                };
                seen.push(TableSeen {
                    table: t.clone(),
                    columns: m
                        .as_ref()
                        .map_or(0, |m| m.current_schema().as_struct().fields().len()),
                    unreadable: m.as_ref().err().map(|e| e.to_string()),
                });
                metas.push((t, m.ok()));
            }
        }
        _ => {
            let probe = Config::from_text(&cfg, &render(opts.name.as_deref().unwrap_or("lethe")))?;
            name = if let CatalogArg::Postgres(_) = target {
                let sql = lethe_iceberg::catalog::SqlCatalog::connect_postgres_existing(
                    "lethe",
                    &uri,
                    crate::workspace::postgres_password(&probe)?,
                )
                .await?;
                pick_name(&opts.name, &sql.catalog_names().await?, &place)?
            } else {
                opts.name.clone().unwrap_or_else(|| "lethe".into())
            };
            config = Config::from_text(&cfg, &render(&name))?;
            let (store, _) = crate::workspace::open_store_existing(&config)?;
            let catalog = crate::workspace::open_catalog_with(&config, false)?;
            for t in catalog.list_tables().await? {
                let m = catalog
                    .load_table(&t, store.as_ref())
                    .await
                    .map(|l| (*l.metadata).clone())
                    .map_err(Error::from);
                seen.push(TableSeen {
                    table: t.to_string(),
                    columns: m
                        .as_ref()
                        .map_or(0, |m| m.current_schema().as_struct().fields().len()),
                    unreadable: m.as_ref().err().map(|e| e.to_string()),
                });
                metas.push((t.to_string(), m.ok()));
            }
        }
    }
    // Write.
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    let mut written = Vec::new();
    let mut kept = Vec::new();
    let text = render(&name);
    std::fs::write(&cfg, &text).map_err(|e| Error::io(cfg.display().to_string(), e))?;
    // The file must load as lethe will load it.
    let loaded = Config::load(&cfg)?;
    if loaded.catalog_db() != config.catalog_db()
        || loaded.warehouse_location() != config.warehouse_location()
    {
        return Err(Error::Internal(format!(
            "{} resolves to another catalog or warehouse than given",
            cfg.display()
        )));
    }
    written.push(cfg);
    let gov = dir.join("governance");
    for (file, text) in [
        ("subjects.toml", SUBJECTS_SKELETON.to_string()),
        ("metadata.toml", METADATA_SKELETON.to_string()),
        ("retention.toml", retention_skeleton(&metas)),
    ] {
        let p = gov.join(file);
        if p.exists() {
            kept.push(p);
            continue;
        }
        std::fs::create_dir_all(&gov).map_err(|e| Error::io(gov.display().to_string(), e))?;
        std::fs::write(&p, text).map_err(|e| Error::io(p.display().to_string(), e))?;
        written.push(p);
    }
    for d in ["pipelines", "lineage", "state"] {
        let p = dir.join(d);
        if !p.exists() {
            std::fs::create_dir_all(&p).map_err(|e| Error::io(p.display().to_string(), e))?;
            written.push(p);
        }
    }
    // The governance files must load as written.
    crate::governance::Governance::load(&gov)?;
    let next = vec![
        "lethe tables                      # the catalog as lethe sees it".to_string(),
        "lethe discover                    # proposed classifications and identifiers, as a diff"
            .to_string(),
        "lethe discover --write            # add them to governance/metadata.toml after review"
            .to_string(),
        "governance/subjects.toml          # declare who an erasure can name (discover proposes)"
            .to_string(),
        "governance/retention.toml         # decide the retention periods (all commented out)"
            .to_string(),
        "lethe explain --subject NAME=ID   # then plan an erasure".to_string(),
    ];
    Ok(InitReport {
        dir,
        catalog_name: name,
        catalog: place,
        warehouse: config.warehouse_location().uri(),
        tables: seen,
        written,
        kept,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_resolve() {
        assert_eq!(
            catalog_db("sqlite:////abs/c.db").unwrap(),
            PathBuf::from("/abs/c.db")
        );
        assert!(catalog_db("postgresql://host/db").is_err());
        assert_eq!(
            catalog_arg("postgresql://u@h:5432/db").unwrap(),
            CatalogArg::Postgres("postgresql://u@h:5432/db".into())
        );
        assert_eq!(
            catalog_arg("rest+http://127.0.0.1:8181/").unwrap(),
            CatalogArg::Rest("http://127.0.0.1:8181".into())
        );
        let e = catalog_arg("postgresql://u:hunter2@h/db")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("don't put the password") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(catalog_arg("rest+ftp://x").is_err());
        assert!(catalog_db("/abs/c.db").unwrap().is_absolute());
    }

    #[test]
    fn skeletons_load_and_hold_no_rules() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path();
        std::fs::write(g.join("subjects.toml"), SUBJECTS_SKELETON).unwrap();
        std::fs::write(g.join("metadata.toml"), METADATA_SKELETON).unwrap();
        std::fs::write(
            g.join("retention.toml"),
            retention_skeleton(&[("a.b".into(), None)]),
        )
        .unwrap();
        let gov = crate::governance::Governance::load(g).unwrap();
        assert!(gov.subjects.value.is_empty());
        assert!(gov.metadata.value.tables.is_empty());
        assert!(gov.retention.value.tables.is_empty());
        assert!(gov.retention.value.erasure.exceptions.is_empty());
    }
}
