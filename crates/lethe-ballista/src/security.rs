//! The cluster's shared secret and TLS (docs/cluster.md, "Security").
//!
//! **The secret.** Every process of a cluster holds the same secret ([`ClusterSecret`], from
//! `--secret-file`, `LETHE_CLUSTER_SECRET_FILE` or `LETHE_CLUSTER_SECRET`). What travels is not
//! the secret but a token derived from it (HMAC-SHA256 of a fixed label under the secret): a
//! token seen on the wire or in a log doesn't give the secret away. The token rides in the
//! `user-agent` header (`lethe-cluster/<token>`): Ballista 53's only hook on the gRPC clients
//! it builds inside its crates (the executors' connection to the scheduler, the fetches of
//! results from executors) is an override of the tonic `Endpoint`, and `user_agent` is the one
//! header an `Endpoint` sets on every request. Servers compare it in constant time
//! ([`Gate`]) and refuse a call without it (`UNAUTHENTICATED`, naming neither token nor
//! secret).
//!
//! **TLS.** A server with `--tls-cert`/`--tls-key` ([`ServerTls`]) serves TLS; a client with a
//! CA file ([`ClientTls`]) connects with TLS and verifies the server's certificate against it.
//! Ballista's executor connects to the scheduler at `http://` addresses it builds itself (the
//! one it is given, and the scheduler's own name a task carries); the endpoint override makes
//! such an endpoint again at `https://`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{KeyInit, Mac};
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};
use tonic::{Request, Status};

use crate::error::{Error, Result};

/// The variable holding the cluster's secret itself.
pub const SECRET_ENV: &str = "LETHE_CLUSTER_SECRET";
/// The variable naming a file that holds the cluster's secret.
pub const SECRET_FILE_ENV: &str = "LETHE_CLUSTER_SECRET_FILE";

/// The `user-agent` word that carries the token.
const TOKEN_PREFIX: &str = "lethe-cluster/";

/// The secret every process of a cluster shares. Its `Debug` shows nothing of it; it is never
/// logged nor put in an error.
#[derive(Clone)]
pub struct ClusterSecret {
    secret: Arc<SecretString>,
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

impl ClusterSecret {
    /// A secret from its text (trimmed; at least 16 characters).
    pub fn new(text: SecretString) -> Result<Self> {
        let trimmed = text.expose_secret().trim();
        if trimmed.chars().count() < 16 {
            return Err(Error::Invalid(
                "the cluster secret is too short: use at least 16 characters (e.g. 32 random bytes, hex-encoded)".into(),
            ));
        }
        Ok(ClusterSecret {
            secret: Arc::new(SecretString::from(trimmed.to_string())),
        })
    }

    /// The secret in `file`, which its group and others may neither read nor write.
    pub fn from_file(file: &Path) -> Result<Self> {
        check_private(file)?;
        let text = std::fs::read_to_string(file).map_err(|e| {
            Error::Invalid(format!(
                "the cluster secret file {} can't be read: {}",
                file.display(),
                e.kind()
            ))
        })?;
        ClusterSecret::new(SecretString::from(text))
    }

    /// The secret from `file` if given, else from the file `LETHE_CLUSTER_SECRET_FILE` names,
    /// else from `LETHE_CLUSTER_SECRET`; `None` when none is set.
    pub fn load(file: Option<&Path>) -> Result<Option<Self>> {
        if let Some(f) = file {
            return ClusterSecret::from_file(f).map(Some);
        }
        if let Some(f) = std::env::var_os(SECRET_FILE_ENV).filter(|v| !v.is_empty()) {
            return ClusterSecret::from_file(&PathBuf::from(f)).map(Some);
        }
        match std::env::var(SECRET_ENV) {
            Ok(v) if v.trim().is_empty() => {
                Err(Error::Invalid(format!("{SECRET_ENV} is set but empty")))
            }
            Ok(v) => ClusterSecret::new(SecretString::from(v)).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// The token the secret's holders send: HMAC-SHA256 of a fixed label, hex.
    fn token(&self) -> String {
        let mut mac =
            hmac::Hmac::<sha2::Sha256>::new_from_slice(self.secret.expose_secret().as_bytes())
                .expect("HMAC takes a key of any length");
        mac.update(b"lethe cluster token v1");
        hex::encode(mac.finalize().into_bytes())
    }
}

/// Refuses a secret file its group or others may read or write (Unix).
fn check_private(file: &Path) -> Result<()> {
    match lethe_iceberg::store::not_private(file) {
        Some(problem) => Err(Error::Invalid(format!("the cluster secret file {problem}"))),
        None => Ok(()),
    }
}

/// A server's certificate and key (PEM files).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The certificate chain, PEM.
    pub cert: PathBuf,
    /// The private key, PEM (kept private like the secret file).
    pub key: PathBuf,
}

impl ServerTls {
    /// tonic's server configuration, the files read now.
    pub fn config(&self) -> Result<ServerTlsConfig> {
        let cert = std::fs::read(&self.cert).map_err(|e| {
            Error::Invalid(format!(
                "the TLS certificate {} can't be read: {}",
                self.cert.display(),
                e.kind()
            ))
        })?;
        check_private(&self.key).map_err(|_| {
            Error::Invalid(format!(
                "the TLS key {} is open to its group or others: make it private with `chmod 600 {}`",
                self.key.display(),
                self.key.display()
            ))
        })?;
        let key = std::fs::read(&self.key).map_err(|e| {
            Error::Invalid(format!(
                "the TLS key {} can't be read: {}",
                self.key.display(),
                e.kind()
            ))
        })?;
        Ok(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))
    }
}

/// The CA a client verifies servers' certificates against (a PEM file).
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// The CA's certificates, PEM.
    pub ca: PathBuf,
    pem: Arc<Vec<u8>>,
}

