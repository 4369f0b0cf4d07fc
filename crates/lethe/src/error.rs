//! lethe's one error type.
//!
//! Errors name files, lines, keys, tables, columns and snapshot ids. They never carry a value of a
//! person: callers must not put subject values into messages.

use std::path::PathBuf;

/// The result type of every fallible lethe function.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in lethe.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration or governance file is malformed: names the file, line and key.
    #[error("{file}:{line}: {key}: {message}")]
    Config {
        /// The file that holds the mistake.
        file: PathBuf,
        /// The 1-based line of the mistake (0 when unknown).
        line: usize,
        /// The dotted key the mistake is at (or the section).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The user asked for something that can't be done as asked (bad argument, unknown name).
    #[error("{0}")]
    Invalid(String),
    /// A named table does not exist in the catalog.
    #[error("table `{0}` does not exist in the catalog")]
    NoSuchTable(String),
    /// An operation was refused because a table's own settings or state forbid it.
    #[error("{0}")]
    Refused(String),
    /// A commit lost the race for the table's metadata pointer too many times.
    #[error("commit to `{table}` failed after {attempts} attempts: {reason}")]
    CommitConflict {
        /// The table.
        table: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last reason.
        reason: String,
    },
    /// A table uses a feature lethe does not support (yet); nothing was changed.
    #[error("`{table}`: {feature} is not supported by lethe: {detail}")]
    Unsupported {
        /// The table.
        table: String,
        /// The feature.
        feature: String,
        /// What was found.
        detail: String,
    },
    /// A pipeline failed; the target table is as it was.
    #[error("pipeline `{pipeline}` failed: {message}")]
    Pipeline {
        /// The pipeline name.
        pipeline: String,
        /// What went wrong.
        message: String,
    },
    /// An I/O error, with the path involved.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The catalog database failed.
    #[error("catalog: {0}")]
    Catalog(String),
    /// Object storage failed; names the operation and the location.
    #[error("object storage: {0}")]
    Storage(String),
    /// The Iceberg library failed.
    #[error("iceberg: {0}")]
    Iceberg(#[from] iceberg::Error),
    /// Arrow failed.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Parquet failed.
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// DataFusion failed.
    #[error("datafusion: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// JSON (de)serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Lineage failed.
    #[error("lineage: {0}")]
    Lineage(#[from] lethe_lineage::Error),
    /// The proof scan failed.
    #[error("scan: {0}")]
    Scan(#[from] lethe_scan::Error),
    /// A store outside the warehouse failed (connection, API status, timeout, a residual
    /// that deletes don't remove): names the store, never a value of the person.
    #[error("store `{store}`: {message}")]
    Store {
        /// The store's name in governance/stores.toml.
        store: String,
        /// What went wrong.
        message: String,
    },
    /// A broken invariant inside lethe: a bug.
    #[error("internal error (a bug in lethe): {0}")]
    Internal(String),
}

/// Table-mechanics errors keep their variant, so callers match one error type.
impl From<lethe_iceberg::Error> for Error {
    fn from(e: lethe_iceberg::Error) -> Self {
        use lethe_iceberg::Error as E;
        match e {
            E::Invalid(m) => Error::Invalid(m),
            E::NoSuchTable(t) => Error::NoSuchTable(t),
            E::Refused(m) => Error::Refused(m),
            E::CommitConflict {
                table,
                attempts,
                reason,
            } => Error::CommitConflict {
                table,
                attempts,
                reason,
            },
            E::Unsupported {
                table,
                feature,
                detail,
            } => Error::Unsupported {
                table,
                feature,
                detail,
            },
            E::Io { path, source } => Error::Io { path, source },
            E::Catalog(e) => Error::Catalog(e.to_string()),
            E::CatalogService(m) => Error::Catalog(m),
            E::Storage(m) => Error::Storage(m),
            E::Iceberg(e) => Error::Iceberg(e),
            E::Arrow(e) => Error::Arrow(e),
            E::Parquet(e) => Error::Parquet(e),
            E::Json(e) => Error::Json(e),
            E::Internal(m) => Error::Internal(m),
            E::Action(b) => match b.downcast::<Error>() {
                Ok(e) => *e,
                Err(b) => Error::Internal(b.to_string()),
            },
        }
    }
}

/// A lethe error raised inside a table action travels through the commit path whole.
impl From<Error> for lethe_iceberg::Error {
    fn from(e: Error) -> Self {
        lethe_iceberg::Error::Action(Box::new(e))
    }
}

impl Error {
    /// An I/O error at a path.
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }
}
