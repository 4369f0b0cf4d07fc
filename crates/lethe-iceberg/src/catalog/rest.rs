//! The Iceberg REST catalog (the REST OpenAPI spec), over reqwest.
//!
//! - `GET /v1/config?warehouse=…` first: `defaults` under, `overrides` over lethe's own
//!   settings; the `prefix` (and a `uri` override) shape every later path.
//! - Namespaces (nested ones too), listing tables page by page, `loadTable` (the metadata and
//!   the storage `config` — vended credentials go to the store for that table's files),
//!   `createTable`, `dropTable`.
//! - A commit is `POST …/tables/{t}` with `requirements` and `updates`; the server checks the
//!   requirements, applies the updates and writes the metadata file. 2xx with an answer lethe
//!   reads: committed. 409 (`CommitFailedException`): someone else changed the table — reload
//!   and plan again. Other 4xx: a clear rejection, certainly not applied. Anything else — a
//!   2xx whose body lethe can't read or whose config it can't apply, a 5xx, a 1xx or 3xx, a
//!   timeout, a connection lost after sending — is an unknown outcome: reconcile by
//!   reloading, never delete what the commit wrote.
//! - Auth: OAuth2 client credentials (token endpoint, default `{uri}/v1/oauth/tokens`; the
//!   token is fetched again before it expires and after a 401), a static bearer token, or AWS
//!   SigV4 request signing (reqsign, the signer OpenDAL uses; signing name e.g. `s3tables`).
//!   Every secret is a `SecretString`; none reaches a log line, an error, `Debug`, or evidence.
//! - No `X-Iceberg-Access-Delegation` header unless asked for (SeaweedFS answers it with an
//!   empty `config`); set [`RestSettings::access_delegation`] for servers that vend
//!   credentials only when asked.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::TableCreation;
use iceberg::spec::TableMetadata;
use reqwest::{Method, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Catalog, CommitOutcome, TableChange, TableName};
use crate::error::{Error, Result};
use crate::io;
use crate::store::{FileStore, TableConfig};
use crate::table::LoadedTable;

/// How lethe authenticates to a REST catalog.
#[derive(Clone)]
pub enum RestAuth {
    /// No credentials.
    None,
    /// A bearer token.
    Bearer(SecretString),
    /// OAuth2 client credentials, exchanged for a bearer token at `token_uri`.
    OAuth2 {
        /// The client id.
        client_id: SecretString,
        /// The client secret.
        client_secret: SecretString,
        /// The token endpoint (default `{uri}/v1/oauth/tokens`).
        token_uri: Option<String>,
        /// The scope asked for (default `catalog`).
        scope: Option<String>,
    },
    /// AWS SigV4 request signing.
    SigV4 {
        /// The service name signed for (`s3tables` for SeaweedFS and S3 Tables, `glue`...).
        signing_name: String,
        /// The region signed for.
        region: String,
        /// Access key id and secret (and session token); None: the standard AWS chain.
        keys: Option<(SecretString, SecretString, Option<SecretString>)>,
    },
}

impl Debug for RestAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestAuth::None => write!(f, "None"),
            RestAuth::Bearer(_) => write!(f, "Bearer([redacted])"),
            RestAuth::OAuth2 {
                token_uri, scope, ..
            } => f
                .debug_struct("OAuth2")
                .field("client", &"[redacted]")
                .field("token_uri", token_uri)
                .field("scope", scope)
                .finish(),
            RestAuth::SigV4 {
                signing_name,
                region,
                keys,
            } => f
                .debug_struct("SigV4")
                .field("signing_name", signing_name)
                .field("region", region)
                .field("keys", &keys.as_ref().map(|_| "[redacted]"))
                .finish(),
        }
    }
}

/// How to reach a REST catalog.
#[derive(Debug, Clone)]
pub struct RestSettings {
    /// The catalog's base URI (`http://host:8181`; requests go to `{uri}/v1/...`).
    pub uri: String,
    /// The warehouse asked for in `/v1/config` (`s3://warehouse`), if any.
    pub warehouse: Option<String>,
    /// Authentication.
    pub auth: RestAuth,
    /// Timeout of one request (default 60 s); a commit that times out has an unknown outcome.
    pub timeout: Duration,
    /// `X-Iceberg-Access-Delegation` sent with `loadTable`/`createTable` (None: not sent).
    pub access_delegation: Option<String>,
}

