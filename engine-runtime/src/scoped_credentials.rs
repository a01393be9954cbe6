//! Credentials scoped to one transaction's object-store paths: AWS STS `AssumeRole` with a session
//! policy built from an [`AccessGrant`], so an engine given the resulting [`TemporaryCredentials`]
//! can read its inputs and write under its output prefix and nothing else (the session's
//! permissions are the intersection of the role's policies and the session policy).
//!
//! The policy is built without I/O ([`AccessGrant::session_policy`]); [`StsConfig::assume_role`]
//! is the one call that talks to STS, signed with `object_store`'s SigV4 signer and sent with its
//! HTTP client, so no AWS SDK is linked.

use std::fmt;
use std::time::Duration;

use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::{ClientOptions, HttpConnector, HttpRequestBody, ReqwestConnector};
use serde::Deserialize;

use crate::error::RuntimeError;

/// The most characters STS accepts in a plaintext session policy.
pub const SESSION_POLICY_LIMIT: usize = 2048;
/// The shortest session STS grants.
pub const MIN_SESSION_DURATION: Duration = Duration::from_secs(900);
/// The longest session STS grants (a role's own maximum session duration may be shorter).
pub const MAX_SESSION_DURATION: Duration = Duration::from_secs(43_200);

const READ_ACTIONS: &[&str] = &["s3:GetObject"];
const WRITE_ACTIONS: &[&str] = &[
    "s3:PutObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
];

/// What one transaction may touch in one bucket: objects it reads (`s3:GetObject`) and prefixes it
/// writes under (`s3:PutObject`, `s3:AbortMultipartUpload`, `s3:ListMultipartUploadParts`).
///
/// ```
/// use weir_engine_runtime::AccessGrant;
///
/// let grant = AccessGrant::new("weir-data")
///     .read("datasets/source/data/slice-1.parquet")
///     .read("datasets/derived/checkpoints/7/*")
///     .write_under("datasets/derived/staging/tx-8");
/// assert_eq!(grant.bucket(), "weir-data");
/// assert_eq!(grant.writes(), ["datasets/derived/staging/tx-8"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessGrant {
    bucket: String,
    read: Vec<String>,
    write: Vec<String>,
}

