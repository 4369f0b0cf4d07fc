//! Connections to PostgreSQL, with TLS as libpq's `sslmode` spells it (rustls, through
//! `tokio-postgres-rustls`): the SQL catalog on PostgreSQL and the database stores both
//! connect through [`connect`].
//!
//! A connection string (a `postgresql://` URI or libpq's `key=value` form) may carry
//! - `sslmode`: `disable` (no TLS), `prefer` (the default: TLS when the server offers it,
//!   unverified, else plain TCP), `require` (TLS or no connection, unverified),
//!   `verify-ca` (TLS, the server's certificate chain verified against `sslrootcert`, its
//!   name not checked), `verify-full` (also the host name checked against the certificate's
//!   names);
//! - `sslrootcert`: a PEM file of the certificate authorities to trust (needed by
//!   `verify-ca` and `verify-full`; given with `prefer` or `require`, the chain is verified
//!   as for `verify-ca`, as libpq does when a root certificate file exists).
//!
//! When the string has none, `PGSSLMODE` and `PGSSLROOTCERT` give them, as they do to libpq.
//! `sslmode` values other than these five, and `sslrootcert` with `disable`, are errors naming
//! the value. Nothing here sees the password: it is given to [`connect`] apart.
//!
//! Not supported: client certificates (`sslcert`/`sslkey`), `sslrootcert=system`, certificate
//! revocation lists. `prefer` and `require` without a root certificate protect against a
//! passive listener only, as in libpq: use `verify-full` where the network isn't trusted.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How a connection uses TLS, as libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it (the default).
    Prefer,
    /// TLS, or no connection.
    Require,
    /// TLS with the chain verified against the root certificates.
    VerifyCa,
    /// TLS with the chain and the host name verified.
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<SslMode, String> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` tries plain TCP first: lethe never prefers it.
            other => {
                return Err(format!(
                    "sslmode `{other}` is not one of disable, prefer, require, verify-ca, verify-full"
                ));
            }
        })
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        })
    }
}

/// A connection string parsed: tokio-postgres's configuration and the TLS settings.
#[derive(Clone)]
pub struct Target {
    /// Host, port, user, database and the other settings tokio-postgres knows.
    pub config: tokio_postgres::Config,
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`.
    pub root_cert: Option<PathBuf>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("mode", &self.mode)
            .field("root_cert", &self.root_cert)
            .finish_non_exhaustive()
    }
}

/// Percent-decodes a URI query value.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `key=value` pairs of libpq's keyword form, each with its value unquoted, in order.
fn keywords(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(format!("`{key}` has no value (key=value)"));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("the value of `{key}` has no closing quote")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                if c == '\\' {
                    chars.next();
                    value.extend(chars.next());
                } else {
                    value.push(c);
                    chars.next();
                }
            }
        }
        out.push((key, value));
    }
}

/// Splits `sslmode` and `sslrootcert` off a connection string; returns what is left (for
/// tokio-postgres) and the two values.
fn split_tls(conn: &str) -> Result<(String, Option<String>, Option<String>), String> {
    let (mut mode, mut root) = (None, None);
    if conn.starts_with("postgresql://") || conn.starts_with("postgres://") {
        let Some((head, query)) = conn.split_once('?') else {
            return Ok((conn.to_string(), None, None));
        };
        let mut kept: Vec<&str> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match decode(k).as_str() {
                "sslmode" => mode = Some(decode(v)),
                "sslrootcert" => root = Some(decode(v)),
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            head.to_string()
        } else {
            format!("{head}?{}", kept.join("&"))
        };
        return Ok((rest, mode, root));
    }
    let mut kept = Vec::new();
    for (k, v) in keywords(conn)? {
        match k.as_str() {
            "sslmode" => mode = Some(v),
            "sslrootcert" => root = Some(v),
            _ => kept.push(format!(
                "{k}='{}'",
                v.replace('\\', "\\\\").replace('\'', "\\'")
            )),
        }
    }
    Ok((kept.join(" "), mode, root))
}

/// Parses a connection string (URI or `key=value`), taking `sslmode` and `sslrootcert` out of
/// it (else from `PGSSLMODE` / `PGSSLROOTCERT`). The error names what is wrong, never the
/// string (it may hold a password).
pub fn parse(conn: &str) -> Result<Target, String> {
    let (rest, mode, root) = split_tls(conn)?;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mode = match mode.or_else(|| env("PGSSLMODE")) {
        Some(m) => SslMode::parse(&m)?,
        None => SslMode::Prefer,
    };
    let root_cert = root.or_else(|| env("PGSSLROOTCERT")).map(PathBuf::from);
    if root_cert
        .as_ref()
        .is_some_and(|p| p.as_os_str() == "system")
    {
        return Err(
            "sslrootcert=system is not supported: name a PEM file of the certificate authorities"
                .into(),
        );
    }
    match (mode, &root_cert) {
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            return Err(format!(
                "sslmode={mode} needs sslrootcert: a PEM file of the certificate authorities that sign the server's certificate"
            ));
        }
        (SslMode::Disable, Some(_)) => {
            return Err("sslrootcert is given but sslmode=disable turns TLS off".into());
        }
        _ => {}
    }
    let mut config = tokio_postgres::Config::from_str(&rest)
        .map_err(|e| format!("not a PostgreSQL connection string: {e}"))?;
    config.ssl_mode(match mode {
        SslMode::Disable => tokio_postgres::config::SslMode::Disable,
        SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
            tokio_postgres::config::SslMode::Require
        }
    });
    Ok(Target {
        config,
        mode,
        root_cert,
    })
}

