//! A vendor's system reached through its deletion API (an error reporter, a support desk).
//!
//! Configured as two requests, a deletion and a probe: method, URL template (`{subject}` is the
//! subject reference, percent-encoded; `${VAR}` an environment variable), an optional JSON body
//! (a JSON document whose strings may hold `{subject}` and `${VAR}`), and how statuses map
//! (delete: `ok` = done, default 200/202/204; probe: `ok` = found, default 200, with an
//! optional JSON pointer to a count; `absent` = the vendor doesn't know the
//! subject, default 404/410). The credential is a header whose value comes from the environment
//! (`auth_env`), kept in a `secrecy` type and marked sensitive: it never appears in logs, errors
//! or evidence, and neither does a rendered URL (errors name the template).
//!
//! 5xx, 429, timeouts and connection failures are retried with exponential backoff
//! (`retries` attempts, first wait `backoff_ms`); any other status is an error at once. A
//! failure after the retries is an error naming the store, which leaves the request open and
//! resumable. Many subjects are sent as concurrent requests (8 at a time).
//!
//! Templates are rendered in one pass over the configured text: `${VAR}` expands to the
//! variable's value and `{subject}` to the subject's value, and neither inserted text is ever
//! read for placeholders again. So a subject value that looks like a placeholder (an email such
//! as `${LETHE_REGISTER_KEY}@example.org`, valid by RFC 5322) goes to the vendor as written,
//! never as the secret it names. In a body the value is inserted into a JSON string of the
//! parsed document and the document serialized again: it is always one JSON string, escaped,
//! never JSON syntax (a quote in a value can't add a field).
//!
//! Seed (the drill): `seed_request`, when the store gives one, creates the synthetic subject at
//! the vendor (a test user); the erasure's deletion request removes it.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use secrecy::{ExposeSecret, SecretString};

use super::registry::{HttpRequest, StoreConfig};
use super::{Deleted, Seeded, SeededPlace, Store, StoreAction, StoreSubject, error};
use crate::error::Result;

/// Requests in flight at once for a batch.
const CONCURRENCY: usize = 8;

/// The vendor API connector.
pub struct HttpStore {
    name: String,
    delete: Option<HttpRequest>,
    probe: Option<HttpRequest>,
    seed: Option<HttpRequest>,
    auth: Option<(String, SecretString)>,
    client: reqwest::Client,
    retries: u32,
    backoff: Duration,
    timeout: Duration,
}

impl std::fmt::Debug for HttpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStore")
            .field("name", &self.name)
            .field("auth", &self.auth.as_ref().map(|(h, _)| (h, "<redacted>")))
            .finish()
    }
}

/// One piece of a request template.
#[derive(Debug, Clone, PartialEq)]
enum Piece<'a> {
    /// Text sent as written.
    Text(&'a str),
    /// `${VAR}`: an environment variable's value.
    Env(&'a str),
    /// `{subject}`: the subject's value.
    Subject,
}

/// The pieces of `s`, in order (`${` without its `}` is an error naming the template).
fn pieces<'a>(store: &str, s: &'a str) -> Result<Vec<Piece<'a>>> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        let env = rest.find("${");
        let subject = rest.find("{subject}");
        let (i, is_env) = match (env, subject) {
            (None, None) => break,
            (Some(e), Some(j)) if j < e => (j, false),
            (Some(e), _) => (e, true),
            (None, Some(j)) => (j, false),
        };
        if i > 0 {
            out.push(Piece::Text(&rest[..i]));
        }
        if is_env {
            let after = &rest[i + 2..];
            let j = after
                .find('}')
                .ok_or_else(|| error(store, format!("unclosed ${{ in `{s}`")))?;
            out.push(Piece::Env(&after[..j]));
            rest = &after[j + 1..];
        } else {
            out.push(Piece::Subject);
            rest = &rest[i + "{subject}".len()..];
        }
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// Renders `template` in one pass: `${VAR}` from the environment, `{subject}` as
/// `subject` (already encoded for where it goes). Inserted text is never scanned again.
fn render(store: &str, template: &str, subject: &str) -> Result<String> {
    let mut out = String::with_capacity(template.len() + subject.len());
    for p in pieces(store, template)? {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Subject => out.push_str(subject),
            Piece::Env(var) => {
                out.push_str(&std::env::var(var).map_err(|_| {
                    error(store, format!("the environment variable {var} is not set"))
                })?)
            }
        }
    }
    Ok(out)
}