impl ClientTls {
    /// The CA in `ca`, read now.
    pub fn new(ca: PathBuf) -> Result<Self> {
        let pem = std::fs::read(&ca).map_err(|e| {
            Error::Invalid(format!(
                "the TLS CA file {} can't be read: {}",
                ca.display(),
                e.kind()
            ))
        })?;
        Ok(ClientTls {
            ca,
            pem: Arc::new(pem),
        })
    }

    fn config(&self) -> ClientTlsConfig {
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(self.pem.as_ref().clone()))
    }
}

/// What a process sends and checks: the secret's token and the CA to verify servers with.
#[derive(Debug, Clone, Default)]
pub struct ClientSecurity {
    /// The cluster's secret (None: calls carry no token).
    pub secret: Option<ClusterSecret>,
    /// TLS to servers (None: clear).
    pub tls: Option<ClientTls>,
}

/// The type of Ballista's endpoint override.
pub type EndpointOverride = Arc<
    dyn Fn(Endpoint) -> std::result::Result<Endpoint, Box<dyn std::error::Error + Send + Sync>>
        + Send
        + Sync,
>;

impl ClientSecurity {
    /// Whether there is anything to add to a connection.
    pub fn is_empty(&self) -> bool {
        self.secret.is_none() && self.tls.is_none()
    }

    /// The override of every gRPC endpoint Ballista builds: the token in `user-agent`, and
    /// with TLS the endpoint made again at `https://` with TLS (Ballista builds the executors'
    /// connections to the scheduler at `http://` addresses, and tonic uses TLS for `https://`
    /// ones only).
    pub fn endpoint_override(&self) -> EndpointOverride {
        let agent = self.secret.as_ref().map(|s| {
            let mut v = tonic::codegen::http::HeaderValue::from_str(&format!(
                "{TOKEN_PREFIX}{}",
                s.token()
            ))
            .expect("a hex token is a header value");
            v.set_sensitive(true);
            v
        });
        let tls = self.tls.as_ref().map(|t| t.config());
        Arc::new(move |mut ep: Endpoint| {
            if tls.is_some() && ep.uri().scheme_str() == Some("http") {
                let authority = ep
                    .uri()
                    .authority()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let connect = ep
                    .get_connect_timeout()
                    .unwrap_or(std::time::Duration::from_secs(20));
                let keepalive = ep.get_tcp_keepalive();
                ep = Endpoint::from_shared(format!("https://{authority}"))?
                    .connect_timeout(connect)
                    .tcp_nodelay(true)
                    .tcp_keepalive(keepalive);
            }
            if let Some(a) = &agent {
                ep = ep.user_agent(a.clone())?;
            }
            if let Some(t) = &tls {
                ep = ep.tls_config(t.clone())?;
            }
            Ok(ep)
        })
    }
}

/// The check a server makes on every call: the token of its secret in `user-agent` (a server
/// without a secret lets every call through).
#[derive(Clone)]
pub struct Gate {
    expected: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("secret", &self.expected.is_some())
            .finish()
    }
}

impl Gate {
    /// The gate of `secret`.
    pub fn new(secret: Option<&ClusterSecret>) -> Self {
        Gate {
            expected: secret.map(|s| Arc::from(s.token().into_bytes())),
        }
    }

    /// Whether `user_agent` carries the token (compared in constant time).
    fn admits(&self, user_agent: Option<&[u8]>) -> bool {
        let Some(expected) = &self.expected else {
            return true;
        };
        let Some(ua) = user_agent else { return false };
        let mut ok = subtle::Choice::from(0u8);
        for word in ua.split(|b| *b == b' ') {
            if let Some(token) = word.strip_prefix(TOKEN_PREFIX.as_bytes()) {
                ok |= token.ct_eq(expected);
            }
        }
        ok.into()
    }

    /// As a tonic interceptor.
    pub fn check(&self, req: Request<()>) -> std::result::Result<Request<()>, Status> {
        let ua = req
            .metadata()
            .get("user-agent")
            .map(MetadataValue::as_bytes);
        if self.admits(ua) {
            Ok(req)
        } else {
            Err(Status::unauthenticated(
                "lethe cluster: the call carries no cluster secret or a wrong one (give this client the cluster's secret: LETHE_CLUSTER_SECRET, LETHE_CLUSTER_SECRET_FILE, --secret-file or [engine] secret_file)",
            ))
        }
    }
}

impl tonic::service::Interceptor for Gate {
    fn call(&mut self, req: Request<()>) -> std::result::Result<Request<()>, Status> {
        self.check(req)
    }
}
