//! The helpdesk vendor's API, as the demo (and the tests) run it: a small HTTP server on
//! 127.0.0.1 that knows the platform's learners who contacted support, by email.
//!
//! - `GET /v1/users/{email}` → 200 `{"user": ..., "tickets": N}`, or 404 when unknown;
//! - `DELETE /v1/users/{email}` → 202 `{"status": "deleted"}` (the user and their tickets are
//!   gone), or 404 when unknown;
//! - `PUT /v1/users/{email}` → 201 `{"status": "created"}`: a test user with one ticket (the
//!   vendor's sandbox API, which the erasure drill seeds its synthetic subject through);
//! - `POST /v1/erasures` with a JSON body `{"email": ...}` → 202 `{"status": "deleted"}`, or
//!   404 when unknown: the same deletion as a request with a body (bodies are recorded as
//!   received, so tests can read exactly what a vendor would get).
//!
//! Its users live in `vendor/users.json` in the demo folder, written on every change. Tests
//! make it misbehave as real vendors do ([`Faults`]): 5xx answers, answers slower than the
//! client's timeout, deletions acknowledged but not carried out (so the probe still finds the
//! user), and a required bearer token. It records what it received (for assertions) in memory.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use lethe::error::{Error, Result};

/// The vendor's state file, relative to the demo folder.
pub const USERS: &str = "vendor/users.json";

/// How the vendor misbehaves.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The next N deletions answer `status` (e.g. 503).
    pub fail_deletes: u32,
    /// The status of failed deletions (default 503).
    pub status: u16,
    /// The next N deletions answer only after `delay`.
    pub slow_deletes: u32,
    /// How long a slow answer takes.
    pub delay: Duration,
    /// Deletions are acknowledged (202) but nothing is deleted.
    pub ignore_deletes: bool,
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
}

/// What the vendor received.
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// DELETE requests per user (including failed ones).
    pub deletes: BTreeMap<String, u32>,
    /// GET requests per user.
    pub probes: BTreeMap<String, u32>,
    /// PUT requests (test users created) per user.
    pub seeds: BTreeMap<String, u32>,
    /// The bodies of `POST /v1/erasures` requests, as received.
    pub erasure_bodies: Vec<String>,
    /// Requests refused for a missing or wrong token.
    pub unauthorized: u32,
}

#[derive(Debug, Default)]
struct State {
    users: BTreeMap<String, u64>,
    faults: Faults,
    received: Received,
    file: PathBuf,
}

/// A running vendor server; stops when dropped.
pub struct Vendor {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Vendor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or(""), 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn reply(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn save(s: &State) {
    if let Ok(text) = serde_json::to_string_pretty(&s.users) {
        let _ = std::fs::write(&s.file, text);
    }
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    state: Arc<Mutex<State>>,
) -> std::result::Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    if path == "/v1/erasures" && req.method() == hyper::Method::POST {
        return Ok(erasure_request(req, state).await);
    }
    let Some(user) = path.strip_prefix("/v1/users/").map(decode) else {
        return Ok(reply(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "no such route"}),
        ));
    };
    let token = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (delay, action) = {
        let mut s = state.lock().expect("vendor state");
        if let Some(want) = &s.faults.token
            && token.as_deref() != Some(format!("Bearer {want}").as_str())
        {
            s.received.unauthorized += 1;
            return Ok(reply(
                StatusCode::UNAUTHORIZED,
                serde_json::json!({"error": "unauthorized"}),
            ));
        }
        match *req.method() {
            hyper::Method::GET => {
                *s.received.probes.entry(user.clone()).or_default() += 1;
                let r = match s.users.get(&user) {
                    Some(n) => reply(
                        StatusCode::OK,
                        serde_json::json!({"user": user, "tickets": n}),
                    ),
                    None => reply(
                        StatusCode::NOT_FOUND,
                        serde_json::json!({"error": "unknown user"}),
                    ),
                };
                (Duration::ZERO, r)
            }
            hyper::Method::DELETE => {
                *s.received.deletes.entry(user.clone()).or_default() += 1;
                if s.faults.fail_deletes > 0 {
                    s.faults.fail_deletes -= 1;
                    let st = StatusCode::from_u16(if s.faults.status == 0 {
                        503
                    } else {
                        s.faults.status
                    })
                    .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
                    (
                        Duration::ZERO,
                        reply(st, serde_json::json!({"error": "try again later"})),
                    )
                } else {
                    let delay = if s.faults.slow_deletes > 0 {
                        s.faults.slow_deletes -= 1;
                        s.faults.delay
                    } else {
                        Duration::ZERO
                    };
                    let r = if !s.users.contains_key(&user) {
                        reply(
                            StatusCode::NOT_FOUND,
                            serde_json::json!({"error": "unknown user"}),
                        )
                    } else {
                        if !s.faults.ignore_deletes {
                            s.users.remove(&user);
                            save(&s);
                        }
                        reply(
                            StatusCode::ACCEPTED,
                            serde_json::json!({"status": "deleted"}),
                        )
                    };
                    (delay, r)
                }
            }
            hyper::Method::PUT => {
                *s.received.seeds.entry(user.clone()).or_default() += 1;
                s.users.insert(user.clone(), 1);
                save(&s);
                (
                    Duration::ZERO,
                    reply(
                        StatusCode::CREATED,
                        serde_json::json!({"status": "created"}),
                    ),
                )
            }
            _ => (
                Duration::ZERO,
                reply(
                    StatusCode::METHOD_NOT_ALLOWED,
                    serde_json::json!({"error": "method"}),
                ),
            ),
        }
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    Ok(action)
}

