//! Credentials scoped to a transaction's paths, against moto's STS and S3 on 127.0.0.1: the shared
//! server (no authentication, as moto runs by default) and a second one of this file's own with
//! IAM authentication on, where moto checks SigV4 signatures, access keys and session tokens.
//!
//! moto records the session policy STS received but never applies it (an assumed role's
//! permissions are the role's own policies only), so no test here can show a denial by the policy.
use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use weir_engine_runtime::{AccessGrant, RuntimeError, S3Config, StsConfig, TemporaryCredentials};

const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/weir-transaction";
const BASE_KEY: &str = "weir-base-key";
const BASE_SECRET: &str = "weir-base-secret";

fn store(bucket: &str, endpoint: &str, credentials: &TemporaryCredentials) -> Arc<dyn ObjectStore> {
    S3Config::new(bucket, endpoint)
        .with_credentials(&credentials.access_key_id, &credentials.secret_access_key)
        .with_session_token(&credentials.session_token)
        .build()
        .unwrap()
}

async fn put(store: &dyn ObjectStore, path: &str, bytes: &[u8]) -> Result<(), object_store::Error> {
    store
        .put(&ObjectPath::from(path), bytes.to_vec().into())
        .await
        .map(drop)
}

async fn get(store: &dyn ObjectStore, path: &str) -> Result<Vec<u8>, object_store::Error> {
    Ok(store
        .get(&ObjectPath::from(path))
        .await?
        .bytes()
        .await?
        .to_vec())
}

/// The body of `GET {endpoint}{path}` (HTTP/1.0, so the answer is neither chunked nor kept open).
fn http_get(endpoint: &str, path: &str) -> String {
    let host = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.contains(" 200 "), "GET {path} failed: {head}");
    body.to_owned()
}

/// Seconds from now until an ISO 8601 UTC time such as `2026-12-04T01:37:24Z` (fractions ignored).
fn seconds_until(time: &str) -> i64 {
    let field = |range: std::ops::Range<usize>| time[range].parse::<i64>().unwrap();
    let (year, month, day) = (field(0..4), field(5..7), field(8..10));
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let at = days * 86_400 + field(11..13) * 3600 + field(14..16) * 60 + field(17..19);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    at - now
}

#[tokio::test]
async fn assumed_role_credentials_are_new_and_put_and_get_objects() {
    let Some(endpoint) = support::moto::moto() else {
        return;
    };
    support::moto::create_bucket(endpoint, "weir-scoped");
    let grant = AccessGrant::new("weir-scoped")
        .read("datasets/source/slice-1.parquet")
        .write_under("datasets/derived/tx-1");
    let sts = StsConfig::new(endpoint, ROLE_ARN).with_credentials(BASE_KEY, BASE_SECRET);

    let credentials = sts.assume_role("tx-1", &grant).await.unwrap();
    assert_ne!(credentials.access_key_id, BASE_KEY);
    assert!(!credentials.access_key_id.is_empty());
    assert!(!credentials.secret_access_key.is_empty());
    assert!(!credentials.session_token.is_empty());
    assert!(!credentials.expiration.is_empty());

    let store = store("weir-scoped", endpoint, &credentials);
    put(
        store.as_ref(),
        "datasets/derived/tx-1/data.parquet",
        b"rows",
    )
    .await
    .unwrap();
    assert_eq!(
        get(store.as_ref(), "datasets/derived/tx-1/data.parquet")
            .await
            .unwrap(),
        b"rows"
    );
}

