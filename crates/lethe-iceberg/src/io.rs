//! The runtime that network I/O runs on.
//!
//! Object storage (OpenDAL over reqwest), the REST catalog (reqwest) and PostgreSQL
//! (tokio-postgres) run their futures on one process-wide Tokio runtime of their own, never on
//! the caller's. That lets the synchronous [`crate::store::FileStore`] methods (called from
//! Parquet readers, writers and worker threads) wait for a request without needing — or
//! blocking — the caller's runtime, and keeps connection pools alive for the whole process
//! (a pool bound to a runtime that was dropped fails every later request). The runtime is
//! created on first use and never dropped.

use std::future::Future;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Worker threads of the I/O runtime: requests mostly wait on the network.
const IO_THREADS: usize = 4;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(IO_THREADS)
            .thread_name("lethe-io")
            .enable_all()
            .build()
            .expect("the I/O runtime starts")
    })
}

/// Installs the TLS crypto provider (ring) for HTTPS to object storage and catalogs, once.
/// Every HTTP client lethe builds calls this first.
pub fn ensure_tls() {
    static TLS: OnceLock<()> = OnceLock::new();
    TLS.get_or_init(|| {
        // Another part of the process may have installed one already: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Runs `fut` on the I/O runtime and waits for it, from any thread (inside another runtime
/// too: the calling thread blocks, the I/O runtime's threads do the work).
pub fn block_on<F>(fut: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = runtime().spawn(fut);
    // Unconstrained: when the calling thread runs a Tokio task, that task's cooperative budget
    // is never reset while it blocks here, and a budgeted JoinHandle would spin on Pending.
    futures::executor::block_on(tokio::task::unconstrained(handle))
        .map_err(|e| Error::Internal(format!("an I/O task failed: {e}")))
}

/// Runs `fut` on the I/O runtime and awaits it from the caller's runtime.
pub async fn run<F>(fut: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    runtime()
        .spawn(fut)
        .await
        .map_err(|e| Error::Internal(format!("an I/O task failed: {e}")))
}

/// Spawns `fut` on the I/O runtime (a connection's driver task, a listing feeding a channel).
pub fn spawn<F>(fut: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    runtime().spawn(fut);
}

/// AWS keys held in `secrecy` types, given to the request signer (OpenDAL's and the REST
/// catalog's). reqsign logs each credential provider with `Debug` at debug level, and its own
/// static provider derives `Debug` with the keys in it: this one shows nothing.
#[derive(Clone)]
pub struct AwsKeys {
    /// The access key id.
    pub access_key_id: secrecy::SecretString,
    /// The secret access key.
    pub secret_access_key: secrecy::SecretString,
    /// A session token.
    pub session_token: Option<secrecy::SecretString>,
}

impl std::fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AwsKeys([redacted])")
    }
}

impl reqsign_core::ProvideCredential for AwsKeys {
    type Credential = reqsign_aws_v4::Credential;

    async fn provide_credential(
        &self,
        _: &reqsign_core::Context,
    ) -> reqsign_core::Result<Option<Self::Credential>> {
        use secrecy::ExposeSecret;
        Ok(Some(reqsign_aws_v4::Credential {
            access_key_id: self.access_key_id.expose_secret().to_string(),
            secret_access_key: self.secret_access_key.expose_secret().to_string(),
            session_token: self
                .session_token
                .as_ref()
                .map(|t| t.expose_secret().to_string()),
            expires_in: None,
        }))
    }
}