/// `POST /v1/erasures`: the body is recorded, then the user it names by `email` deleted.
async fn erasure_request(
    req: Request<hyper::body::Incoming>,
    state: Arc<Mutex<State>>,
) -> Response<Full<Bytes>> {
    use http_body_util::BodyExt;
    let token = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match req.into_body().collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(_) => {
            return reply(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": "body"}),
            );
        }
    };
    let mut s = state.lock().expect("vendor state");
    if let Some(want) = &s.faults.token
        && token.as_deref() != Some(format!("Bearer {want}").as_str())
    {
        s.received.unauthorized += 1;
        return reply(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"error": "unauthorized"}),
        );
    }
    s.received.erasure_bodies.push(body.clone());
    let email = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["email"].as_str().map(str::to_string));
    let Some(email) = email else {
        return reply(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": "a JSON body with an email"}),
        );
    };
    *s.received.deletes.entry(email.clone()).or_default() += 1;
    if s.users.remove(&email).is_none() {
        return reply(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "unknown user"}),
        );
    }
    save(&s);
    reply(
        StatusCode::ACCEPTED,
        serde_json::json!({"status": "deleted"}),
    )
}

impl Vendor {
    /// Starts the vendor of the demo in `dir` on `port` (0: any free port), serving the users
    /// in `dir/vendor/users.json`.
    pub async fn start(dir: &Path, port: u16) -> Result<Vendor> {
        let file = dir.join(USERS);
        let users: BTreeMap<String, u64> = match std::fs::read_to_string(&file) {
            Ok(t) => serde_json::from_str(&t)?,
            Err(_) => BTreeMap::new(),
        };
        let state = Arc::new(Mutex::new(State {
            users,
            file,
            ..Default::default()
        }));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| Error::io(format!("127.0.0.1:{port}"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("vendor listener", e))?;
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let svc = hyper::service::service_fn(move |req| handle(req, st.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, svc)
                        .await;
                });
            }
        });
        Ok(Vendor { addr, state, task })
    }

    /// Changes how it misbehaves.
    pub fn set_faults(&self, f: Faults) {
        self.state.lock().expect("vendor state").faults = f;
    }

    /// What it received so far.
    pub fn received(&self) -> Received {
        self.state.lock().expect("vendor state").received.clone()
    }

    /// Whether it knows `user`.
    pub fn knows(&self, user: &str) -> bool {
        self.state
            .lock()
            .expect("vendor state")
            .users
            .contains_key(user)
    }
}

/// Writes the vendor's users (email -> tickets) for a new demo.
pub fn write_users(dir: &Path, users: &BTreeMap<String, u64>) -> Result<()> {
    let f = dir.join(USERS);
    if let Some(p) = f.parent() {
        std::fs::create_dir_all(p).map_err(|e| Error::io(p.display().to_string(), e))?;
    }
    std::fs::write(&f, serde_json::to_string_pretty(users)?)
        .map_err(|e| Error::io(f.display().to_string(), e))
}

/// A free port on 127.0.0.1 (for a demo's vendor).
pub fn free_port() -> Result<u16> {
    let l =
        std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| Error::io("127.0.0.1:0", e))?;
    Ok(l.local_addr()
        .map_err(|e| Error::io("127.0.0.1:0", e))?
        .port())
}
