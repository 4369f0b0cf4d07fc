//! The table-mechanics error type.
//!
//! Errors name files, tables, columns and snapshot ids. They never carry a value of a row:
//! callers must not put row values into messages.

/// The result type of every fallible function of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with a table, a catalog or a file store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller asked for something that can't be done as asked (bad argument, unknown name).
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
    /// An I/O error, with the path involved.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Object storage failed; the message names the operation and the location.
    #[error("object storage: {0}")]
    Storage(String),
    /// A catalog service (REST, PostgreSQL) failed or refused; the message names which and why.
    #[error("catalog: {0}")]
    CatalogService(String),
    /// The catalog database failed.
    #[error("catalog: {0}")]
    Catalog(#[from] rusqlite::Error),
    /// The Iceberg library failed.
    #[error("iceberg: {0}")]
    Iceberg(#[from] iceberg::Error),
    /// Arrow failed.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Parquet failed.
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// JSON (de)serialisation failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// An error raised by a caller's own table action (see [`crate::commit::TableAction`]),
    /// kept whole so the caller can take it back.
    #[error("{0}")]
    Action(Box<dyn std::error::Error + Send + Sync>),
    /// A broken invariant: a bug.
    #[error("internal error (a bug in lethe): {0}")]
    Internal(String),
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
