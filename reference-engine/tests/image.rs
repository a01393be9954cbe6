//! The engine image (`weir/reference-engine:dev`, built once per test binary by `cargo xtask image
//! --engine reference`) started exactly as the reference coordinator (kamu) starts engine images:
//! `docker run` with the port 2884 published, bind-mounted host folders, no arguments, no `--user`.
//! It must serve on 2884, pass the conformance kit over TCP, and write into output folders owned
//! by root or by the host user, its files belonging to the folder's owner.
//!
//! Without a Docker daemon each test prints NOT RUN and passes, unless `WEIR_REQUIRE_DOCKER=1` (CI),
//! which makes it fail.
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use weir_engine_contract::conformance::{
    self, CheckStatus, Column, ColumnType, ConformanceOptions, DataFixtures, Table, Value, Verdict,
};
use weir_engine_contract::model::{
    DatasetId, DatasetVocabulary, OffsetInterval, Transform, TransformRequest,
    TransformRequestInput, TransformSql,
};
use weir_engine_contract::{ConnectOptions, EngineAddress, EngineClient, ExecuteTransform};
use weir_reference_engine::ParquetFixtures;

/// A tag of these tests' own, so that other builds of `weir/reference-engine:dev` (other work trees,
/// other test binaries) cannot swap the image under them.
const IMAGE_TAG: &str = "weir/reference-engine:kamu-style-test";
/// The port every ODF coordinator connects to.
const ODF_PORT: u16 = 2884;
/// A host user other than root, as the owner of a coordinator's folders.
const HOST_USER: u32 = 1000;

fn docker_required() -> bool {
    std::env::var("WEIR_REQUIRE_DOCKER").is_ok_and(|v| v == "1")
}

