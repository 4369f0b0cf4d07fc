//! A small HTTP proxy in front of a real server (the REST catalog of the test SeaweedFS), for
//! tests that need the server's real answers with one thing changed: it forwards every request
//! as it came, logs it, and lets the test replace an answer's body after the server acted.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};

/// One request the proxy forwarded: method, path, the server's status.
#[derive(Debug, Clone)]
pub struct Forwarded {
    /// The method.
    pub method: String,
    /// The path (without the query).
    pub path: String,
    /// The status the real server answered.
    pub status: u16,
}

/// What to answer instead of the server's answer: given the request's method and path, the
/// status and body the server answered, a replacement body (None: the answer as it is).
pub type Rewrite = Arc<dyn Fn(&str, &str, u16, &Bytes) -> Option<Bytes> + Send + Sync>;

/// A running proxy.
pub struct Proxy {
    /// `http://127.0.0.1:PORT`, to give lethe instead of the server's URI.
    pub uri: String,
    /// Every request forwarded, in order.
    pub log: Arc<Mutex<Vec<Forwarded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a proxy forwarding to `upstream` (`http://host:port`) on a free port of 127.0.0.1.
pub async fn start(upstream: &str, rewrite: Rewrite) -> Proxy {
    lethe_iceberg::io::ensure_tls();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let log: Arc<Mutex<Vec<Forwarded>>> = Arc::default();
    let client = reqwest::Client::builder().build().unwrap();
    let upstream = upstream.trim_end_matches('/').to_string();
    let state = Arc::new((client, upstream, rewrite, log.clone()));
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let svc = hyper::service::service_fn(move |req| forward(req, state.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, svc)
                    .await;
            });
        }
    });
    Proxy {
        uri: format!("http://{addr}"),
        log,
        task,
    }
}

type State = (reqwest::Client, String, Rewrite, Arc<Mutex<Vec<Forwarded>>>);

async fn forward(
    req: Request<hyper::body::Incoming>,
    state: Arc<State>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (client, upstream, rewrite, log) = &*state;
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path().to_string();
    let target = format!(
        "{upstream}{}",
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut headers = parts.headers.clone();
    headers.remove(hyper::header::HOST);
    headers.remove(hyper::header::CONTENT_LENGTH);
    let answer = client
        .request(parts.method.clone(), &target)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            let mut r = Response::new(Full::new(Bytes::from(e.to_string())));
            *r.status_mut() = hyper::StatusCode::BAD_GATEWAY;
            return Ok(r);
        }
    };
    let status = answer.status();
    let mut out_headers = answer.headers().clone();
    let bytes = answer.bytes().await.unwrap_or_default();
    log.lock().unwrap().push(Forwarded {
        method: parts.method.to_string(),
        path: path.clone(),
        status: status.as_u16(),
    });
    let bytes = rewrite(parts.method.as_str(), &path, status.as_u16(), &bytes).unwrap_or(bytes);
    out_headers.remove(hyper::header::CONTENT_LENGTH);
    out_headers.remove(hyper::header::TRANSFER_ENCODING);
    let mut r = Response::new(Full::new(bytes));
    *r.status_mut() = status;
    *r.headers_mut() = out_headers;
    Ok(r)
}