/// The trusted roots from a PEM file.
fn roots(path: &std::path::Path) -> Result<RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| format!("sslrootcert {shown}: {e}"))?;
    let mut store = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| format!("sslrootcert {shown}: not PEM certificates: {e}"))?;
        store
            .add(c)
            .map_err(|e| format!("sslrootcert {shown}: {e}"))?;
    }
    if store.is_empty() {
        return Err(format!("sslrootcert {shown}: no certificate in it"));
    }
    Ok(store)
}

/// Accepts any certificate, still checking that the server holds its key (`prefer` and
/// `require` without root certificates, as libpq).
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The chain verified against the roots, the host name not (`verify-ca`).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name only after the chain verified.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The rustls client configuration for a target.
fn tls_config(t: &Target) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match (&t.root_cert, t.mode) {
        (None, _) => Arc::new(Unverified(provider)),
        (Some(path), mode) => {
            let chain = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(path)?),
                provider,
            )
            .build()
            .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
            if mode == SslMode::VerifyFull {
                chain
            } else {
                Arc::new(ChainOnly(chain))
            }
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// Connects to `target` (`password` given apart, never part of the string), with TLS as its
/// `sslmode` says. Returns the client and the connection's driver, which the caller spawns on
/// the runtime it wants. `Err` is the message to show (the server's, or TLS's reason such as
/// `invalid peer certificate: UnknownIssuer`).
pub async fn connect(
    target: &Target,
    password: Option<&str>,
    connect_timeout: Option<Duration>,
) -> Result<
    (
        tokio_postgres::Client,
        impl std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send + use<>,
    ),
    ConnectError,
> {
    let mut config = target.config.clone();
    if let Some(p) = password {
        config.password(p);
    }
    if let Some(t) = connect_timeout {
        config.connect_timeout(t);
    }
    let tls = tokio_postgres_rustls::MakeRustlsConnect::new(
        tls_config(target).map_err(ConnectError::Config)?,
    );
    let (client, connection) = config.connect(tls).await.map_err(ConnectError::Postgres)?;
    Ok((client, connection))
}

/// Why [`connect`] failed.
#[derive(Debug)]
pub enum ConnectError {
    /// The TLS settings can't be used (a root certificate file that can't be read).
    Config(String),
    /// tokio-postgres's error (the server's, or the TLS handshake's).
    Postgres(tokio_postgres::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Config(m) => f.write_str(m),
            ConnectError::Postgres(e) => match e.as_db_error() {
                Some(db) => write!(f, "{} ({})", db.message(), db.code().code()),
                None => {
                    write!(f, "{e}")?;
                    // The TLS reason (an unknown issuer, a name mismatch) is the source's.
                    let mut src = std::error::Error::source(e);
                    while let Some(s) = src {
                        write!(f, ": {s}")?;
                        src = s.source();
                    }
                    Ok(())
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_uris_and_keywords() {
        let t = parse(
            "postgresql://lethe@db.internal:5433/lake?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(t.mode, SslMode::VerifyFull);
        assert_eq!(
            t.root_cert.as_deref(),
            Some(std::path::Path::new("/etc/ca.pem"))
        );
        assert_eq!(t.config.get_ports(), &[5433]);
        assert_eq!(t.config.get_application_name(), Some("x"));
        assert_eq!(
            t.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        let t = parse("host=h user='a b' sslmode=verify-ca sslrootcert='/x y/ca.pem' dbname=d")
            .unwrap();
        assert_eq!(t.mode, SslMode::VerifyCa);
        assert_eq!(
            t.root_cert.as_deref(),
            Some(std::path::Path::new("/x y/ca.pem"))
        );
        assert_eq!(t.config.get_user(), Some("a b"));
        assert_eq!(t.config.get_dbname(), Some("d"));
    }

    #[test]
    fn the_default_is_prefer_and_bad_settings_are_named() {
        // (PGSSLMODE is not set where the tests run)
        if std::env::var_os("PGSSLMODE").is_none() {
            let t = parse("postgresql://u@h/d").unwrap();
            assert_eq!(t.mode, SslMode::Prefer);
            assert_eq!(
                t.config.get_ssl_mode(),
                tokio_postgres::config::SslMode::Prefer
            );
        }
        let e = parse("postgresql://u@h/d?sslmode=allow").unwrap_err();
        assert!(e.contains("sslmode `allow`"), "{e}");
        let e = parse("postgresql://u@h/d?sslmode=verify-full").unwrap_err();
        assert!(e.contains("needs sslrootcert"), "{e}");
        let e = parse("postgresql://u@h/d?sslmode=disable&sslrootcert=/ca.pem").unwrap_err();
        assert!(e.contains("sslmode=disable"), "{e}");
        let e = parse("postgresql://u@h/d?sslmode=require&sslrootcert=system").unwrap_err();
        assert!(e.contains("system"), "{e}");
        let e = parse("host=h sslmode='verify-full").unwrap_err();
        assert!(e.contains("closing quote"), "{e}");
    }
}
