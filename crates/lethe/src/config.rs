//! `lethe.toml`: which catalog lethe works on and where its reviewed files live.
//!
//! ```toml
//! [catalog]
//! kind = "sql"                 # the embedded Iceberg SQL catalog (SQLite)
//! name = "lethe"               # the catalog_name column in iceberg_tables
//! uri = "sqlite:catalog.db"    # relative paths are relative to this file
//! warehouse = "warehouse"      # a folder, or file:///absolute/path
//!
//! [paths]                      # all optional, these are the defaults
//! governance = "governance"
//! pipelines = "pipelines"
//! lineage = "lineage"
//! state = "state"
//!
//! [scan]
//! roots = ["raw"]              # folders outside the warehouse that the proof scan also reads
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tomlfile;

/// The file name lethe looks for in the working directory.
pub const CONFIG_FILE: &str = "lethe.toml";

/// The parsed `lethe.toml`, with every path resolved against the file's folder.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from.
    pub file: PathBuf,
    /// The folder holding the file; relative paths are resolved against it.
    pub root: PathBuf,
    /// The catalog.
    pub catalog: CatalogConfig,
    /// Folders.
    pub paths: Paths,
    /// Extra roots for the proof scan.
    pub scan_roots: Vec<PathBuf>,
}

/// The catalog section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// `sql` (the embedded SQLite SQL catalog) is the only kind today.
    pub kind: String,
    /// The catalog's name (`catalog_name` in `iceberg_tables`).
    pub name: String,
    /// `sqlite:PATH` or `sqlite:///PATH` (relative to lethe.toml), `sqlite:////ABSOLUTE`.
    pub uri: String,
    /// The warehouse folder (relative to lethe.toml) or `file:///...`.
    pub warehouse: String,
}

/// Folders lethe reads and writes, resolved to absolute paths.
#[derive(Debug, Clone)]
pub struct Paths {
    /// Reviewed governance files (metadata, retention, subjects, policy).
    pub governance: PathBuf,
    /// SQL pipelines.
    pub pipelines: PathBuf,
    /// OpenLineage events.
    pub lineage: PathBuf,
    /// lethe's own state: journals, case files, register, audit log.
    pub state: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    catalog: CatalogConfig,
    #[serde(default)]
    paths: RawPaths,
    #[serde(default)]
    scan: RawScan,
    /// Gone: places outside the warehouse are stores in governance/stores.toml now.
    #[serde(default)]
    residuals: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPaths {
    governance: Option<String>,
    pipelines: Option<String>,
    lineage: Option<String>,
    state: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScan {
    #[serde(default)]
    roots: Vec<String>,
}

impl Config {
    /// Finds `lethe.toml`: the given path, or the working directory's.
    pub fn discover(explicit: Option<&Path>) -> Result<Config> {
        let file = match explicit {
            Some(p) => p.to_path_buf(),
            None => std::env::current_dir()
                .map_err(|e| Error::io(".", e))?
                .join(CONFIG_FILE),
        };
        if !file.exists() {
            return Err(Error::invalid(format!(
                "no {} at {}: run `lethe demo init` or `lethe init`, or pass --config",
                CONFIG_FILE,
                file.display()
            )));
        }
        Config::load(&file)
    }

    /// Reads and validates a `lethe.toml`.
    pub fn load(file: &Path) -> Result<Config> {
        let file = absolute(file)?;
        let parsed = tomlfile::load::<RawConfig>(&file)?;
        let root = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let raw = &parsed.value;
        if raw.residuals.is_some() {
            return Err(parsed.error_at(
                "residuals",
                "[[residuals]] moved to governance/stores.toml: register each place as a store with probe = \"none\" and its basis, expires and control (e.g. [stores.backups] kind = \"backup\")",
            ));
        }
        if raw.catalog.kind != "sql" {
            return Err(parsed.error_at(
                "catalog.kind",
                format!(
                    "unknown catalog kind `{}`: the embedded `sql` catalog (SQLite) is the only kind today",
                    raw.catalog.kind
                ),
            ));
        }
        if raw.catalog.name.trim().is_empty() {
            return Err(parsed.error_at("catalog.name", "must not be empty"));
        }
        if sqlite_path(&root, &raw.catalog.uri).is_none() {
            return Err(parsed.error_at(
                "catalog.uri",
                format!(
                    "`{}` is not a SQLite URI: use sqlite:PATH (relative to lethe.toml) or sqlite:////ABSOLUTE",
                    raw.catalog.uri
                ),
            ));
        }
        if warehouse_path(&root, &raw.catalog.warehouse).is_none() {
            return Err(parsed.error_at(
                "catalog.warehouse",
                format!(
                    "`{}` is not a local folder: use a path or file:///ABSOLUTE (object storage comes later)",
                    raw.catalog.warehouse
                ),
            ));
        }
        let resolve =
            |p: &Option<String>, default: &str| root.join(p.as_deref().unwrap_or(default));
        let paths = Paths {
            governance: resolve(&raw.paths.governance, "governance"),
            pipelines: resolve(&raw.paths.pipelines, "pipelines"),
            lineage: resolve(&raw.paths.lineage, "lineage"),
            state: resolve(&raw.paths.state, "state"),
        };
        Ok(Config {
            catalog: raw.catalog.clone(),
            scan_roots: raw.scan.roots.iter().map(|r| root.join(r)).collect(),
            file: file.clone(),
            root,
            paths,
        })
    }

    /// The SQLite database file of the catalog.
    pub fn catalog_db(&self) -> PathBuf {
        sqlite_path(&self.root, &self.catalog.uri).unwrap_or_default()
    }

    /// The warehouse folder.
    pub fn warehouse_dir(&self) -> PathBuf {
        warehouse_path(&self.root, &self.catalog.warehouse).unwrap_or_default()
    }

    /// Renders a `lethe.toml` for a catalog and warehouse (used by `demo init` and `init`).
    pub fn render(name: &str, uri: &str, warehouse: &str, scan_roots: &[&str]) -> String {
        let roots = scan_roots
            .iter()
            .map(|r| format!("{r:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "# lethe's configuration: the catalog it works on and where its reviewed files live.\n\
             [catalog]\n\
             kind = \"sql\"                 # the embedded Iceberg SQL catalog (SQLite), as PyIceberg's SqlCatalog\n\
             name = {name:?}\n\
             uri = {uri:?}\n\
             warehouse = {warehouse:?}\n\n\
             [paths]\n\
             governance = \"governance\"\n\
             pipelines = \"pipelines\"\n\
             lineage = \"lineage\"\n\
             state = \"state\"\n\n\
             [scan]\n\
             roots = [{roots}]            # folders outside the warehouse that the proof scan reads too\n"
        )
    }
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()
            .map_err(|e| Error::io(".", e))?
            .join(p))
    }
}

/// Resolves a SQLite URI against `root`, in SQLAlchemy's (and so PyIceberg's) forms:
/// `sqlite:///relative.db`, `sqlite:////absolute.db`, and lethe's short `sqlite:relative.db`.
pub fn sqlite_path(root: &Path, uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("///").unwrap_or(rest);
    if rest.is_empty() {
        return None;
    }
    let p = Path::new(rest);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    })
}