/// A JSON body template rendered for one subject value: the template parsed as JSON, each of
/// its strings (keys too) rendered by [`render`], the document serialized again — so the
/// value lands inside one JSON string, escaped, whatever it holds.
fn render_body(store: &str, template: &str, subject: &str) -> Result<String> {
    fn walk(store: &str, v: &mut serde_json::Value, subject: &str) -> Result<()> {
        match v {
            serde_json::Value::String(s) => *s = render(store, s, subject)?,
            serde_json::Value::Array(a) => {
                for x in a {
                    walk(store, x, subject)?;
                }
            }
            serde_json::Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut x) in old {
                    walk(store, &mut x, subject)?;
                    o.insert(render(store, &k, subject)?, x);
                }
            }
            _ => {}
        }
        Ok(())
    }
    let mut doc = parse_body(template).map_err(|m| error(store, m))?;
    walk(store, &mut doc, subject)?;
    Ok(serde_json::to_string(&doc)?)
}

/// A body template as JSON, or why it isn't (for the registry's check: `{subject}` must be
/// inside a JSON string, e.g. `{"email": "{subject}"}`).
pub(crate) fn parse_body(template: &str) -> std::result::Result<serde_json::Value, String> {
    serde_json::from_str(template).map_err(|e| {
        format!(
            "the body is not JSON ({e}): write it as a JSON document with {{subject}} and ${{VAR}} inside strings, e.g. '{{\"email\": \"{{subject}}\"}}'"
        )
    })
}