impl AccessGrant {
    /// Nothing yet in `bucket`.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            read: Vec::new(),
            write: Vec::new(),
        }
    }

    /// Also allows reading an object key, or every key matching an IAM pattern such as
    /// `prefix/*` (`*` matches any characters, `/` included).
    #[must_use]
    pub fn read(mut self, key_or_pattern: impl Into<String>) -> Self {
        self.read.push(key_or_pattern.into());
        self
    }

    /// Also allows writing, in one request or in parts, every key under `prefix` (with or without
    /// its trailing `/`; an empty prefix is the whole bucket).
    #[must_use]
    pub fn write_under(mut self, prefix: impl Into<String>) -> Self {
        self.write.push(prefix.into());
        self
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The keys and patterns that may be read, as given.
    pub fn reads(&self) -> &[String] {
        &self.read
    }

    /// The prefixes that may be written under, as given.
    pub fn writes(&self) -> &[String] {
        &self.write
    }

    /// The IAM session policy for this grant, as compact JSON: version `2012-10-17`, an `Allow`
    /// statement `Read` for the read keys and patterns and one `Write` for everything under the
    /// write prefixes (a grant without reads or without writes leaves that statement out),
    /// resources `arn:aws:s3:::<bucket>/<key>`.
    ///
    /// A grant with neither is [`RuntimeError::EmptyAccessGrant`] (IAM has no empty policy). STS
    /// rejects session policies over [`SESSION_POLICY_LIMIT`] characters: such a policy is
    /// [`RuntimeError::SessionPolicyTooLarge`], and the caller can retry with coarser patterns
    /// (one `prefix/*` instead of many keys).
    ///
    /// ```
    /// use weir_engine_runtime::{AccessGrant, RuntimeError};
    ///
    /// let grant = AccessGrant::new("weir-data")
    ///     .read("in/slice-1.parquet")
    ///     .write_under("out/tx-8/");
    /// let policy: serde_json::Value = serde_json::from_str(&grant.session_policy().unwrap()).unwrap();
    /// assert_eq!(policy["Version"], "2012-10-17");
    /// assert_eq!(policy["Statement"][0]["Resource"][0], "arn:aws:s3:::weir-data/in/slice-1.parquet");
    /// assert_eq!(policy["Statement"][1]["Resource"][0], "arn:aws:s3:::weir-data/out/tx-8/*");
    ///
    /// let too_many = (0..100).fold(AccessGrant::new("weir-data"), |grant, n| {
    ///     grant.read(format!("datasets/source/data/slice-{n}.parquet"))
    /// });
    /// assert!(matches!(
    ///     too_many.session_policy(),
    ///     Err(RuntimeError::SessionPolicyTooLarge { limit: 2048, .. })
    /// ));
    /// ```
    pub fn session_policy(&self) -> Result<String, RuntimeError> {
        let statement = |sid: &str, actions: &[&str], resources: Vec<String>| {
            serde_json::json!({
                "Sid": sid,
                "Effect": "Allow",
                "Action": actions,
                "Resource": resources,
            })
        };
        let mut statements = Vec::new();
        if !self.read.is_empty() {
            let resources = self.read.iter().map(|key| self.object_arn(key)).collect();
            statements.push(statement("Read", READ_ACTIONS, resources));
        }
        if !self.write.is_empty() {
            let resources = self
                .write
                .iter()
                .map(|prefix| self.object_arn(&under(prefix)))
                .collect();
            statements.push(statement("Write", WRITE_ACTIONS, resources));
        }
        if statements.is_empty() {
            return Err(RuntimeError::EmptyAccessGrant {
                bucket: self.bucket.clone(),
            });
        }
        let policy =
            serde_json::json!({ "Version": "2012-10-17", "Statement": statements }).to_string();
        let length = policy.chars().count();
        if length > SESSION_POLICY_LIMIT {
            return Err(RuntimeError::SessionPolicyTooLarge {
                length,
                limit: SESSION_POLICY_LIMIT,
            });
        }
        Ok(policy)
    }

    fn object_arn(&self, key: &str) -> String {
        format!("arn:aws:s3:::{}/{key}", self.bucket)
    }
}

/// The IAM pattern for every key under `prefix`.
fn under(prefix: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        "*".to_owned()
    } else {
        format!("{prefix}/*")
    }
}

/// How to reach STS and which role to assume.
///
/// The base credentials sign the `AssumeRole` call; unless given they are read from
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` when the call is made.
///
/// ```
/// use std::time::Duration;
/// use weir_engine_runtime::StsConfig;
///
/// let sts = StsConfig::new("https://sts.amazonaws.com", "arn:aws:iam::123456789012:role/weir-engine")
///     .with_region("eu-west-1")
///     .with_credentials("AKIAEXAMPLE", "secret")
///     .with_duration(Duration::from_secs(3600));
/// assert!(!format!("{sts:?}").contains("secret"));
/// ```
#[derive(Clone)]
pub struct StsConfig {
    endpoint: String,
    region: String,
    role_arn: String,
    credentials: Option<(String, String)>,
    session_token: Option<String>,
    duration: Duration,
}

impl fmt::Debug for StsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StsConfig")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("role_arn", &self.role_arn)
            .field("credentials", &self.credentials.as_ref().map(|_| "<set>"))
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<set>"),
            )
            .field("duration", &self.duration)
            .finish()
    }
}