#[tokio::test]
async fn sts_receives_exactly_the_grants_session_policy_and_duration() {
    let Some(endpoint) = support::moto::moto() else {
        return;
    };
    let grant = AccessGrant::new("weir-scoped")
        .read("datasets/source/slice-2.parquet")
        .read("datasets/derived/checkpoints/1/*")
        .write_under("datasets/derived/tx-2/");
    let sts = StsConfig::new(endpoint, ROLE_ARN)
        .with_credentials(BASE_KEY, BASE_SECRET)
        .with_duration(std::time::Duration::from_secs(1800));
    let credentials = sts.assume_role("tx-2", &grant).await.unwrap();

    // moto's model introspection lists every assumed-role session with the parameters it got.
    let data: serde_json::Value =
        serde_json::from_str(&http_get(endpoint, "/moto-api/data.json")).unwrap();
    let sessions = data["sts"]["AssumedRole"].as_array().unwrap();
    let session = sessions
        .iter()
        .find(|s| s["access_key_id"] == credentials.access_key_id.as_str())
        .unwrap_or_else(|| panic!("no session with our key in {sessions:?}"));
    assert_eq!(session["policy"], grant.session_policy().unwrap().as_str());
    assert_eq!(session["session_name"], "tx-2");
    assert_eq!(session["role_arn"], ROLE_ARN);
    // moto's introspection cannot show the expiration (a datetime); STS's answer has it.
    let lifetime = seconds_until(&credentials.expiration);
    assert!(
        (1740..=1800).contains(&lifetime),
        "{} is {lifetime} s away, not 1800",
        credentials.expiration
    );
}

#[tokio::test]
async fn unreachable_sts_is_an_assume_role_error_naming_the_endpoint() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let sts = StsConfig::new(&endpoint, ROLE_ARN).with_credentials(BASE_KEY, BASE_SECRET);
    let error = sts
        .assume_role("tx-3", &AccessGrant::new("b").read("k"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::AssumeRole { endpoint: e, role_arn, .. } if *e == endpoint && role_arn == ROLE_ARN),
        "{error:?}"
    );
    assert!(error.to_string().contains("did not answer"), "{error}");
}

/// A moto server with IAM authentication on: a user allowed to assume any role, the role
/// `weir-transaction` (trusting that user, allowed everything in bucket `weir-auth`), the bucket.
struct AuthenticatedMoto {
    endpoint: String,
    access_key_id: String,
    secret_access_key: String,
    _child: Child,
}

const BUCKET: &str = "weir-auth";

/// Starts the server, creates the user, role and bucket while moto still takes unsigned calls,
/// then turns authentication on and prints the user's key; stops when its parent is gone.
const AUTHENTICATED_SERVER: &str = r#"
import json, os, sys, time, urllib.request
import boto3
from moto.server import ThreadedMotoServer
port = int(sys.argv[1])
endpoint = f"http://127.0.0.1:{port}"
server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
server.start()
setup = dict(endpoint_url=endpoint, region_name="us-east-1",
             aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **setup)
user = iam.create_user(UserName="weir-coordinator")["User"]
key = iam.create_access_key(UserName="weir-coordinator")["AccessKey"]
iam.put_user_policy(UserName="weir-coordinator", PolicyName="assume-roles",
    PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}))
