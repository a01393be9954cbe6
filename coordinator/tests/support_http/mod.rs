//! A small HTTP/1.1 server on 127.0.0.1 for the fetch tests, plain or over TLS with a certificate authority
//! made here (rcgen): routes are set by path and may answer with a body (and an `ETag` / `Last-Modified`,
//! honouring `If-None-Match` / `If-Modified-Since` with a 304), a redirect, or a body that breaks off.
//! Every request is logged with its headers.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a path answers.
#[derive(Debug, Clone)]
pub enum Route {
    /// 200 with the body; a 304 when the request's validator matches.
    Ok {
        body: Vec<u8>,
        etag: Option<String>,
        last_modified: Option<String>,
    },
    /// 302 to another path.
    Redirect(String),
    /// 200 announcing the whole body's length, but the connection closes after `after` bytes.
    BreaksOff { body: Vec<u8>, after: usize },
}

impl Route {
    /// A body with no validators.
    pub fn body(body: impl Into<Vec<u8>>) -> Self {
        Route::Ok {
            body: body.into(),
            etag: None,
            last_modified: None,
        }
    }

    /// A body with an ETag.
    pub fn with_etag(body: impl Into<Vec<u8>>, etag: &str) -> Self {
        Route::Ok {
            body: body.into(),
            etag: Some(etag.into()),
            last_modified: None,
        }
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub status: u16,
}

/// A running server; it stops with the test process.
pub struct Server {
    pub addr: SocketAddr,
    pub tls: bool,
    routes: Arc<Mutex<HashMap<String, Route>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// The CA's certificate (PEM), for `WEIR_CA_CERTIFICATES`.
    pub ca_pem: Option<PathBuf>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts a plain HTTP server.
    pub fn http() -> Self {
        Self::start(false)
    }

    /// Starts an HTTPS server whose certificate (for `localhost` and 127.0.0.1) a fresh test CA signed.
    pub fn https() -> Self {
        Self::start(true)
    }

    fn start(tls: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (acceptor, ca_pem) = if tls {
            let (acceptor, pem) = tls_acceptor();
            let path = dir.path().join("ca.pem");
            std::fs::write(&path, pem).unwrap();
            (Some(acceptor), Some(path))
        } else {
            (None, None)
        };
        let routes: Arc<Mutex<HashMap<String, Route>>> = Arc::default();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let (r, s) = (routes.clone(), seen.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let Ok((socket, _)) = listener.accept().await else {
                        continue;
                    };
                    let (r, s, acceptor) = (r.clone(), s.clone(), acceptor.clone());
                    tokio::spawn(async move {
                        match acceptor {
                            Some(a) => {
                                if let Ok(stream) = a.accept(socket).await {
                                    serve(stream, r, s).await;
                                }
                            }
                            None => serve(socket, r, s).await,
                        }
                    });
                }
            });
        });
        let addr = rx.recv().unwrap();
        Self {
            addr,
            tls,
            routes,
            seen,
            ca_pem,
            _dir: dir,
        }
    }

    /// The URL of `path` (`/x.csv`), by IP address for HTTP and by `localhost` for HTTPS.
    pub fn url(&self, path: &str) -> String {
        if self.tls {
            format!("https://localhost:{}{path}", self.addr.port())
        } else {
            format!("http://127.0.0.1:{}{path}", self.addr.port())
        }
    }

    /// Sets what `path` answers.
    pub fn route(&self, path: &str, route: Route) {
        self.routes.lock().unwrap().insert(path.into(), route);
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    routes: Arc<Mutex<HashMap<String, Route>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = text.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_string();
    let headers: HashMap<String, String> = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let route = routes.lock().unwrap().get(&path).cloned();
    let (status, head, body, cut): (u16, String, Vec<u8>, Option<usize>) = match route {
        None => (404, String::new(), b"not found".to_vec(), None),
        Some(Route::Redirect(to)) => (302, format!("Location: {to}\r\n"), Vec::new(), None),
        Some(Route::BreaksOff { body, after }) => (200, String::new(), body, Some(after)),
        Some(Route::Ok {
            body,
            etag,
            last_modified,
        }) => {
            let fresh = etag
                .as_ref()
                .is_some_and(|e| headers.get("if-none-match") == Some(e))
                || last_modified
                    .as_ref()
                    .is_some_and(|m| headers.get("if-modified-since") == Some(m));
            let mut head = String::new();
            if let Some(e) = &etag {
                head.push_str(&format!("ETag: {e}\r\n"));
            }
            if let Some(m) = &last_modified {
                head.push_str(&format!("Last-Modified: {m}\r\n"));
            }
            if fresh {
                (304, head, Vec::new(), None)
            } else {
                (200, head, body, None)
            }
        }
    };
    seen.lock().unwrap().push(Seen {
        path,
        headers,
        status,
    });
    let reason = match status {
        200 => "OK",
        302 => "Found",
        304 => "Not Modified",
        _ => "Not Found",
    };
    let length = if status == 304 {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let response = format!("HTTP/1.1 {status} {reason}\r\n{head}{length}Connection: close\r\n\r\n");
    let _ = stream.write_all(response.as_bytes()).await;
    let sent = cut.unwrap_or(body.len()).min(body.len());
    let _ = stream.write_all(&body[..sent]).await;
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
}

/// A TLS acceptor for `localhost` / 127.0.0.1 and the PEM of the CA that signed its certificate.
fn tls_acceptor() -> (tokio_rustls::TlsAcceptor, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "weir test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::V4(
            std::net::Ipv4Addr::LOCALHOST,
        )));
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        ca_cert.pem(),
    )
}
