//! Who may call the Flight SQL server: users with passwords (HTTP basic auth in the Flight handshake, which
//! answers with a session token), bearer tokens, and optionally `anonymous`, as `kamu sql server` offers it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::error::SqlError;

/// The user name of anonymous access (`anonymous` with an empty password or the password `anonymous`, as
/// kamu's clients send it).
pub const ANONYMOUS: &str = "anonymous";

/// How long a session token from the handshake stays valid without use.
const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// At most this many live session tokens; the least recently used goes first.
const MAX_SESSIONS: usize = 100_000;

/// Who a call is from, as the server authenticated it (in each request's extensions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user name: a configured user, the name of a bearer token, `anonymous`, or `-` when the server
    /// has no authentication.
    pub user: String,
    /// How the call proved it.
    pub via: Credential,
}

/// How a call authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The server has no authentication: nothing was asked.
    Unauthenticated,
    /// A user name and password (`authorization: Basic ...`), usually in the handshake.
    Basic,
    /// A session token the handshake gave out (`authorization: Bearer ...`).
    Session(String),
    /// A configured bearer token.
    Token,
}

/// The server's authentication: who may call it.
///
/// With nothing configured ([`Auth::none`]) every call is accepted, so the server may only listen on
/// loopback. Once users, tokens or anonymous access are configured every call must carry
/// `authorization: Bearer TOKEN` (a configured token, or a session token from the handshake) or
/// `authorization: Basic ...` (a configured user, or `anonymous` when allowed).
///
/// ```
/// use weir_sql::Auth;
///
/// let auth = Auth::none()
///     .with_user("alice", "s3cret")
///     .with_token("ci", "weir-token-1")
///     .allowing_anonymous(true);
/// assert!(auth.is_enabled() && auth.has_credentials());
/// assert!(!Auth::none().allowing_anonymous(true).has_credentials());
/// ```
#[derive(Clone, Default)]
pub struct Auth {
    /// User name -> password.
    users: HashMap<String, String>,
    /// Bearer token -> its name (for logs).
    tokens: HashMap<String, String>,
    anonymous: bool,
    sessions: Arc<Mutex<Sessions>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the passwords or tokens.
        f.debug_struct("Auth")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("tokens", &self.tokens.values().collect::<Vec<_>>())
            .field("anonymous", &self.anonymous)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Sessions {
    live: HashMap<String, Session>,
}

struct Session {
    user: String,
    last_used: Instant,
}

impl Auth {
    /// No authentication: every call is accepted (a handshake too, whatever it sends). Loopback only.
    pub fn none() -> Self {
        Self::default()
    }

    /// Accepts basic auth as `name` with `password`.
    pub fn with_user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.users.insert(name.into(), password.into());
        self
    }

    /// Accepts `authorization: Bearer TOKEN`; `name` names the token in logs.
    pub fn with_token(mut self, name: impl Into<String>, token: impl Into<String>) -> Self {
        self.tokens.insert(token.into(), name.into());
        self
    }

    /// Accepts basic auth as `anonymous` (password empty or `anonymous`) when `allow`.
    pub fn allowing_anonymous(mut self, allow: bool) -> Self {
        self.anonymous = allow;
        self
    }

    /// Whether calls must authenticate at all.
    pub fn is_enabled(&self) -> bool {
        self.anonymous || self.has_credentials()
    }

    /// Whether users or bearer tokens are configured: what listening beyond loopback requires (anonymous
    /// access alone lets anyone in).
    pub fn has_credentials(&self) -> bool {
        !self.users.is_empty() || !self.tokens.is_empty()
    }

    /// Adds the users of a users file: one `name:password` per line (the password is everything after the
    /// first `:`); blank lines and lines starting with `#` are skipped. `origin` names the file in errors.
    pub fn with_users_file(mut self, text: &str, origin: &str) -> Result<Self, SqlError> {
        for (n, line) in content_lines(text) {
            let Some((name, password)) = line.split_once(':') else {
                return Err(SqlError::Config {
                    message: format!("{origin}:{n}: expected `name:password`"),
                });
            };
            if name.is_empty() || password.is_empty() {
                return Err(SqlError::Config {
                    message: format!(
                        "{origin}:{n}: the user name and the password must not be empty"
                    ),
                });
            }
            if self.users.contains_key(name) {
                return Err(SqlError::Config {
                    message: format!("{origin}:{n}: user `{name}` is given twice"),
                });
            }
            self = self.with_user(name, password);
        }
        Ok(self)
    }