impl StsConfig {
    /// Assumes `role_arn` through the STS at `endpoint` (e.g. `https://sts.amazonaws.com`, or
    /// `http://127.0.0.1:5000` for a local server), region `us-east-1`, base credentials from the
    /// environment, sessions of [`MIN_SESSION_DURATION`].
    pub fn new(endpoint: impl Into<String>, role_arn: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            region: "us-east-1".to_owned(),
            role_arn: role_arn.into(),
            credentials: None,
            session_token: None,
            duration: MIN_SESSION_DURATION,
        }
    }

    /// Signs for this region (a regional endpoint's, e.g. `eu-west-1` for
    /// `https://sts.eu-west-1.amazonaws.com`).
    #[must_use]
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }

    /// Signs with these base credentials instead of the environment's.
    #[must_use]
    pub fn with_credentials(
        mut self,
        key_id: impl Into<String>,
        secret: impl Into<String>,
    ) -> Self {
        self.credentials = Some((key_id.into(), secret.into()));
        self
    }

    /// Sends this session token with the base credentials (when they are temporary themselves).
    #[must_use]
    pub fn with_session_token(mut self, token: impl Into<String>) -> Self {
        self.session_token = Some(token.into());
        self
    }

    /// Asks for sessions this long, between [`MIN_SESSION_DURATION`] and [`MAX_SESSION_DURATION`]
    /// (whole seconds; checked by [`Self::assume_role`]).
    #[must_use]
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// The STS endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The role assumed.
    pub fn role_arn(&self) -> &str {
        &self.role_arn
    }

    /// Calls STS `AssumeRole` for `session_name` (2 to 64 of `A-Z a-z 0-9 + = , . @ _ -`, e.g. the
    /// transaction's id; it shows in the role's CloudTrail entries) with `grant`'s session policy,
    /// and returns the session's credentials. The call is made once, not retried.
    ///
    /// STS's own refusals (bad signature, unknown key, no permission to assume the role, an
    /// invalid policy) are [`RuntimeError::AssumeRoleRejected`] with STS's code; an unreachable
    /// endpoint or an answer that is not STS's is [`RuntimeError::AssumeRole`].
    pub async fn assume_role(
        &self,
        session_name: &str,
        grant: &AccessGrant,
    ) -> Result<TemporaryCredentials, RuntimeError> {
        check_session_name(session_name)?;
        let duration = self.duration_seconds()?;
        let policy = grant.session_policy()?;
        let credential = self.base_credential()?;
        let failed = |reason: String| RuntimeError::AssumeRole {
            endpoint: self.endpoint.clone(),
            role_arn: self.role_arn.clone(),
            reason,
        };

        let body = assume_role_form(&self.role_arn, session_name, duration, &policy);
        let mut request = http::Request::builder()
            .method(http::Method::POST)
            .uri(self.endpoint.as_str())
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded; charset=utf-8",
            )
            .body(HttpRequestBody::from(body))
            .map_err(|e| failed(format!("the endpoint is not a valid URL: {e}")))?;
        // The signer parses the URL and writes the key id, region and token into headers with
        // `unwrap`: check them here so that bad configuration is an error, not a panic.
        check_signable(&request, &credential, &self.region).map_err(failed)?;
        AwsAuthorizer::new(&credential, "sts", &self.region).authorize(&mut request, None);

        let client = ReqwestConnector::default()
            .connect(&ClientOptions::new().with_allow_http(true))
            .map_err(|e| failed(format!("could not build the HTTP client: {}", chain(&e))))?;
        let response = client
            .execute(request)
            .await
            .map_err(|e| failed(format!("STS did not answer: {}", chain(&e))))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .bytes()
            .await
            .map_err(|e| failed(format!("STS's answer was cut off: {}", chain(&e))))?;
        let text = String::from_utf8_lossy(&bytes);

        if !status.is_success() {
            return Err(match parse_sts_error(&text) {
                Some(StsError { code, message }) => RuntimeError::AssumeRoleRejected {
                    endpoint: self.endpoint.clone(),
                    role_arn: self.role_arn.clone(),
                    status: status.as_u16(),
                    code,
                    message,
                },
                None => failed(format!(
                    "STS answered {status} with something that is not an STS error: {}",
                    excerpt(&text)
                )),
            });
        }
        let credentials = parse_assume_role_response(&text).map_err(|e| {
            failed(format!(
                "STS answered {status} with something that is not an AssumeRole response ({e}): {}",
                excerpt(&text)
            ))
        })?;
        tracing::debug!(
            endpoint = %self.endpoint,
            role_arn = %self.role_arn,
            session_name,
            bucket = grant.bucket(),
            expiration = %credentials.expiration,
            "assumed a role scoped to a transaction's paths"
        );
        Ok(credentials)
    }

    fn duration_seconds(&self) -> Result<u64, RuntimeError> {
        let seconds = self.duration.as_secs();
        let range = MIN_SESSION_DURATION.as_secs()..=MAX_SESSION_DURATION.as_secs();
        if range.contains(&seconds) {
            Ok(seconds)
        } else {
            Err(RuntimeError::SessionDurationOutOfRange {
                seconds,
                min: *range.start(),
                max: *range.end(),
            })
        }
    }

    fn base_credential(&self) -> Result<AwsCredential, RuntimeError> {
        let (key_id, secret_key, env_token) = match &self.credentials {
            Some((key_id, secret)) => (key_id.clone(), secret.clone(), None),
            None => (
                env_var("AWS_ACCESS_KEY_ID")?,
                env_var("AWS_SECRET_ACCESS_KEY")?,
                std::env::var("AWS_SESSION_TOKEN")
                    .ok()
                    .filter(|t| !t.is_empty()),
            ),
        };
        Ok(AwsCredential {
            key_id,
            secret_key,
            token: self.session_token.clone().or(env_token),
        })
    }
}