impl RestSettings {
    /// Settings for `uri` with no auth, no warehouse and a 60 s timeout.
    pub fn new(uri: &str) -> Self {
        RestSettings {
            uri: uri.trim_end_matches('/').to_string(),
            warehouse: None,
            auth: RestAuth::None,
            timeout: Duration::from_secs(60),
            access_delegation: None,
        }
    }
}

/// What `/v1/config` settled.
#[derive(Debug, Clone)]
struct ServerConfig {
    base: String,
    prefix: Option<String>,
}

struct Token {
    value: SecretString,
    refresh_at: Instant,
}

type Signer = reqsign_core::Signer<reqsign_aws_v4::Credential>;

/// A REST catalog.
pub struct RestCatalog {
    name: String,
    settings: RestSettings,
    http: reqwest::Client,
    config: tokio::sync::OnceCell<ServerConfig>,
    token: tokio::sync::Mutex<Option<Token>>,
    signer: Option<Arc<Signer>>,
}

impl Debug for RestCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestCatalog")
            .field("name", &self.name)
            .field("settings", &self.settings)
            .finish()
    }
}

/// reqsign's HTTP client for credential providers that call out (instance metadata, STS).
#[derive(Debug)]
struct ReqwestSend(reqwest::Client);

impl reqsign_core::HttpSend for ReqwestSend {
    async fn http_send(
        &self,
        req: http::Request<Bytes>,
    ) -> reqsign_core::Result<http::Response<Bytes>> {
        let (parts, body) = req.into_parts();
        let resp = self
            .0
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                reqsign_core::Error::unexpected("credential request failed").with_source(e)
            })?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.map_err(|e| {
            reqsign_core::Error::unexpected("credential response failed").with_source(e)
        })?;
        let mut out = http::Response::new(bytes);
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        Ok(out)
    }
}

/// One REST response.
struct Response {
    status: StatusCode,
    body: Bytes,
}

impl Response {
    fn json(&self, what: &str) -> Result<Value> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Error::CatalogService(format!(
                "{what}: the catalog answered with invalid JSON: {e}"
            ))
        })
    }

    /// The spec's error model: `{"error": {"message", "type", "code"}}` (or OAuth's
    /// `{"error", "error_description"}`), as one line.
    fn error_text(&self) -> String {
        let v: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        let e = &v["error"];
        let text = match (e["type"].as_str(), e["message"].as_str()) {
            (Some(t), Some(m)) => format!("{t}: {m}"),
            (None, Some(m)) => m.to_string(),
            _ => match (e.as_str(), v["error_description"].as_str()) {
                (Some(code), Some(d)) => format!("{code}: {d}"),
                (Some(code), None) => code.to_string(),
                _ => String::from_utf8_lossy(&self.body)
                    .chars()
                    .take(300)
                    .collect(),
            },
        };
        format!("HTTP {}: {}", self.status.as_u16(), text.trim())
    }
}

/// What failed to send.
enum SendError {
    /// The request never reached the server (connection refused, DNS): certainly not applied.
    NotSent(String),
    /// Sent, but no answer (timeout, connection lost): the outcome is unknown.
    NoAnswer(String),
}

fn namespace_path(ns: &[String]) -> String {
    ns.join("\u{1f}")
}

fn table_name_of(v: &Value) -> Option<TableName> {
    let ns: Vec<String> = v["namespace"]
        .as_array()?
        .iter()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect();
    let name = v["name"].as_str()?.to_string();
    if ns.is_empty() {
        return None;
    }
    Some(TableName {
        namespace: ns,
        name,
    })
}