    /// Adds the tokens of a tokens file: one token per line, optionally `name token` (whitespace between);
    /// blank lines and lines starting with `#` are skipped. A token shorter than 16 characters is refused:
    /// it could be guessed. `origin` names the file (or variable) in errors.
    pub fn with_tokens_file(mut self, text: &str, origin: &str) -> Result<Self, SqlError> {
        for (n, line) in content_lines(text) {
            let mut words = line.split_whitespace();
            let (name, token) = match (words.next(), words.next(), words.next()) {
                (Some(token), None, None) => (format!("{origin}:{n}"), token),
                (Some(name), Some(token), None) => (name.to_owned(), token),
                _ => {
                    return Err(SqlError::Config {
                        message: format!("{origin}:{n}: expected `TOKEN` or `NAME TOKEN`"),
                    });
                }
            };
            if token.len() < 16 {
                return Err(SqlError::Config {
                    message: format!(
                        "{origin}:{n}: token `{name}` is {} characters; bearer tokens need at least 16",
                        token.len()
                    ),
                });
            }
            self = self.with_token(name, token);
        }
        Ok(self)
    }

    /// Authenticates a call by its `authorization` header.
    pub fn authenticate(&self, metadata: &MetadataMap) -> Result<Principal, Status> {
        let header = metadata.get("authorization").map(|v| v.to_str());
        if !self.is_enabled() {
            return Ok(Principal {
                user: "-".to_owned(),
                via: Credential::Unauthenticated,
            });
        }
        let header = match header {
            None => {
                return Err(Status::unauthenticated(
                    "authentication required: log in with basic auth (the Flight handshake gives a session token) or send `authorization: Bearer TOKEN`",
                ));
            }
            Some(Err(_)) => {
                return Err(Status::unauthenticated(
                    "the authorization header is not readable text",
                ));
            }
            Some(Ok(h)) => h,
        };
        if let Some(token) = strip_scheme(header, "Bearer") {
            return self.bearer(token.trim());
        }
        if let Some(encoded) = strip_scheme(header, "Basic") {
            let (user, password) = decode_basic(encoded.trim())?;
            return self.basic(&user, &password);
        }
        Err(Status::unauthenticated(
            "unsupported authorization scheme: use Basic (user and password) or Bearer (a token)",
        ))
    }

    /// Checks a user name and password.
    fn basic(&self, user: &str, password: &str) -> Result<Principal, Status> {
        if let Some(expected) = self.users.get(user) {
            if constant_time_eq(expected.as_bytes(), password.as_bytes()) {
                return Ok(Principal {
                    user: user.to_owned(),
                    via: Credential::Basic,
                });
            }
        } else if user == ANONYMOUS && self.anonymous && matches!(password, "" | ANONYMOUS) {
            return Ok(Principal {
                user: ANONYMOUS.to_owned(),
                via: Credential::Basic,
            });
        }
        tracing::info!(user, "Flight SQL: basic auth refused");
        Err(Status::unauthenticated(
            if user == ANONYMOUS && !self.anonymous {
                "anonymous access is not allowed on this server: log in as a configured user or send a bearer token"
            } else {
                "wrong user name or password"
            },
        ))
    }

    fn bearer(&self, token: &str) -> Result<Principal, Status> {
        if let Some(name) = self.tokens.get(token) {
            return Ok(Principal {
                user: name.clone(),
                via: Credential::Token,
            });
        }
        let now = Instant::now();
        let mut sessions = self
            .sessions
            .lock()
            .map_err(|_| Status::internal("the session table is unusable"))?;
        match sessions.live.get_mut(token) {
            Some(session) if now.duration_since(session.last_used) < SESSION_IDLE => {
                session.last_used = now;
                Ok(Principal {
                    user: session.user.clone(),
                    via: Credential::Session(token.to_owned()),
                })
            }
            Some(_) => {
                sessions.live.remove(token);
                Err(Status::unauthenticated(
                    "the session token expired: log in again",
                ))
            }
            None => Err(Status::unauthenticated(
                "the bearer token is not valid here: unknown, or a session token of an earlier server run; log in again",
            )),
        }
    }

