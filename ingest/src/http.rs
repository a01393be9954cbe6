//! Fetching a `Url` source over HTTP and HTTPS.
//!
//! - **Client**: reqwest over rustls, trusting the system's certificate authorities plus those in the PEM
//!   files that `WEIR_CA_CERTIFICATES` names (paths separated by `:`; for a private or test CA).
//!   Redirects are followed (up to 10). A connection must be made within 30 s and the server must send
//!   something at least every 60 s.
//! - **Retries**: a failed connection, a timeout, a body that ends before it is complete, a `5xx` or a `429`
//!   is tried again, up to [`ATTEMPTS`] times in all, waiting 0.5 s, then 1 s, ... in between. A `4xx` is
//!   not retried; it fails the pull with the status and the URL.
//! - **Conditional requests**: the source state kept in the chain is the response's `ETag` (`odf/etag`)
//!   or, without one, its `Last-Modified` (`odf/last-modified`, as RFC 3339), else the SHA3 hash of the
//!   body (`odf/etag`). The next pull sends `If-None-Match` / `If-Modified-Since`; a `304 Not Modified`,
//!   or a body with the same validator or hash, adds no data, as in kamu.
//! - **The body** streams to a file in the pull's scratch folder, hashed as it is written, with progress in
//!   bytes (and an ETA when the server gives its length). A body that breaks off is never read: the pull
//!   fails (after the retries) with nothing committed, and the next pull fetches it again.
//! - **Templates**: `${{ env.NAME }}` in the URL and in header values is replaced by the environment
//!   variable `NAME` (as kamu does); an unset variable is an error.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::StatusCode;
use reqwest::header::{
    ETAG, HeaderMap, HeaderName, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED,
};
use tracing::{info, warn};
use weir_odf::{FetchStepUrl, Sha3Hasher, SourceState};

use super::fetch::{FetchError, Fetched, STATE_ETAG};
use weir_dataset::progress::{Phase, Progress, Report};

/// Source state kind of a URL whose server gave a `Last-Modified` and no `ETag`.
pub const STATE_LAST_MODIFIED: &str = "odf/last-modified";
/// The environment variable naming extra PEM files of trusted certificate authorities.
pub const CA_CERTIFICATES_ENV: &str = "WEIR_CA_CERTIFICATES";
/// Attempts per fetch, the first included.
pub const ATTEMPTS: u32 = 3;
/// The wait before the first retry; it doubles for each further one.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether `url` is fetched by this module.
pub fn is_http(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// `text` with every `${{ env.NAME }}` replaced by the variable's value.
///
/// ```
/// use weir_ingest::http::expand_env;
/// assert_eq!(expand_env("a${{ env.HOME_X }}b", |_| Some("1".into())).unwrap(), "a1b");
/// assert!(expand_env("${{ env.MISSING }}", |_| None).is_err());
/// ```
pub fn expand_env(text: &str, var: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let Some(end) = after.find("}}") else {
            return Err(format!("`${{{{` without its `}}}}` in {text:?}"));
        };
        let expr = after[..end].trim();
        let Some(name) = expr.strip_prefix("env.").map(str::trim) else {
            return Err(format!(
                "`${{{{ {expr} }}}}`: only `${{{{ env.NAME }}}}` templates are supported"
            ));
        };
        let value = var(name).ok_or_else(|| {
            format!("the environment variable `{name}` the source's template names is not set")
        })?;
        out.push_str(&value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The HTTP client, with the extra certificate authorities of [`CA_CERTIFICATES_ENV`].
fn client() -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::limited(10))
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .user_agent(concat!("weir/", env!("CARGO_PKG_VERSION")));
    if let Some(paths) = std::env::var_os(CA_CERTIFICATES_ENV) {
        for path in std::env::split_paths(&paths).filter(|p| !p.as_os_str().is_empty()) {
            let pem = std::fs::read(&path)
                .map_err(|e| format!("{CA_CERTIFICATES_ENV}: {}: {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                format!(
                    "{CA_CERTIFICATES_ENV}: {}: not PEM certificates: {e}",
                    path.display()
                )
            })?;
            if certs.is_empty() {
                return Err(format!(
                    "{CA_CERTIFICATES_ENV}: {}: holds no PEM certificate",
                    path.display()
                ));
            }
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
    }
    builder
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))
}

/// Why one attempt failed, and whether another may succeed.
struct Failed {
    message: String,
    retry: bool,
}

