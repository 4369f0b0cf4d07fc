//! The error type of lethe's Ballista engine.

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong running lethe's work on a Ballista cluster. Messages name jobs, tasks,
/// files and addresses, never a value of a subject.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A payload could not be encoded or decoded.
    #[error("lethe job payload: {0}")]
    Wire(String),
    /// The cluster (scheduler, executors) failed or could not be reached.
    #[error("ballista: {0}")]
    Cluster(String),
    /// Bad settings (an address, a size).
    #[error("{0}")]
    Invalid(String),
    /// DataFusion failed.
    #[error("datafusion: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// Table mechanics failed.
    #[error(transparent)]
    Iceberg(#[from] lethe_iceberg::Error),
    /// The scan failed as a whole.
    #[error(transparent)]
    Scan(#[from] lethe_scan::Error),
    /// Arrow failed.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

impl From<Error> for datafusion::error::DataFusionError {
    fn from(e: Error) -> Self {
        match e {
            Error::DataFusion(e) => e,
            other => datafusion::error::DataFusionError::External(Box::new(other)),
        }
    }
}

impl From<Error> for lethe_iceberg::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Iceberg(e) => e,
            other => lethe_iceberg::Error::Action(Box::new(other)),
        }
    }
}

impl From<Error> for lethe_scan::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Scan(e) => e,
            other => lethe_scan::Error::Engine(other.to_string()),
        }
    }
}