    /// The token the handshake answers with: a new session token for a basic-auth login (and when there is
    /// no authentication), the same token for a call that already carries one.
    pub(crate) fn session_token(&self, principal: &Principal) -> Result<String, Status> {
        match &principal.via {
            Credential::Session(token) => Ok(token.clone()),
            Credential::Token => Err(Status::invalid_argument(
                "a bearer token needs no handshake: send it with every call",
            )),
            Credential::Basic | Credential::Unauthenticated => {
                let token = new_token(if principal.user == ANONYMOUS {
                    "anon_"
                } else {
                    "weir_"
                })?;
                if self.is_enabled() {
                    let now = Instant::now();
                    let mut sessions = self
                        .sessions
                        .lock()
                        .map_err(|_| Status::internal("the session table is unusable"))?;
                    sessions
                        .live
                        .retain(|_, s| now.duration_since(s.last_used) < SESSION_IDLE);
                    if sessions.live.len() >= MAX_SESSIONS
                        && let Some(oldest) = sessions
                            .live
                            .iter()
                            .min_by_key(|(_, s)| s.last_used)
                            .map(|(t, _)| t.clone())
                    {
                        sessions.live.remove(&oldest);
                    }
                    sessions.live.insert(
                        token.clone(),
                        Session {
                            user: principal.user.clone(),
                            last_used: now,
                        },
                    );
                }
                tracing::info!(user = %principal.user, "Flight SQL: session opened");
                Ok(token)
            }
        }
    }
}

/// The lines of a config file that hold something, numbered from 1, trimmed.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

fn strip_scheme<'a>(header: &'a str, scheme: &str) -> Option<&'a str> {
    let (given, rest) = header.split_once(' ')?;
    given.eq_ignore_ascii_case(scheme).then_some(rest)
}

fn decode_basic(encoded: &str) -> Result<(String, String), Status> {
    let bad =
        || Status::unauthenticated("the basic authorization is not base64 of `user:password`");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded))
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (user, password) = text.split_once(':').ok_or_else(bad)?;
    Ok((user.to_owned(), password.to_owned()))
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A random token: `prefix` and 32 random bytes in hex.
fn new_token(prefix: &str) -> Result<String, Status> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Status::internal(format!("no randomness for a session token: {e}")))?;
    let mut token = String::with_capacity(prefix.len() + 64);
    token.push_str(prefix);
    for b in bytes {
        token.push_str(&format!("{b:02x}"));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_header(value: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert("authorization", value.parse().expect("ascii"));
        m
    }

    fn basic(user: &str, password: &str) -> MetadataMap {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        with_header(&format!("Basic {encoded}"))
    }

    #[test]
    fn users_files_and_tokens_files_are_parsed_with_their_errors_located() {
        let auth = Auth::none()
            .with_users_file("# users\nalice:pa:ss\n\nbob:x\n", "users.txt")
            .expect("parses");
        assert!(auth.authenticate(&basic("alice", "pa:ss")).is_ok());
        let err = Auth::none()
            .with_users_file("alice\n", "users.txt")
            .expect_err("no password");
        assert!(err.to_string().contains("users.txt:1"), "{err}");
        let err = Auth::none()
            .with_tokens_file("ci short\n", "tokens.txt")
            .expect_err("short");
        assert!(err.to_string().contains("at least 16"), "{err}");
        let auth = Auth::none()
            .with_tokens_file("ci 0123456789abcdef0123\n", "tokens.txt")
            .expect("parses");
        let p = auth
            .authenticate(&with_header("Bearer 0123456789abcdef0123"))
            .expect("token");
        assert_eq!(p.user, "ci");
    }

    #[test]
    fn a_session_token_from_a_login_authenticates_later_calls_and_a_made_up_one_does_not() {
        let auth = Auth::none().with_user("alice", "pw");
        let login = auth.authenticate(&basic("alice", "pw")).expect("login");
        let token = auth.session_token(&login).expect("a token");
        let p = auth
            .authenticate(&with_header(&format!("Bearer {token}")))
            .expect("session");
        assert_eq!(p.user, "alice");
        assert!(auth.authenticate(&with_header("Bearer weir_0000")).is_err());
        assert!(auth.authenticate(&basic("alice", "wrong")).is_err());
        assert!(auth.authenticate(&MetadataMap::new()).is_err());
    }

    #[test]
    fn anonymous_logs_in_only_when_allowed() {
        let closed = Auth::none().with_user("alice", "pw");
        let err = closed
            .authenticate(&basic(ANONYMOUS, ANONYMOUS))
            .expect_err("not allowed");
        assert!(err.message().contains("anonymous access is not allowed"));
        let open = Auth::none().allowing_anonymous(true);
        for password in ["", ANONYMOUS] {
            let p = open
                .authenticate(&basic(ANONYMOUS, password))
                .expect("allowed");
            assert!(open.session_token(&p).expect("token").starts_with("anon_"));
        }
        assert!(open.authenticate(&basic(ANONYMOUS, "other")).is_err());
    }
}