fn env_var(variable: &'static str) -> Result<String, RuntimeError> {
    match std::env::var(variable) {
        Ok(value) if !value.is_empty() => Ok(value),
        _ => Err(RuntimeError::NoBaseCredentials { variable }),
    }
}

fn check_session_name(name: &str) -> Result<(), RuntimeError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c);
    if (2..=64).contains(&name.len()) && name.chars().all(allowed) {
        Ok(())
    } else {
        Err(RuntimeError::InvalidSessionName {
            name: name.to_owned(),
        })
    }
}

/// What `AwsAuthorizer::authorize` would otherwise panic on.
fn check_signable(
    request: &object_store::client::HttpRequest,
    credential: &AwsCredential,
    region: &str,
) -> Result<(), String> {
    let url = url::Url::parse(&request.uri().to_string())
        .map_err(|e| format!("the endpoint is not a valid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("the endpoint must be an http:// or https:// URL with a host".to_owned());
    }
    let header_safe = |what: &str, value: &str| {
        http::HeaderValue::from_str(value)
            .map(drop)
            .map_err(|_| format!("the {what} has characters an HTTP header cannot hold"))
    };
    header_safe("access key id", &credential.key_id)?;
    header_safe("region", region)?;
    if let Some(token) = &credential.token {
        header_safe("session token", token)?;
    }
    Ok(())
}

/// The form body of an `AssumeRole` call.
fn assume_role_form(role_arn: &str, session_name: &str, duration: u64, policy: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("Action", "AssumeRole")
        .append_pair("Version", "2011-06-15")
        .append_pair("RoleArn", role_arn)
        .append_pair("RoleSessionName", session_name)
        .append_pair("DurationSeconds", &duration.to_string())
        .append_pair("Policy", policy)
        .finish()
}

/// The credentials of one assumed-role session. `Debug` shows the key id and expiration only.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TemporaryCredentials {
    /// The session's access key id (`ASIA…` on AWS).
    pub access_key_id: String,
    /// The session's secret key.
    pub secret_access_key: String,
    /// The session token every request must carry.
    pub session_token: String,
    /// When the session ends, as STS wrote it (ISO 8601, e.g. `2026-12-04T01:22:33Z`).
    pub expiration: String,
}

impl fmt::Debug for TemporaryCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemporaryCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &"<redacted>")
            .field("expiration", &self.expiration)
            .finish()
    }
}