/// Resolves a warehouse given as a path or a `file:` URI against `root`.
pub fn warehouse_path(root: &Path, warehouse: &str) -> Option<PathBuf> {
    if let Some(rest) = warehouse.strip_prefix("file:") {
        let rest = rest.trim_start_matches('/');
        return Some(PathBuf::from(format!("/{rest}")));
    }
    if warehouse.contains("://") || warehouse.is_empty() {
        return None;
    }
    let p = Path::new(warehouse);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let f = dir.join("lethe.toml");
        std::fs::write(&f, text).unwrap();
        f
    }

    #[test]
    fn rendered_config_loads_and_resolves_paths() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            &Config::render("lethe", "sqlite:catalog.db", "warehouse", &["raw"]),
        );
        let c = Config::load(&f).unwrap();
        assert_eq!(c.catalog_db(), dir.path().join("catalog.db"));
        assert_eq!(c.warehouse_dir(), dir.path().join("warehouse"));
        assert_eq!(c.paths.lineage, dir.path().join("lineage"));
        assert_eq!(c.scan_roots, vec![dir.path().join("raw")]);
    }

    #[test]
    fn malformed_config_names_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "[catalog]\nkind = \"sql\"\nname = \"x\"\nuri = \"sqlite:c.db\"\nwarehouse = \"w\"\n[paths]\nlineage = 3\n",
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(e.contains("lethe.toml:7: paths.lineage:"), "{e}");
    }

    #[test]
    fn unknown_catalog_kind_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "[catalog]\nkind = \"glue\"\nname = \"x\"\nuri = \"sqlite:c.db\"\nwarehouse = \"w\"\n",
        );
        let e = Config::load(&f).unwrap_err().to_string();
        assert!(
            e.contains("lethe.toml:2: catalog.kind: unknown catalog kind `glue`"),
            "{e}"
        );
    }

    #[test]
    fn uri_forms() {
        let root = Path::new("/r");
        assert_eq!(
            sqlite_path(root, "sqlite:c.db"),
            Some(PathBuf::from("/r/c.db"))
        );
        assert_eq!(
            sqlite_path(root, "sqlite:////abs/c.db"),
            Some(PathBuf::from("/abs/c.db"))
        );
        assert_eq!(
            sqlite_path(root, "sqlite:///c.db"),
            Some(PathBuf::from("/r/c.db"))
        );
        assert_eq!(sqlite_path(root, "postgres://x"), None);
        assert_eq!(warehouse_path(root, "file:///w"), Some(PathBuf::from("/w")));
        assert_eq!(warehouse_path(root, "s3://b/w"), None);
    }
}