fn table_config(v: &Value) -> TableConfig {
    let mut out = TableConfig::default();
    if let Some(c) = v["config"].as_object() {
        for (k, val) in c {
            if let Some(s) = val.as_str() {
                out.config.insert(k.clone(), s.to_string());
            }
        }
    }
    if let Some(creds) = v["storage-credentials"].as_array() {
        for c in creds {
            let (Some(prefix), Some(cfg)) = (c["prefix"].as_str(), c["config"].as_object()) else {
                continue;
            };
            let cfg: BTreeMap<String, String> = cfg
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect();
            out.credentials.push((prefix.to_string(), cfg));
        }
    }
    out
}

impl RestCatalog {
    /// A REST catalog client. Nothing is requested until the first operation (which fetches
    /// `/v1/config`); [`RestCatalog::check`] does that at once.
    pub fn new(name: &str, settings: RestSettings) -> Result<RestCatalog> {
        io::ensure_tls();
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("lethe/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::CatalogService(format!("can't build an HTTP client: {e}")))?;
        let signer = match &settings.auth {
            RestAuth::SigV4 {
                signing_name,
                region,
                keys,
            } => {
                let ctx = reqsign_core::Context::new()
                    .with_file_read(reqsign_file_read_tokio::TokioFileRead)
                    .with_http_send(ReqwestSend(http.clone()))
                    .with_env(reqsign_core::OsEnv);
                let request_signer = reqsign_aws_v4::RequestSigner::new(signing_name, region);
                let signer = match keys {
                    Some((id, secret, token)) => Signer::new(
                        ctx,
                        io::AwsKeys {
                            access_key_id: id.clone(),
                            secret_access_key: secret.clone(),
                            session_token: token.clone(),
                        },
                        request_signer,
                    ),
                    None => Signer::new(
                        ctx,
                        reqsign_aws_v4::DefaultCredentialProvider::new(),
                        request_signer,
                    ),
                };
                Some(Arc::new(signer))
            }
            _ => None,
        };
        Ok(RestCatalog {
            name: name.to_string(),
            settings,
            http,
            config: tokio::sync::OnceCell::new(),
            token: tokio::sync::Mutex::new(None),
            signer,
        })
    }

    /// Fetches `/v1/config` and lists the top-level namespaces, so that an unreachable
    /// catalog, a wrong credential or an unknown warehouse is an error now.
    pub async fn check(&self) -> Result<()> {
        self.list_namespaces_under(&[]).await.map(|_| ())
    }

    fn what(&self) -> String {
        format!("REST catalog {}", self.settings.uri)
    }

    /// Sends one request (on the I/O runtime), with auth.
    async fn send_raw(
        &self,
        method: Method,
        url: url::Url,
        body: Option<Vec<u8>>,
        form: Option<Vec<(&'static str, String)>>,
        bearer: Option<SecretString>,
        delegation: bool,
    ) -> std::result::Result<Response, SendError> {
        let http = self.http.clone();
        let signer = self.signer.clone();
        let delegation = if delegation {
            self.settings.access_delegation.clone()
        } else {
            None
        };
        let what = self.what();
        io::run(async move {
            let mut headers = http::HeaderMap::new();
            let payload: Vec<u8> = match (&body, &form) {
                (Some(b), _) => {
                    headers.insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    b.clone()
                }
                (None, Some(f)) => {
                    headers.insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/x-www-form-urlencoded"),
                    );
                    let mut ser = url::form_urlencoded::Serializer::new(String::new());
                    for (k, v) in f {
                        ser.append_pair(k, v);
                    }
                    ser.finish().into_bytes()
                }
                (None, None) => Vec::new(),
            };
            if let Some(d) = &delegation
                && let Ok(v) = http::HeaderValue::from_str(d)
            {
                headers.insert("x-iceberg-access-delegation", v);
            }
            if let Some(token) = &bearer {
                let mut v =
                    http::HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
                        .map_err(|_| {
                            SendError::NotSent("the bearer token is not a valid header".into())
                        })?;
                v.set_sensitive(true);
                headers.insert(http::header::AUTHORIZATION, v);
            }
            if let Some(signer) = &signer {
                let hash = Sha256::digest(&payload)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>();
                headers.insert(
                    "x-amz-content-sha256",
                    http::HeaderValue::from_str(&hash).expect("hex is a header value"),
                );
                let mut parts = http::Request::builder()
                    .method(method.clone())
                    .uri(url.as_str())
                    .body(())
                    .map_err(|e| SendError::NotSent(format!("bad request URI: {e}")))?
                    .into_parts()
                    .0;
                parts.headers = headers;
                signer.sign(&mut parts, None).await.map_err(|e| {
                    SendError::NotSent(format!("can't sign the request (SigV4): {e}"))
                })?;
                headers = parts.headers;
            }
            let resp = http
                .request(method, url.as_str())
                .headers(headers)
                .body(payload)
                .send()
                .await;
            let resp = match resp {
                Ok(r) => r,
                Err(e) if e.is_connect() || e.is_builder() => {
                    return Err(SendError::NotSent(format!(
                        "can't reach {what}: {}",
                        source_text(&e)
                    )));
                }
                Err(e) => {
                    return Err(SendError::NoAnswer(format!(
                        "{what} did not answer: {}",
                        source_text(&e)
                    )));
                }
            };
            let status = resp.status();
            match resp.bytes().await {
                Ok(body) => Ok(Response { status, body }),
                Err(e) => Err(SendError::NoAnswer(format!(
                    "{what}: the answer broke off: {}",
                    source_text(&e)
                ))),
            }
        })
        .await
        .map_err(|e| SendError::NotSent(e.to_string()))?
    }

    /// The bearer token, fetched (again) when missing or about to expire.
    async fn bearer(&self, force: bool) -> Result<Option<SecretString>> {
        match &self.settings.auth {
            RestAuth::None | RestAuth::SigV4 { .. } => Ok(None),
            RestAuth::Bearer(t) => Ok(Some(t.clone())),
            RestAuth::OAuth2 {
                client_id,
                client_secret,
                token_uri,
                scope,
            } => {
                let mut guard = self.token.lock().await;
                if !force
                    && let Some(t) = guard.as_ref()
                    && Instant::now() < t.refresh_at
                {
                    return Ok(Some(t.value.clone()));
                }
                let uri = token_uri
                    .clone()
                    .unwrap_or_else(|| format!("{}/v1/oauth/tokens", self.settings.uri));
                let url = url::Url::parse(&uri).map_err(|e| {
                    Error::invalid(format!("OAuth2 token endpoint `{uri}` is not a URL: {e}"))
                })?;
                let form = vec![
                    ("grant_type", "client_credentials".to_string()),
                    ("client_id", client_id.expose_secret().to_string()),
                    ("client_secret", client_secret.expose_secret().to_string()),
                    ("scope", scope.clone().unwrap_or_else(|| "catalog".into())),
                ];
                let resp = self
                    .send_raw(Method::POST, url, None, Some(form), None, false)
                    .await
                    .map_err(|e| match e {
                        SendError::NotSent(m) | SendError::NoAnswer(m) => {
                            Error::CatalogService(format!("OAuth2 token endpoint {uri}: {m}"))
                        }
                    })?;
                if !resp.status.is_success() {
                    return Err(Error::CatalogService(format!(
                        "OAuth2 token endpoint {uri} refused the client credentials ({})",
                        resp.error_text()
                    )));
                }
                let v = resp.json("OAuth2 token")?;
                let token = v["access_token"].as_str().ok_or_else(|| {
                    Error::CatalogService(format!(
                        "OAuth2 token endpoint {uri} returned no access_token"
                    ))
                })?;
                let lifetime = v["expires_in"].as_u64().unwrap_or(3600);
                // Fetched again a minute before it expires (or at half its life if short).
                let margin = (lifetime / 2).min(60);
                let value = SecretString::from(token.to_string());
                *guard = Some(Token {
                    value: value.clone(),
                    refresh_at: Instant::now() + Duration::from_secs(lifetime - margin),
                });
                Ok(Some(value))
            }
        }
    }

    async fn server(&self) -> Result<&ServerConfig> {
        self.config
            .get_or_try_init(|| async {
                let mut url = url::Url::parse(&format!("{}/v1/config", self.settings.uri))
                    .map_err(|e| {
                        Error::invalid(format!(
                            "REST catalog URI `{}` is not a URL: {e}",
                            self.settings.uri
                        ))
                    })?;
                if let Some(w) = &self.settings.warehouse {
                    url.query_pairs_mut().append_pair("warehouse", w);
                }
                let resp = self.send_auth(Method::GET, url, None, false).await?;
                if !resp.status.is_success() {
                    return Err(self.refused("reading its configuration (/v1/config)", &resp));
                }
                let v = resp.json("/v1/config")?;
                let mut props: BTreeMap<String, String> = BTreeMap::new();
                for section in ["defaults", "overrides"] {
                    if let Some(o) = v[section].as_object() {
                        for (k, val) in o {
                            if let Some(s) = val.as_str() {
                                props.insert(k.clone(), s.to_string());
                            }
                        }
                    }
                }
                let base = props
                    .get("uri")
                    .cloned()
                    .unwrap_or_else(|| self.settings.uri.clone())
                    .trim_end_matches('/')
                    .to_string();
                Ok(ServerConfig {
                    base,
                    prefix: props.get("prefix").cloned(),
                })
            })
            .await
    }

    fn refused(&self, what: &str, resp: &Response) -> Error {
        let hint = match resp.status.as_u16() {
            401 | 403 => " (check the catalog credentials)",
            404 => " (no such warehouse, namespace or table)",
            _ => "",
        };
        Error::CatalogService(format!(
            "{} refused {what}{hint}: {}",
            self.what(),
            resp.error_text()
        ))
    }

    /// Sends with auth; after a 401 with OAuth2, fetches a new token and sends once more.
    async fn send_auth(
        &self,
        method: Method,
        url: url::Url,
        body: Option<Vec<u8>>,
        delegation: bool,
    ) -> Result<Response> {
        match self.send_auth_raw(method, url, body, delegation).await {
            Ok(r) => Ok(r),
            Err(SendError::NotSent(m)) | Err(SendError::NoAnswer(m)) => {
                Err(Error::CatalogService(m))
            }
        }
    }

    async fn send_auth_raw(
        &self,
        method: Method,
        url: url::Url,
        body: Option<Vec<u8>>,
        delegation: bool,
    ) -> std::result::Result<Response, SendError> {
        let token = self
            .bearer(false)
            .await
            .map_err(|e| SendError::NotSent(e.to_string()))?;
        let resp = self
            .send_raw(
                method.clone(),
                url.clone(),
                body.clone(),
                None,
                token,
                delegation,
            )
            .await?;
        if resp.status == StatusCode::UNAUTHORIZED
            && matches!(self.settings.auth, RestAuth::OAuth2 { .. })
        {
            let token = self
                .bearer(true)
                .await
                .map_err(|e| SendError::NotSent(e.to_string()))?;
            return self
                .send_raw(method, url, body, None, token, delegation)
                .await;
        }
        Ok(resp)
    }

    /// `{base}/v1/{prefix}/{segments...}`.
    async fn url(&self, segments: &[&str]) -> Result<url::Url> {
        let server = self.server().await?;
        let mut url = url::Url::parse(&server.base).map_err(|e| {
            Error::invalid(format!(
                "REST catalog URI `{}` is not a URL: {e}",
                server.base
            ))
        })?;
        {
            let mut path = url.path_segments_mut().map_err(|_| {
                Error::invalid(format!(
                    "REST catalog URI `{}` can't take a path",
                    server.base
                ))
            })?;
            path.pop_if_empty().push("v1");
            if let Some(p) = &server.prefix {
                path.push(p);
            }
            path.extend(segments);
        }
        Ok(url)
    }

    async fn table_url(&self, table: &TableName) -> Result<url::Url> {
        let ns = namespace_path(&table.namespace);
        self.url(&["namespaces", &ns, "tables", &table.name]).await
    }

    async fn list_namespaces_under(&self, parent: &[String]) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = self.url(&["namespaces"]).await?;
            if !parent.is_empty() {
                url.query_pairs_mut()
                    .append_pair("parent", &namespace_path(parent));
            }
            if let Some(t) = &token {
                url.query_pairs_mut().append_pair("pageToken", t);
            }
            let resp = self.send_auth(Method::GET, url, None, false).await?;
            if !resp.status.is_success() {
                return Err(self.refused("listing namespaces", &resp));
            }
            let v = resp.json("list namespaces")?;
            for ns in v["namespaces"].as_array().into_iter().flatten() {
                let levels: Vec<String> = ns
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect();
                if !levels.is_empty() && levels.len() > parent.len() {
                    out.push(levels);
                }
            }
            token = v["next-page-token"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Every namespace, nested ones included (breadth first).
    async fn all_namespaces(&self) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::new();
        let mut queue = self.list_namespaces_under(&[]).await?;
        while let Some(ns) = queue.pop() {
            let children = self.list_namespaces_under(&ns).await.unwrap_or_default();
            out.push(ns);
            queue.extend(children);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn loaded(&self, table: &TableName, v: &Value, store: &dyn FileStore) -> Result<LoadedTable> {
        let location = v["metadata-location"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let metadata: TableMetadata =
            serde_json::from_value(v["metadata"].clone()).map_err(|e| {
                Error::CatalogService(format!(
                    "{}: {table}'s metadata from the catalog is not valid Iceberg metadata: {e}",
                    self.what()
                ))
            })?;
        let config = table_config(v);
        if !config.config.is_empty() || !config.credentials.is_empty() {
            store.use_table_config(metadata.location(), &config)?;
        }
        Ok(LoadedTable {
            name: table.clone(),
            metadata_location: location,
            metadata: Arc::new(metadata),
        })
    }

    /// Deletes the metadata files `metadata`'s log lists (the REST server keeps every
    /// `vN.metadata.json` it wrote): older metadata then holds nothing anywhere.
    fn delete_logged_metadata(&self, table: &LoadedTable, store: &dyn FileStore) {
        for log in table.metadata.metadata_log() {
            if log.metadata_file == table.metadata_location {
                continue;
            }
            if let Err(e) = store.delete(&log.metadata_file) {
                tracing::warn!(
                    "{}: could not remove old metadata file {}: {e}",
                    table.name,
                    log.metadata_file
                );
            }
        }
    }
}

fn source_text(e: &reqwest::Error) -> String {
    // reqwest's Display names the URL (which holds no credential: auth is in headers).
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    s
}

#[async_trait]
impl Catalog for RestCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    fn describe(&self) -> String {
        format!(
            "REST catalog {}{}",
            self.settings.uri,
            self.settings
                .warehouse
                .as_deref()
                .map(|w| format!(" (warehouse {w})"))
                .unwrap_or_default()
        )
    }

    async fn list_namespaces(&self) -> Result<Vec<String>> {
        Ok(self
            .all_namespaces()
            .await?
            .into_iter()
            .map(|ns| ns.join("."))
            .collect())
    }

    async fn create_namespace(&self, namespace: &str) -> Result<()> {
        let levels: Vec<String> = namespace.split('.').map(str::to_string).collect();
        // Parents first: a nested namespace needs them.
        for depth in 1..=levels.len() {
            let ns = &levels[..depth];
            let url = self.url(&["namespaces"]).await?;
            let body = serde_json::to_vec(&json!({"namespace": ns, "properties": {}}))?;
            let resp = self.send_auth(Method::POST, url, Some(body), false).await?;
            if !(resp.status.is_success() || resp.status == StatusCode::CONFLICT) {
                return Err(self.refused(&format!("creating namespace {}", ns.join(".")), &resp));
            }
        }
        Ok(())
    }

    async fn list_tables(&self) -> Result<Vec<TableName>> {
        let mut out = Vec::new();
        for ns in self.all_namespaces().await? {
            let mut token: Option<String> = None;
            loop {
                let mut url = self
                    .url(&["namespaces", &namespace_path(&ns), "tables"])
                    .await?;
                if let Some(t) = &token {
                    url.query_pairs_mut().append_pair("pageToken", t);
                }
                let resp = self.send_auth(Method::GET, url, None, false).await?;
                if !resp.status.is_success() {
                    return Err(
                        self.refused(&format!("listing the tables of {}", ns.join(".")), &resp)
                    );
                }
                let v = resp.json("list tables")?;
                out.extend(
                    v["identifiers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(table_name_of),
                );
                token = v["next-page-token"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn table_exists(&self, table: &TableName) -> Result<bool> {
        let url = self.table_url(table).await?;
        let resp = self.send_auth(Method::HEAD, url, None, false).await?;
        match resp.status.as_u16() {
            200..=299 => Ok(true),
            404 => Ok(false),
            _ => Err(self.refused(&format!("looking up {table}"), &resp)),
        }
    }

    async fn load_table(&self, table: &TableName, store: &dyn FileStore) -> Result<LoadedTable> {
        let url = self.table_url(table).await?;
        let resp = self.send_auth(Method::GET, url, None, true).await?;
        if resp.status == StatusCode::NOT_FOUND {
            return Err(Error::NoSuchTable(table.to_string()));
        }
        if !resp.status.is_success() {
            return Err(self.refused(&format!("loading {table}"), &resp));
        }
        let v = resp.json("load table")?;
        self.loaded(table, &v, store)
    }

    async fn metadata_location(&self, table: &TableName) -> Result<Option<String>> {
        let url = self.table_url(table).await?;
        let resp = self.send_auth(Method::GET, url, None, true).await?;
        if resp.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status.is_success() {
            return Err(self.refused(&format!("loading {table}"), &resp));
        }
        let v = resp.json("load table")?;
        Ok(v["metadata-location"].as_str().map(str::to_string))
    }

    fn client_places_tables(&self) -> bool {
        false
    }

    async fn create_table(
        &self,
        table: &TableName,
        creation: TableCreation,
        store: &dyn FileStore,
    ) -> Result<LoadedTable> {
        self.create_namespace(&table.namespace_str()).await?;
        let mut properties: BTreeMap<String, String> = creation.properties.into_iter().collect();
        properties.insert(
            "format-version".into(),
            (creation.format_version as u8).to_string(),
        );
        let mut body = json!({
            "name": table.name,
            "schema": creation.schema,
            "properties": properties,
        });
        if let Some(l) = creation.location {
            body["location"] = json!(l);
        }
        if let Some(p) = creation.partition_spec {
            body["partition-spec"] = serde_json::to_value(p)?;
        }
        if let Some(o) = creation.sort_order {
            body["write-order"] = serde_json::to_value(o)?;
        }
        let url = self
            .url(&["namespaces", &namespace_path(&table.namespace), "tables"])
            .await?;
        let resp = self
            .send_auth(Method::POST, url, Some(serde_json::to_vec(&body)?), true)
            .await?;
        if resp.status == StatusCode::CONFLICT {
            return Err(Error::invalid(format!("table `{table}` already exists")));
        }
        if !resp.status.is_success() {
            return Err(self.refused(&format!("creating {table}"), &resp));
        }
        let v = resp.json("create table")?;
        self.loaded(table, &v, store)
    }

    async fn commit_table(
        &self,
        base: &LoadedTable,
        change: TableChange<'_>,
        store: &dyn FileStore,
    ) -> Result<CommitOutcome> {
        let table = &base.name;
        if change.updates.is_empty() {
            // Nothing for the server to do; the only possible change is trimming.
            if change.trim_metadata_log {
                self.delete_logged_metadata(base, store);
            }
            return Ok(CommitOutcome::Committed(base.clone()));
        }
        let body = json!({
            "identifier": {"namespace": table.namespace, "name": table.name},
            "requirements": change.requirements,
            "updates": change.updates,
        });
        let url = self.table_url(table).await?;
        let resp = match self
            .send_auth_raw(Method::POST, url, Some(serde_json::to_vec(&body)?), false)
            .await
        {
            Ok(r) => r,
            Err(SendError::NotSent(m)) => return Err(Error::CatalogService(m)),
            Err(SendError::NoAnswer(m)) => return Ok(CommitOutcome::Unknown(m)),
        };
        match resp.status.as_u16() {
            // Committed; but an answer lethe can't read (not JSON, not metadata, a config it
            // can't apply) says nothing certain: the caller reloads to find out.
            200..=299 => match resp
                .json("commit")
                .and_then(|v| self.loaded(table, &v, store))
            {
                Ok(loaded) => {
                    if change.trim_metadata_log {
                        self.delete_logged_metadata(&loaded, store);
                    }
                    Ok(CommitOutcome::Committed(loaded))
                }
                Err(e) => Ok(CommitOutcome::Unknown(format!(
                    "{} accepted the commit (HTTP {}) with an answer lethe can't read: {e}",
                    self.what(),
                    resp.status.as_u16()
                ))),
            },
            409 => Ok(CommitOutcome::Conflict(resp.error_text())),
            404 => Err(Error::NoSuchTable(table.to_string())),
            // A clear rejection: the server refused the request before applying it.
            400..=499 => Err(self.refused(&format!("the commit to {table}"), &resp)),
            // 5xx, and anything else (1xx, 3xx): maybe applied, maybe not.
            _ => Ok(CommitOutcome::Unknown(format!(
                "{} answered the commit with {}",
                self.what(),
                resp.error_text()
            ))),
        }
    }

    async fn drop_table(&self, table: &TableName) -> Result<()> {
        let url = self.table_url(table).await?;
        let resp = self.send_auth(Method::DELETE, url, None, false).await?;
        match resp.status.as_u16() {
            200..=299 => Ok(()),
            404 => Err(Error::NoSuchTable(table.to_string())),
            _ => Err(self.refused(&format!("dropping {table}"), &resp)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_secret() {
        let mut s = RestSettings::new("http://127.0.0.1:1/");
        s.auth = RestAuth::OAuth2 {
            client_id: SecretString::from("client-id-value"),
            client_secret: SecretString::from("client-secret-value"),
            token_uri: None,
            scope: None,
        };
        let c = RestCatalog::new("lethe", s).unwrap();
        let text = format!("{c:?}");
        assert!(
            !text.contains("client-secret-value") && !text.contains("client-id-value"),
            "{text}"
        );
        assert!(text.contains("http://127.0.0.1:1"), "{text}");
        let a = RestAuth::Bearer(SecretString::from("tok-value"));
        assert!(!format!("{a:?}").contains("tok-value"));
    }

    #[test]
    fn error_bodies_read_as_one_line() {
        let r = Response {
            status: StatusCode::CONFLICT,
            body: Bytes::from_static(
                br#"{"error":{"message":"Requirement failed: branch main has changed","type":"CommitFailedException","code":409}}"#,
            ),
        };
        assert_eq!(
            r.error_text(),
            "HTTP 409: CommitFailedException: Requirement failed: branch main has changed"
        );
        let r = Response {
            status: StatusCode::UNAUTHORIZED,
            body: Bytes::from_static(
                br#"{"error":"invalid_client","error_description":"Invalid client credentials"}"#,
            ),
        };
        assert_eq!(
            r.error_text(),
            "HTTP 401: invalid_client: Invalid client credentials"
        );
    }

    #[test]
    fn load_results_give_config_and_credentials() {
        let v = json!({
            "config": {"s3.endpoint": "http://x", "s3.path-style-access": "true"},
            "storage-credentials": [{"prefix": "s3://b/ns/t", "config": {"s3.access-key-id": "k"}}]
        });
        let c = table_config(&v);
        assert_eq!(c.config["s3.endpoint"], "http://x");
        assert_eq!(c.credentials[0].0, "s3://b/ns/t");
        assert_eq!(
            table_name_of(&json!({"namespace": ["a", "b"], "name": "t"})),
            Some(TableName::parse("a.b.t").unwrap())
        );
        assert_eq!(namespace_path(&["a".into(), "b".into()]), "a\u{1f}b");
    }
}