/// What one attempt got.
enum Got {
    NotModified,
    Body {
        size: u64,
        hash: String,
        etag: Option<String>,
        last_modified: Option<String>,
    },
}

/// The source state each URL was fetched with in this process. A pull runs a root again after it commits
/// (a glob may have more files); a URL it already fetched in this run, whose state is still the one that
/// fetch gave, is up to date without asking the server again.
static FETCHED: std::sync::Mutex<Vec<(String, SourceState)>> = std::sync::Mutex::new(Vec::new());

fn fetched_in_this_run(url: &str, state: Option<&SourceState>) -> bool {
    let Some(state) = state else { return false };
    FETCHED
        .lock()
        .map(|f| f.iter().any(|(u, s)| u == url && s == state))
        .unwrap_or(false)
}

fn remember(url: &str, state: &SourceState) {
    if let Ok(mut f) = FETCHED.lock() {
        f.retain(|(u, _)| u != url);
        f.push((url.to_string(), state.clone()));
    }
}

/// Fetches `step`'s URL into `scratch/source`; `None` when it has not changed since `state`.
pub async fn fetch(
    step: &FetchStepUrl,
    state: Option<&SourceState>,
    scratch: &Path,
    progress: &Progress,
) -> Result<Option<Fetched>, FetchError> {
    let shown = step.url.clone();
    let err = |message: String| FetchError {
        what: shown.clone(),
        message,
    };
    if fetched_in_this_run(&step.url, state) {
        return Ok(None);
    }
    let env = |n: &str| std::env::var(n).ok();
    let url = expand_env(&step.url, env).map_err(err)?;
    let mut headers = HeaderMap::new();
    for h in step.headers.iter().flatten() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|e| err(format!("header `{}`: {e}", h.name)))?;
        let value = expand_env(&h.value, env).map_err(err)?;
        let value =
            HeaderValue::from_str(&value).map_err(|e| err(format!("header `{}`: {e}", h.name)))?;
        headers.insert(name, value);
    }
    match state {
        Some(s) if s.kind == STATE_ETAG => {
            if let Ok(v) = HeaderValue::from_str(&s.value) {
                headers.insert(IF_NONE_MATCH, v);
            }
        }
        Some(s) if s.kind == STATE_LAST_MODIFIED => {
            if let Some(v) = chrono::DateTime::parse_from_rfc3339(&s.value)
                .ok()
                .and_then(|t| {
                    HeaderValue::from_str(
                        &t.with_timezone(&chrono::Utc)
                            .format("%a, %d %b %Y %H:%M:%S GMT")
                            .to_string(),
                    )
                    .ok()
                })
            {
                headers.insert(IF_MODIFIED_SINCE, v);
            }
        }
        _ => {}
    }
    let client = client().map_err(err)?;
    let copy = scratch.join("source");
    progress.phase(Phase::Fetch);
    let mut attempt = 1;
    let got = loop {
        match attempt_once(&client, &url, &headers, &copy, progress).await {
            Ok(got) => break got,
            Err(f) if f.retry && attempt < ATTEMPTS => {
                let wait = FIRST_BACKOFF * 2u32.pow(attempt - 1);
                warn!(url = %shown, attempt, wait_ms = wait.as_millis() as u64, error = %f.message, "fetch failed; retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            Err(f) => {
                let _ = std::fs::remove_file(&copy);
                let tries = if attempt > 1 {
                    format!(" (after {attempt} attempts)")
                } else {
                    String::new()
                };
                return Err(err(format!("{}{tries}", f.message)));
            }
        }
    };
    let (size, hash, etag, last_modified) = match got {
        Got::NotModified => {
            info!(url = %shown, "not modified");
            if let Some(s) = state {
                remember(&shown, s);
            }
            return Ok(None);
        }
        Got::Body {
            size,
            hash,
            etag,
            last_modified,
        } => (size, hash, etag, last_modified),
    };
    let new_state = match (etag, last_modified) {
        (Some(etag), _) => SourceState {
            source_name: "default".into(),
            kind: STATE_ETAG.into(),
            value: etag,
        },
        (None, Some(modified)) => SourceState {
            source_name: "default".into(),
            kind: STATE_LAST_MODIFIED.into(),
            value: modified,
        },
        (None, None) => SourceState {
            source_name: "default".into(),
            kind: STATE_ETAG.into(),
            value: hash.clone(),
        },
    };
    // A server that ignores the conditional request: the same validator, or the same bytes, is no change.
    let unchanged = state.is_some_and(|s| {
        (s.kind == new_state.kind && s.value == new_state.value)
            || (s.kind == STATE_ETAG && s.value == hash)
    });
    if unchanged {
        let _ = std::fs::remove_file(&copy);
        if let Some(s) = state {
            remember(&shown, s);
        }
        return Ok(None);
    }
    remember(&shown, &new_state);
    Ok(Some(Fetched {
        name: shown,
        path: copy,
        size,
        state: new_state,
    }))
}