impl TemporaryCredentials {
    /// The environment an engine process reads them from: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`.
    pub fn environment(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".to_owned(), self.access_key_id.clone()),
            (
                "AWS_SECRET_ACCESS_KEY".to_owned(),
                self.secret_access_key.clone(),
            ),
            ("AWS_SESSION_TOKEN".to_owned(), self.session_token.clone()),
        ]
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleResponse {
    assume_role_result: AssumeRoleResult,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleResult {
    credentials: TemporaryCredentials,
}

fn parse_assume_role_response(xml: &str) -> Result<TemporaryCredentials, quick_xml::DeError> {
    quick_xml::de::from_str::<AssumeRoleResponse>(xml).map(|r| r.assume_role_result.credentials)
}

/// STS's `<Error>`: inside `<ErrorResponse>` as STS sends it, inside `<ErrorResponse><Errors>`
/// as moto's authentication sends it, or on its own.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StsError {
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ErrorResponse {
    error: Option<StsError>,
    errors: Option<Errors>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Errors {
    error: StsError,
}

fn parse_sts_error(xml: &str) -> Option<StsError> {
    match quick_xml::de::from_str::<ErrorResponse>(xml) {
        Ok(ErrorResponse {
            error: Some(error), ..
        }) => Some(error),
        Ok(ErrorResponse {
            errors: Some(errors),
            ..
        }) => Some(errors.error),
        _ => quick_xml::de::from_str::<StsError>(xml).ok(),
    }
}

/// The start of an unexpected answer, for an error message.
fn excerpt(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// An error and its causes on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is a failed test
mod tests {
    use super::*;

    fn policy_of(grant: &AccessGrant) -> serde_json::Value {
        serde_json::from_str(&grant.session_policy().unwrap()).unwrap()
    }

    #[test]
    fn session_policy_allows_reads_of_the_keys_and_writes_under_the_prefixes() {
        let grant = AccessGrant::new("weir-data")
            .read("datasets/a/slice-1.parquet")
            .read("datasets/b/checkpoints/3/*")
            .write_under("datasets/b/staging/tx-4")
            .write_under("datasets/b/checkpoints/4/");
        let policy = policy_of(&grant);
        assert_eq!(policy["Version"], "2012-10-17");
        let statements = policy["Statement"].as_array().unwrap();
        assert_eq!(statements.len(), 2);

        let read = &statements[0];
        assert_eq!(read["Effect"], "Allow");
        assert_eq!(read["Action"], serde_json::json!(["s3:GetObject"]));
        assert_eq!(
            read["Resource"],
            serde_json::json!([
                "arn:aws:s3:::weir-data/datasets/a/slice-1.parquet",
                "arn:aws:s3:::weir-data/datasets/b/checkpoints/3/*",
            ])
        );

        let write = &statements[1];
        assert_eq!(write["Effect"], "Allow");
        assert_eq!(
            write["Action"],
            serde_json::json!([
                "s3:PutObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts"
            ])
        );
        assert_eq!(
            write["Resource"],
            serde_json::json!([
                "arn:aws:s3:::weir-data/datasets/b/staging/tx-4/*",
                "arn:aws:s3:::weir-data/datasets/b/checkpoints/4/*",
            ])
        );
    }

    #[test]
    fn read_only_grant_has_only_the_read_statement() {
        let policy = policy_of(&AccessGrant::new("b").read("k"));
        let statements = policy["Statement"].as_array().unwrap();
        assert_eq!(statements.len(), 1);
        assert_eq!(statements[0]["Sid"], "Read");
    }

    #[test]
    fn write_under_the_empty_prefix_is_the_whole_bucket() {
        let policy = policy_of(&AccessGrant::new("b").write_under(""));
        assert_eq!(
            policy["Statement"][0]["Resource"],
            serde_json::json!(["arn:aws:s3:::b/*"])
        );
    }

    #[test]
    fn empty_grant_has_no_policy() {
        assert!(matches!(
            AccessGrant::new("b").session_policy(),
            Err(RuntimeError::EmptyAccessGrant { bucket }) if bucket == "b"
        ));
    }

    #[test]
    fn session_policy_over_2048_characters_is_too_large_and_says_how_large() {
        let grant = (0..60).fold(AccessGrant::new("weir-data"), |grant, n| {
            grant.read(format!("datasets/source/slice-{n}.parquet"))
        });
        match grant.session_policy() {
            Err(RuntimeError::SessionPolicyTooLarge { length, limit }) => {
                assert_eq!(limit, 2048);
                assert!(length > 2048, "{length}");
            }
            other => panic!("expected SessionPolicyTooLarge, got {other:?}"),
        }
        // The coarser pattern fits.
        let coarse = AccessGrant::new("weir-data").read("datasets/source/*");
        assert!(coarse.session_policy().unwrap().len() <= SESSION_POLICY_LIMIT);
    }

    #[test]
    fn session_policy_of_exactly_the_limit_is_accepted() {
        let base = AccessGrant::new("b")
            .read("")
            .session_policy()
            .unwrap()
            .len();
        let exact = AccessGrant::new("b").read("k".repeat(SESSION_POLICY_LIMIT - base));
        assert_eq!(exact.session_policy().unwrap().len(), SESSION_POLICY_LIMIT);
        let over = AccessGrant::new("b").read("k".repeat(SESSION_POLICY_LIMIT - base + 1));
        assert!(matches!(
            over.session_policy(),
            Err(RuntimeError::SessionPolicyTooLarge { length: 2049, .. })
        ));
    }

    /// The example response of the AssumeRole API reference, with its namespace.
    const SUCCESS: &str = r#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <SourceIdentity>Alice</SourceIdentity>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/demo/TestAR</Arn>
      <AssumedRoleId>ARO123EXAMPLE123:TestAR</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQW</SessionToken>
      <Expiration>2019-11-09T13:34:41Z</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata>
    <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
  </ResponseMetadata>
</AssumeRoleResponse>"#;

    #[test]
    fn assume_role_response_gives_the_session_credentials() {
        let credentials = parse_assume_role_response(SUCCESS).unwrap();
        assert_eq!(credentials.access_key_id, "ASIAIOSFODNN7EXAMPLE");
        assert_eq!(
            credentials.secret_access_key,
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
        );
        assert!(credentials.session_token.starts_with("AQoDYXdzEPT//"));
        assert_eq!(credentials.expiration, "2019-11-09T13:34:41Z");
    }

    #[test]
    fn response_without_credentials_is_not_an_assume_role_response() {
        let xml = "<AssumeRoleResponse><AssumeRoleResult><PackedPolicySize>6</PackedPolicySize></AssumeRoleResult></AssumeRoleResponse>";
        assert!(parse_assume_role_response(xml).is_err());
        assert!(parse_assume_role_response("not xml <<<").is_err());
        assert!(parse_assume_role_response("").is_err());
    }

    #[test]
    fn sts_error_response_gives_its_code_and_message() {
        let xml = r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error>
    <Type>Sender</Type>
    <Code>AccessDenied</Code>
    <Message>User: arn:aws:iam::123456789012:user/weir is not authorized to perform: sts:AssumeRole</Message>
  </Error>
  <RequestId>4e1f8a3b-0000-0000-0000-000000000000</RequestId>
</ErrorResponse>"#;
        assert_eq!(
            parse_sts_error(xml),
            Some(StsError {
                code: "AccessDenied".into(),
                message: "User: arn:aws:iam::123456789012:user/weir is not authorized to perform: sts:AssumeRole".into(),
            })
        );
    }

    #[test]
    fn error_inside_errors_is_read_too() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
<ErrorResponse><Errors><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match.</Message><Type>Sender</Type></Error></Errors></ErrorResponse>"#;
        assert_eq!(
            parse_sts_error(xml).map(|e| e.code),
            Some("SignatureDoesNotMatch".to_owned())
        );
    }

    #[test]
    fn bare_error_element_is_read_too_and_other_answers_are_not_sts_errors() {
        let bare = "<Error><Code>InvalidClientTokenId</Code></Error>";
        assert_eq!(
            parse_sts_error(bare),
            Some(StsError {
                code: "InvalidClientTokenId".into(),
                message: String::new()
            })
        );
        assert_eq!(parse_sts_error("<html>502 Bad Gateway</html>"), None);
        assert_eq!(parse_sts_error(""), None);
    }

    #[test]
    fn debug_redacts_secrets_and_tokens() {
        let credentials = parse_assume_role_response(SUCCESS).unwrap();
        let shown = format!("{credentials:?}");
        assert!(shown.contains("ASIAIOSFODNN7EXAMPLE"), "{shown}");
        assert!(shown.contains("2019-11-09T13:34:41Z"), "{shown}");
        assert!(!shown.contains("wJalrXUtnFEMI"), "{shown}");
        assert!(!shown.contains("AQoDYXdzEPT"), "{shown}");

        let sts = StsConfig::new("http://127.0.0.1:1", "arn:aws:iam::1:role/r")
            .with_credentials("AKIABASE", "base-secret")
            .with_session_token("base-token");
        let shown = format!("{sts:?}");
        assert!(shown.contains("arn:aws:iam::1:role/r"), "{shown}");
        assert!(!shown.contains("AKIABASE"), "{shown}");
        assert!(!shown.contains("base-secret"), "{shown}");
        assert!(!shown.contains("base-token"), "{shown}");
    }

    #[test]
    fn environment_names_the_three_aws_variables() {
        let credentials = parse_assume_role_response(SUCCESS).unwrap();
        let environment = credentials.environment();
        let names: Vec<_> = environment.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN"
            ]
        );
        assert_eq!(environment[2].1, credentials.session_token);
    }

    #[test]
    fn assume_role_form_encodes_every_parameter() {
        let form = assume_role_form(
            "arn:aws:iam::1:role/r",
            "tx-1",
            900,
            r#"{"Version":"2012-10-17"}"#,
        );
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        let expected = [
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::1:role/r"),
            ("RoleSessionName", "tx-1"),
            ("DurationSeconds", "900"),
            ("Policy", r#"{"Version":"2012-10-17"}"#),
        ];
        assert_eq!(
            pairs,
            expected.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec()
        );
    }

    #[test]
    fn session_names_follow_sts_rules() {
        assert!(check_session_name("tx-0001_a.b@c=d,e+f").is_ok());
        for bad in ["", "x", "has space", "slash/no", &"x".repeat(65), "ünï"] {
            assert!(
                matches!(
                    check_session_name(bad),
                    Err(RuntimeError::InvalidSessionName { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn durations_outside_900_to_43200_seconds_are_refused_before_calling_sts() {
        let grant = AccessGrant::new("b").read("k");
        for seconds in [899, 43_201] {
            let sts = StsConfig::new("http://127.0.0.1:1", "arn:aws:iam::1:role/r")
                .with_credentials("k", "s")
                .with_duration(Duration::from_secs(seconds));
            assert!(matches!(
                sts.assume_role("tx-1", &grant).await,
                Err(RuntimeError::SessionDurationOutOfRange { seconds: s, min: 900, max: 43_200 }) if s == seconds
            ));
        }
    }

    #[tokio::test]
    async fn unsignable_configuration_is_an_error_not_a_panic() {
        let grant = AccessGrant::new("b").read("k");
        let cases = [
            (
                StsConfig::new("not a url", "r").with_credentials("k", "s"),
                "not a valid URL",
            ),
            (
                StsConfig::new("ftp://127.0.0.1:1", "r").with_credentials("k", "s"),
                "http:// or https://",
            ),
            (
                StsConfig::new("http://127.0.0.1:1", "r").with_credentials("k\n", "s"),
                "access key id",
            ),
            (
                StsConfig::new("http://127.0.0.1:1", "r")
                    .with_credentials("k", "s")
                    .with_session_token("t\r\n"),
                "session token",
            ),
            (
                StsConfig::new("http://127.0.0.1:1", "r")
                    .with_credentials("k", "s")
                    .with_region("us\0east"),
                "region",
            ),
        ];
        for (sts, why) in cases {
            match sts.assume_role("tx-1", &grant).await {
                Err(RuntimeError::AssumeRole { reason, .. }) => {
                    assert!(reason.contains(why), "{sts:?}: {reason}");
                }
                other => panic!("{sts:?}: expected AssumeRole, got {other:?}"),
            }
        }
    }

    #[test]
    fn excerpt_cuts_long_answers_on_a_character_boundary() {
        let long = "é".repeat(400);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), 301);
        assert_eq!(excerpt("short"), "short");
    }
}