/// Runs the docker CLI; its trimmed stdout, or why it failed.
fn docker(args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run docker: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "docker {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The freshly built image (tests take turns), or `None` with a NOT RUN line when no daemon answers.
fn image(test: &str) -> Option<MutexGuard<'static, ()>> {
    static SERIAL: Mutex<()> = Mutex::new(());
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(error) = docker(&["info", "--format", "{{.ServerVersion}}"]) {
        assert!(
            !docker_required(),
            "WEIR_REQUIRE_DOCKER=1 but no Docker daemon answers: {error}"
        );
        eprintln!(
            "NOT RUN: {test}: needs a Docker daemon ({error}); set WEIR_REQUIRE_DOCKER=1 to fail instead"
        );
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let built = BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(root)
            .args([
                "xtask",
                "image",
                "--engine",
                "reference",
                "--tag",
                IMAGE_TAG,
            ])
            .output()
            .map_err(|e| format!("cannot run cargo xtask: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`cargo xtask image --engine reference` failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    if let Err(why) = built {
        panic!("{why}");
    }
    Some(serial)
}

/// A container started as kamu starts one, removed on drop.
struct KamuStyleContainer {
    id: String,
}

impl KamuStyleContainer {
    /// `docker run -d -p 127.0.0.1::2884 -v <host>:<container>[:ro]... IMAGE`: no arguments, no
    /// `--user` (kamu publishes on every interface; the tests stay on loopback).
    fn start(volumes: &[(&Path, &str, bool)]) -> Self {
        let mut args = vec![
            "run".to_owned(),
            "--detach".to_owned(),
            "--publish".to_owned(),
            format!("127.0.0.1::{ODF_PORT}"),
        ];
        for (host, container, read_only) in volumes {
            args.push("--volume".to_owned());
            let mode = if *read_only { ":ro" } else { "" };
            args.push(format!("{}:{container}{mode}", host.display()));
        }
        args.push(IMAGE_TAG.to_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let id = docker(&args).unwrap();
        let container = Self { id };
        container.wait_until_listening();
        container
    }

    /// Waits (up to the reference coordinator's 30 s) for the engine's "listening" log line: through
    /// Docker's port proxy a TCP connect succeeds before the engine listens, so a connect alone
    /// proves nothing.
    fn wait_until_listening(&self) {
        for _ in 0..300 {
            let logs = self.logs();
            if logs.contains("engine server listening") {
                return;
            }
            if docker(&["inspect", "--format", "{{.State.Running}}", &self.id]).as_deref()
                == Ok("false")
            {
                panic!("the engine container stopped:\n{logs}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the engine did not listen within 30 s:\n{}", self.logs());
    }

    /// The host address of the container's port 2884 (fails if the image does not expose it).
    fn address(&self) -> EngineAddress {
        let port = docker(&["port", &self.id, &format!("{ODF_PORT}/tcp")]).unwrap();
        let first = port.lines().next().unwrap_or_default();
        first
            .parse()
            .unwrap_or_else(|e| panic!("`docker port` gave {port:?}: {e}"))
    }

    /// stdout and stderr (the engine logs JSON lines on stderr).
    fn logs(&self) -> String {
        match Command::new("docker").args(["logs", &self.id]).output() {
            Ok(out) => format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(error) => format!("cannot run docker logs: {error}"),
        }
    }
}

impl Drop for KamuStyleContainer {
    fn drop(&mut self) {
        let _ = docker(&["rm", "--force", &self.id]);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A folder as a coordinator creates one: mode 0755, owned by `uid` when the tests run as root
/// (otherwise by the test's own user, whatever `uid` says).
fn coordinator_folder(path: &Path, uid: u32) -> u32 {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    }
    std::fs::metadata(path).unwrap().uid()
}

/// What the reference coordinator's 30 s readiness wait allows.
fn kamu_connect_options() -> ConnectOptions {
    ConnectOptions {
        ready_timeout: Duration::from_secs(30),
        call_deadline: Some(Duration::from_secs(120)),
        ..ConnectOptions::default()
    }
}

fn conformance_through_the_image(owner: u32) {
    let dir = tempfile::tempdir().unwrap();
    let host_dir = dir.path().join("kit");
    coordinator_folder(&host_dir, owner);
    let container = KamuStyleContainer::start(&[(&host_dir, "/opt/engine/out", false)]);
    let address = container.address();
    let options = ConformanceOptions::new("datafusion").with_data(conformance::DataSetup {
        fixtures: std::sync::Arc::new(ParquetFixtures),
        host_dir: host_dir.clone(),
        engine_dir: "/opt/engine/out".into(),
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let report = runtime
        .block_on(conformance::run(&address, &options))
        .unwrap_or_else(|e| panic!("{e}\n{}", container.logs()));
    let not_passed: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status != CheckStatus::Passed)
        .map(|c| format!("{}: {:?} {}", c.check, c.status, c.reason))
        .collect();
    assert_eq!(
        report.verdict(),
        Verdict::Passed,
        "{report}\n{not_passed:#?}\n{}",
        container.logs()
    );
}

#[test]
fn the_image_run_as_kamu_runs_engines_passes_the_conformance_kit_over_tcp_on_2884() {
    let Some(_image) =
        image("the_image_run_as_kamu_runs_engines_passes_the_conformance_kit_over_tcp_on_2884")
    else {
        return;
    };
    conformance_through_the_image(HOST_USER);
}

#[test]
fn the_image_run_as_kamu_runs_engines_passes_the_conformance_kit_in_a_root_folder() {
    let Some(_image) =
        image("the_image_run_as_kamu_runs_engines_passes_the_conformance_kit_in_a_root_folder")
    else {
        return;
    };
    conformance_through_the_image(0);
}

/// kamu's transform layout: the input slice and schema file read-only under /opt/engine/in, the
/// output folder (mode 0755, the coordinator's) at /opt/engine/out.
fn kamu_transform(out_owner: u32) {
    let dir = tempfile::tempdir().unwrap();
    let operation = dir.path().join("transform-1");
    let (host_in, host_out) = (operation.join("in"), operation.join("out"));
    coordinator_folder(&operation, out_owner);
    coordinator_folder(&host_in, out_owner);
    let owner = coordinator_folder(&host_out, out_owner);

    let millis = |day: i64| Value::TimestampMillis(1_672_531_200_000 + day * 86_400_000);
    let column = |name: &str, data_type| Column {
        name: name.into(),
        data_type,
        nullable: false,
    };
    let table = Table {
        columns: vec![
            column("offset", ColumnType::Int64),
            column("op", ColumnType::Int32),
            column("system_time", ColumnType::TimestampMillisUtc),
            column("event_time", ColumnType::TimestampMillisUtc),
            column("city", ColumnType::Utf8),
            column("population", ColumnType::Int64),
        ],
        rows: (0..3)
            .map(|i| {
                vec![
                    Value::Int(i),
                    Value::Int(0),
                    millis(30),
                    millis(i),
                    Value::Utf8(format!("city {i}")),
                    Value::Int(1000 * i),
                ]
            })
            .collect(),
    };
    let slice = "f1620aaaa";
    let schema = "schema-fed01aa.parquet";
    ParquetFixtures
        .write_parquet(&host_in.join(slice), &table)
        .unwrap();
    ParquetFixtures
        .write_parquet(&host_in.join(schema), &table.schema_only())
        .unwrap();

    let container = KamuStyleContainer::start(&[
        (
            &host_in.join(slice),
            &format!("/opt/engine/in/{slice}"),
            true,
        ),
        (
            &host_in.join(schema),
            &format!("/opt/engine/in/{schema}"),
            true,
        ),
        (&host_out, "/opt/engine/out", false),
    ]);
    let address = container.address();
    let request = TransformRequest {
        dataset_id: DatasetId::from_key([7; 32]),
        dataset_alias: "cities.big".into(),
        system_time: chrono::DateTime::UNIX_EPOCH + chrono::TimeDelta::days(19_400),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new(
            "datafusion",
            "SELECT event_time, city, population FROM cities WHERE population >= 1000",
        )),
        query_inputs: vec![TransformRequestInput {
            dataset_id: DatasetId::from_key([8; 32]),
            dataset_alias: "cities".into(),
            query_alias: "cities".into(),
            vocab: DatasetVocabulary::default(),
            offset_interval: OffsetInterval::new(0, 2),
            data_paths: vec![format!("/opt/engine/in/{slice}")],
            schema_file: format!("/opt/engine/in/{schema}"),
            explicit_watermarks: Vec::new(),
        }],
        next_offset: 0,
        prev_checkpoint_path: None,
        new_checkpoint_path: "/opt/engine/out/checkpoint".into(),
        new_data_path: "/opt/engine/out/data".into(),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let success = runtime
        .block_on(async {
            let client = EngineClient::connect_with(address, kamu_connect_options()).await?;
            client
                .call::<ExecuteTransform>(&request)
                .await?
                .finish()
                .await
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", container.logs()));
    assert_eq!(success.new_offset_interval, OffsetInterval::new(0, 1));
    let data = host_out.join("data");
    let output = ParquetFixtures.read_parquet(&data).unwrap();
    assert_eq!(output.rows.len(), 2);
    let metadata = std::fs::metadata(&data).unwrap();
    assert_eq!(
        (metadata.uid(), metadata.gid()),
        (owner, std::fs::metadata(&host_out).unwrap().gid()),
        "the data file belongs to the output folder's owner\n{}",
        container.logs()
    );
}

#[test]
fn the_image_run_as_kamu_runs_engines_writes_into_a_host_users_folder_as_that_user() {
    let Some(_image) =
        image("the_image_run_as_kamu_runs_engines_writes_into_a_host_users_folder_as_that_user")
    else {
        return;
    };
    kamu_transform(HOST_USER);
}

#[test]
fn the_image_run_as_kamu_runs_engines_writes_into_a_root_folder() {
    let Some(_image) = image("the_image_run_as_kamu_runs_engines_writes_into_a_root_folder") else {
        return;
    };
    kamu_transform(0);
}