iam.create_role(RoleName="weir-transaction",
    AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": user["Arn"]}, "Action": "sts:AssumeRole"}]}))
iam.put_role_policy(RoleName="weir-transaction", PolicyName="bucket",
    PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:*", "Resource": ["arn:aws:s3:::weir-auth", "arn:aws:s3:::weir-auth/*"]}]}))
boto3.client("s3", **setup).create_bucket(Bucket="weir-auth")
urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0",
    method="POST", headers={"Content-Type": "text/plain"})).read()
print(json.dumps({"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}), flush=True)
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.2)
server.stop()
"#;

/// The authenticated server, or `None` when moto is unavailable (see `support::moto::moto`).
fn authenticated_moto() -> Option<&'static AuthenticatedMoto> {
    support::moto::moto()?;
    static MOTO: OnceLock<AuthenticatedMoto> = OnceLock::new();
    Some(MOTO.get_or_init(|| {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("python3")
            .args(["-c", AUTHENTICATED_SERVER, &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let key: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the authenticated moto did not start ({e}): {line:?}"));
        AuthenticatedMoto {
            endpoint: format!("http://127.0.0.1:{port}"),
            access_key_id: key["access_key_id"].as_str().unwrap().to_owned(),
            secret_access_key: key["secret_access_key"].as_str().unwrap().to_owned(),
            _child: child,
        }
    }))
}

#[tokio::test]
async fn authenticating_sts_accepts_the_signature_and_s3_the_session_token() {
    let Some(moto) = authenticated_moto() else {
        return;
    };
    let grant = AccessGrant::new(BUCKET).write_under("out/tx-4");
    let sts = StsConfig::new(&moto.endpoint, ROLE_ARN)
        .with_credentials(&moto.access_key_id, &moto.secret_access_key);
    let credentials = sts.assume_role("tx-4", &grant).await.unwrap();
    assert_ne!(credentials.access_key_id, moto.access_key_id);

    // moto checks the signature made with the session's secret and that the token is the session's.
    let scoped = store(BUCKET, &moto.endpoint, &credentials);
    put(scoped.as_ref(), "out/tx-4/data.parquet", b"rows")
        .await
        .unwrap();
    assert_eq!(
        get(scoped.as_ref(), "out/tx-4/data.parquet").await.unwrap(),
        b"rows"
    );

    // Without the token the session's key is unknown.
    let tokenless = S3Config::new(BUCKET, &moto.endpoint)
        .with_credentials(&credentials.access_key_id, &credentials.secret_access_key)
        .build()
        .unwrap();
    let error = put(tokenless.as_ref(), "out/tx-4/other.parquet", b"rows")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("InvalidAccessKeyId"), "{error}");
}

#[tokio::test]
async fn wrong_base_secret_is_rejected_with_signature_does_not_match() {
    let Some(moto) = authenticated_moto() else {
        return;
    };
    let sts = StsConfig::new(&moto.endpoint, ROLE_ARN)
        .with_credentials(&moto.access_key_id, "not-the-secret");
    let error = sts
        .assume_role("tx-5", &AccessGrant::new(BUCKET).read("in/*"))
        .await
        .unwrap_err();
    match &error {
        RuntimeError::AssumeRoleRejected {
            status,
            code,
            role_arn,
            message,
            ..
        } => {
            assert_eq!(*status, 403);
            assert_eq!(code, "SignatureDoesNotMatch");
            assert_eq!(role_arn, ROLE_ARN);
            assert!(message.contains("signature"), "{message}");
        }
        other => panic!("expected AssumeRoleRejected, got {other:?}"),
    }
    assert!(
        error.to_string().contains("SignatureDoesNotMatch"),
        "{error}"
    );
}

#[tokio::test]
async fn unknown_base_key_is_rejected_with_invalid_client_token_id() {
    let Some(moto) = authenticated_moto() else {
        return;
    };
    let sts = StsConfig::new(&moto.endpoint, ROLE_ARN)
        .with_credentials("AKIANOSUCHKEY0000000", &moto.secret_access_key);
    let error = sts
        .assume_role("tx-6", &AccessGrant::new(BUCKET).read("in/*"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RuntimeError::AssumeRoleRejected { status: 403, code, .. } if code == "InvalidClientTokenId"),
        "{error:?}"
    );
}

/// Pins what this suite cannot prove: moto authorises an assumed role by the role's policies
/// only, so a write outside the grant succeeds here (AWS would answer AccessDenied). If moto starts
/// applying session policies this test fails, and denial tests can replace it.
#[tokio::test]
async fn moto_does_not_apply_the_session_policy() {
    let Some(moto) = authenticated_moto() else {
        return;
    };
    let grant = AccessGrant::new(BUCKET).write_under("out/tx-7");
    let sts = StsConfig::new(&moto.endpoint, ROLE_ARN)
        .with_credentials(&moto.access_key_id, &moto.secret_access_key);
    let credentials = sts.assume_role("tx-7", &grant).await.unwrap();
    let scoped = store(BUCKET, &moto.endpoint, &credentials);
    put(scoped.as_ref(), "outside/the/grant.parquet", b"rows")
        .await
        .unwrap();
}