/// Percent-encodes a path segment or query value (RFC 3986 unreserved characters kept).
fn encode(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What one request came back with.
enum Outcome {
    /// An `ok` status, with the body.
    Ok(Vec<u8>),
    /// An `absent` status.
    Absent,
}

impl HttpStore {
    /// From a registered `http` store. Reads the credential from the environment now.
    pub fn open(name: &str, c: &StoreConfig) -> Result<HttpStore> {
        let auth = match &c.auth_env {
            Some(var) => {
                let v = std::env::var(var).map_err(|_| {
                    error(
                        name,
                        format!("the environment variable {var} (auth_env) holding its credential is not set"),
                    )
                })?;
                Some((
                    c.auth_header
                        .clone()
                        .unwrap_or_else(|| "Authorization".into()),
                    SecretString::from(v),
                ))
            }
            None => None,
        };
        let timeout = Duration::from_secs(c.timeout_seconds.unwrap_or(10).max(1));
        lethe_iceberg::io::ensure_tls();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| error(name, format!("can't build an HTTP client: {e}")))?;
        Ok(HttpStore {
            name: name.to_string(),
            delete: c.delete_request.clone(),
            probe: c.probe_request.clone(),
            seed: c.seed_request.clone(),
            auth,
            client,
            retries: c.retries.unwrap_or(3).max(1),
            backoff: Duration::from_millis(c.backoff_ms.unwrap_or(200)),
            timeout,
        })
    }

    /// Sends `req` for one subject value, with retries. `default_ok` applies when the request
    /// lists no `ok` statuses.
    async fn send(
        &self,
        what: &str,
        req: &HttpRequest,
        value: &str,
        default_ok: &[u16],
    ) -> Result<Outcome> {
        let url = render(&self.name, &req.url, &encode(value))?;
        let method = reqwest::Method::from_bytes(req.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| {
                error(
                    &self.name,
                    format!("{what}: `{}` is not an HTTP method", req.method),
                )
            })?;
        let ok: &[u16] = if req.ok.is_empty() {
            default_ok
        } else {
            &req.ok
        };
        let absent: &[u16] = if req.absent.is_empty() {
            &[404, 410]
        } else {
            &req.absent
        };
        let body = match &req.body {
            Some(b) => Some(render_body(&self.name, b, value)?),
            None => None,
        };
        let shown = format!("{} {}", req.method, req.url);
        let mut wait = self.backoff;
        let mut last = String::new();
        for attempt in 1..=self.retries {
            let mut rb = self.client.request(method.clone(), &url);
            if let Some((h, v)) = &self.auth {
                let mut hv =
                    reqwest::header::HeaderValue::from_str(v.expose_secret()).map_err(|_| {
                        error(
                            &self.name,
                            format!("the credential for header {h} is not a valid header value"),
                        )
                    })?;
                hv.set_sensitive(true);
                rb = rb.header(h.as_str(), hv);
            }
            if let Some(b) = &body {
                rb = rb
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(b.clone());
            }
            match rb.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if ok.contains(&status) {
                        let bytes = resp.bytes().await.map_err(|e| {
                            error(
                                &self.name,
                                format!("{what} {shown}: reading the response: {}", redact(&e)),
                            )
                        })?;
                        return Ok(Outcome::Ok(bytes.to_vec()));
                    }
                    if absent.contains(&status) {
                        return Ok(Outcome::Absent);
                    }
                    last = format!("HTTP {status}");
                    if !(status >= 500 || status == 429) {
                        return Err(error(
                            &self.name,
                            format!("{what} {shown}: HTTP {status} (not retried)"),
                        ));
                    }
                }
                Err(e) if e.is_timeout() => {
                    last = format!("timed out after {}s", self.timeout.as_secs())
                }
                Err(e) => last = redact(&e),
            }
            tracing::info!(store = %self.name, attempt, "{what} {shown}: {last}; retrying");
            if attempt < self.retries {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
        Err(error(
            &self.name,
            format!("{what} {shown}: {last} after {} attempt(s)", self.retries),
        ))
    }

    async fn each<F, Fut>(&self, subjects: &[StoreSubject], f: F) -> Result<Vec<u64>>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<u64>>,
    {
        let jobs: Vec<(usize, String)> = subjects
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.values.iter().map(move |v| (i, v.clone())))
            .collect();
        let results: Vec<(usize, Result<u64>)> = futures::stream::iter(jobs)
            .map(|(i, v)| {
                let fut = f(v);
                async move { (i, fut.await) }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut out = vec![0u64; subjects.len()];
        for (i, r) in results {
            out[i] += r?;
        }
        Ok(out)
    }
}

/// A reqwest error without its URL (which holds the subject reference).
fn redact(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "can't connect"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_body() || e.is_decode() {
        "a broken response"
    } else {
        "the request failed"
    };
    let source = std::error::Error::source(e)
        .map(|s| format!(": {s}"))
        .unwrap_or_default();
    // The source of a connect error is an io error, which names no URL.
    format!(
        "{kind}{}",
        if e.is_connect() {
            source
        } else {
            String::new()
        }
    )
}

fn count_at(body: &[u8], pointer: &Option<String>) -> Result<u64, String> {
    let Some(p) = pointer else { return Ok(1) };
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the response is not JSON: {e}"))?;
    let at = v
        .pointer(p)
        .ok_or_else(|| format!("the response has nothing at {p}"))?;
    match at {
        serde_json::Value::Number(n) => n.as_u64().ok_or_else(|| format!("{p} is not a count")),
        serde_json::Value::Array(a) => Ok(a.len() as u64),
        serde_json::Value::Bool(b) => Ok(u64::from(*b)),
        serde_json::Value::Null => Ok(0),
        _ => Err(format!("{p} is not a count")),
    }
}

#[async_trait]
impl Store for HttpStore {
    fn name(&self) -> &str {
        &self.name
    }

    async fn delete(&self, subjects: &[StoreSubject]) -> Result<Deleted> {
        let req = self
            .delete
            .as_ref()
            .ok_or_else(|| error(&self.name, "no delete_request"))?;
        let records = self
            .each(subjects, |v| async move {
                Ok(
                    match self.send("delete", req, &v, &[200, 202, 204]).await? {
                        Outcome::Ok(_) => 1,
                        Outcome::Absent => 0,
                    },
                )
            })
            .await?;
        Ok(Deleted {
            action: StoreAction::Request,
            mechanism: format!("vendor API: {} {}", req.method, req.url),
            records,
            unreachable: Vec::new(),
        })
    }

    async fn probe(&self, subjects: &[StoreSubject]) -> Result<Vec<u64>> {
        let req = self
            .probe
            .as_ref()
            .ok_or_else(|| error(&self.name, "no probe_request"))?;
        self.each(subjects, |v| async move {
            match self.send("probe", req, &v, &[200]).await? {
                Outcome::Ok(body) => count_at(&body, &req.count_pointer).map_err(|m| {
                    error(&self.name, format!("probe {} {}: {m}", req.method, req.url))
                }),
                Outcome::Absent => Ok(0),
            }
        })
        .await
    }

    async fn seed(&self, subject: &StoreSubject, _key: i64) -> Result<Seeded> {
        let req = self.seed.as_ref().ok_or_else(|| {
            error(
                &self.name,
                "no seed_request: the drill can't create its synthetic subject at the vendor (give the vendor's test-user request)",
            )
        })?;
        let value = subject.values.first().ok_or_else(|| {
            error(
                &self.name,
                "the synthetic subject has no value for this store",
            )
        })?;
        match self.send("seed", req, value, &[200, 201, 202, 204]).await? {
            Outcome::Ok(_) => Ok(Seeded {
                records: 1,
                places: vec![SeededPlace {
                    place: format!("{} {}", req.method, req.url),
                    key: None,
                }],
            }),
            Outcome::Absent => Err(error(
                &self.name,
                format!(
                    "seed {} {}: the vendor answered as for an unknown user",
                    req.method, req.url
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_references_are_percent_encoded() {
        assert_eq!(
            encode("ALEXA.REED3590@POST.EXAMPLE"),
            "ALEXA.REED3590%40POST.EXAMPLE"
        );
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn templates_render_in_one_pass_and_a_value_is_never_expanded() {
        // (PATH is set wherever the tests run; no test sets a variable: that would race)
        let path = std::env::var("PATH").unwrap();
        assert_eq!(
            render("v", "${PATH}/u/{subject}", "a%40b").unwrap(),
            format!("{path}/u/a%40b")
        );
        assert_eq!(
            render("v", "x/{subject}", "${PATH}@example.org").unwrap(),
            "x/${PATH}@example.org"
        );
        assert!(render("v", "x/${PATH", "s").is_err());
        let body = render_body(
            "v",
            r#"{"email": "{subject}", "note": "by ${PATH}", "list": ["{subject}"]}"#,
            "${PATH}\"@x.org",
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["email"], "${PATH}\"@x.org");
        assert_eq!(v["list"][0], "${PATH}\"@x.org");
        assert_eq!(v["note"], format!("by {path}"));
        assert_eq!(v.as_object().unwrap().len(), 3, "{body}");
        assert!(parse_body(r#"{"id": {subject}}"#).is_err());
    }

    #[test]
    fn counts_from_a_json_pointer() {
        assert_eq!(
            count_at(br#"{"user":{"tickets":3}}"#, &Some("/user/tickets".into())),
            Ok(3)
        );
        assert_eq!(
            count_at(br#"{"items":[1,2]}"#, &Some("/items".into())),
            Ok(2)
        );
        assert_eq!(count_at(b"anything", &None), Ok(1));
        assert!(count_at(b"{}", &Some("/x".into())).is_err());
    }

    #[test]
    fn the_credential_never_shows_in_debug() {
        let s = HttpStore {
            name: "v".into(),
            delete: None,
            probe: None,
            seed: None,
            auth: Some((
                "Authorization".into(),
                SecretString::from("Bearer sekret-123"),
            )),
            client: {
                lethe_iceberg::io::ensure_tls();
                reqwest::Client::new()
            },
            retries: 1,
            backoff: Duration::from_millis(1),
            timeout: Duration::from_secs(1),
        };
        assert!(!format!("{s:?}").contains("sekret"));
    }
}