async fn attempt_once(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    copy: &Path,
    progress: &Progress,
) -> Result<Got, Failed> {
    let transient = |message: String| Failed {
        message,
        retry: true,
    };
    let response = client
        .get(url)
        .headers(headers.clone())
        .send()
        .await
        .map_err(|e| {
            let message = describe(&e);
            // A certificate the client does not trust will not be trusted on a second try.
            let retry = !message.to_ascii_lowercase().contains("certificate");
            Failed { message, retry }
        })?;
    let status = response.status();
    if status == StatusCode::NOT_MODIFIED {
        return Ok(Got::NotModified);
    }
    if !status.is_success() {
        let retry = status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS;
        let at = response.url().to_string();
        let hint = match status {
            StatusCode::NOT_FOUND | StatusCode::GONE => {
                ": the resource is not there; check the source's `url`"
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                ": access is refused; credentials go in the source's `headers` (e.g. `${{ env.TOKEN }}` in an Authorization header)"
            }
            _ => "",
        };
        return Err(Failed {
            message: format!("the server answered {status} for {at}{hint}"),
            retry,
        });
    }
    let header = |name: HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    let etag = header(ETAG);
    let modified = header(LAST_MODIFIED)
        .and_then(|v| chrono::DateTime::parse_from_rfc2822(&v).ok())
        .map(|t| t.with_timezone(&chrono::Utc));
    let last_modified = modified.map(|t| t.to_rfc3339());
    let total = response.content_length();
    let local = |e: std::io::Error| Failed {
        message: format!("writing {}: {e}", copy.display()),
        retry: false,
    };
    let mut out = std::fs::File::create(copy).map_err(local)?;
    let mut hasher = Sha3Hasher::new();
    let mut size = 0u64;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            transient(format!(
                "the body broke off after {size} bytes{}: {}",
                total.map_or(String::new(), |t| format!(" of {t}")),
                describe(&e)
            ))
        })?;
        hasher.update(&chunk);
        out.write_all(&chunk).map_err(local)?;
        size += chunk.len() as u64;
        progress.report(Report::new(Phase::Fetch).bytes(size).total_bytes(total));
    }
    if let Some(t) = total
        && t != size
    {
        return Err(transient(format!(
            "the body ended after {size} of its {t} bytes"
        )));
    }
    // The copy keeps the resource's modification time (`eventTime: FromMetadata`).
    if let Some(t) = modified {
        out.set_modified(t.into()).map_err(local)?;
    }
    out.sync_all().map_err(local)?;
    progress.finish(
        Report::new(Phase::Fetch)
            .bytes(size)
            .total_bytes(Some(size)),
    );
    Ok(Got::Body {
        size,
        hash: hasher.finish().to_string(),
        etag,
        last_modified,
    })
}

/// A reqwest error with its causes (the TLS or connection reason is in the chain).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_environment_variables_only() {
        let var = |n: &str| (n == "KEY").then(|| "s3cr3t".to_string());
        assert_eq!(
            expand_env("https://x/?k=${{ env.KEY }}&a=1", var).unwrap(),
            "https://x/?k=s3cr3t&a=1"
        );
        assert!(
            expand_env("${{ env.OTHER }}", var)
                .unwrap_err()
                .contains("`OTHER`")
        );
        assert!(expand_env("${{ secrets.KEY }}", var).is_err());
        assert!(expand_env("${{ env.KEY", var).is_err());
        assert_eq!(expand_env("plain", var).unwrap(), "plain");
    }

    #[test]
    fn http_urls_are_recognised_in_any_case() {
        assert!(is_http("https://example.org/x.csv"));
        assert!(is_http("HTTP://127.0.0.1:8080/x"));
        assert!(!is_http("s3://bucket/x"));
        assert!(!is_http("data/x.csv"));
    }
}
