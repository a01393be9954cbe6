//! The distributed engine (`distributed-engine`, binary `weir-ballista`) serving the coordinator
//! through `--engine process`, its jobs run by a real Ballista cluster in Docker: a scheduler and two
//! executors from the `FROM scratch` image `cargo xtask image --engine ballista` builds (nothing is
//! pulled), on a private internal Docker network. Only the scheduler's port is published, on
//! 127.0.0.1; the data is on a shared volume (a host folder every container mounts read-only at the
//! path the coordinator names). Every container runs as the test's user, with a read-only root, no
//! capabilities and memory and process limits.
//!
//! Without a Docker daemon the tests print SKIPPED and pass, unless `WEIR_REQUIRE_DOCKER=1` (CI).
use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The tag the tests build the image under (so that other builds cannot swap it).
const IMAGE_TAG: &str = "weir/ballista:test";
/// The example workspace's derivatives.
const DERIVATIVES: [&str; 3] = ["readings.clean", "readings.daily", "readings.hot-days"];

fn docker_required() -> bool {
    std::env::var("WEIR_REQUIRE_DOCKER").is_ok_and(|v| v == "1")
}

/// Whether `docker` answers; prints why the test is skipped when not (fails with
/// `WEIR_REQUIRE_DOCKER=1`).
fn daemon_answers() -> bool {
    let answers = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !answers {
        assert!(
            !docker_required(),
            "WEIR_REQUIRE_DOCKER=1 but no Docker daemon answers"
        );
        eprintln!(
            "SKIPPED: the Ballista cluster test needs a Docker daemon; set WEIR_REQUIRE_DOCKER=1 to fail instead"
        );
    }
    answers
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

/// Runs the docker CLI, expecting success; returns its trimmed stdout.
fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("run docker");
    assert!(
        out.status.success(),
        "docker {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Builds the image once per test binary (`cargo xtask image --engine ballista --tag ...`) and
/// returns the `weir-ballista` binary it holds (the workspace build's own), which the coordinator also
/// runs as its process engine.
fn built() -> &'static PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = cargo()
            .args(["xtask", "image", "--engine", "ballista", "--tag", IMAGE_TAG])
            .output()
            .map_err(|e| format!("cannot run cargo xtask: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "`cargo xtask image --engine ballista` failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"));
        let binary = target.join("debug/weir-ballista");
        if binary.is_file() {
            Ok(binary)
        } else {
            Err(format!("{} was not built", binary.display()))
        }
    });
    match built {
        Ok(binary) => binary,
        Err(why) => panic!("{why}"),
    }
}

/// `GET path` on `address`, the status code.
fn http_status(address: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

/// A scheduler and two executors in Docker, removed on drop.
struct Cluster {
    /// Holds everything the containers see: the workspace, the coordinator's scratch, the
    /// executors' work folders.
    share: tempfile::TempDir,
    /// The scheduler, as the engine reaches it (127.0.0.1 and the published port).
    scheduler: SocketAddr,
    containers: Vec<String>,
    networks: Vec<String>,
    _serial: MutexGuard<'static, ()>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for container in &self.containers {
            let _ = Command::new("docker")
                .args(["rm", "--force", "--volumes", container])
                .output();
        }
        for network in &self.networks {
            let _ = Command::new("docker")
                .args(["network", "rm", network])
                .output();
        }
    }
}

impl Cluster {
    fn executor_work_dir(&self, n: usize) -> PathBuf {
        self.share.path().join(format!("executor-{n}"))
    }

    fn executor_container(&self, n: usize) -> &str {
        &self.containers[n]
    }

    /// The folder `TMPDIR` points at for the coordinator, so that what it stages is on the share.
    fn scratch(&self) -> PathBuf {
        self.share.path().join("tmp")
    }

    /// `weir` in `ws` with the coordinator's scratch on the share.
    fn weir(&self, ws: &Path) -> assert_cmd::Command {
        let mut command = weir(ws);
        command.env("TMPDIR", self.scratch());
        command
    }

    fn ok(&self, ws: &Path, args: &[&str]) -> String {
        let out = self.weir(ws).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "weir {args:?} failed with {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A copy of `from` on the share, whose `weir.yaml` serves the engine name `datafusion` with the
    /// distributed engine.
    fn workspace(&self, name: &str, from: &Path, binary: &Path) -> PathBuf {
        let ws = self.share.path().join(name);
        copy_dir(from, &ws);
        std::fs::write(
            ws.join("weir.yaml"),
            format!(
                "storage: .weir\nengines:\n  datafusion:\n    binary: {}\n    args: [engine, --scheduler, \"{}\", --partitions, \"4\"]\n",
                binary.display(),
                self.scheduler
            ),
        )
        .unwrap();
        ws
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == ".weir" {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The user the containers run as: the test's own, or `nobody` when the test runs as root (never
/// root in a container).
fn container_user() -> (u32, u32) {
    match (unsafe_free_uid(), unsafe_free_gid()) {
        (0, _) => (65534, 65534),
        ids => ids,
    }
}

/// The sandbox of every container: a non-root user, a read-only root, no capabilities, limits.
fn sandbox() -> Vec<String> {
    let (uid, gid) = container_user();
    let user = format!("{uid}:{gid}");
    [
        "--user",
        &user,
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--memory",
        "1g",
        "--pids-limit",
        "512",
        "--label",
        "io.weir.test=ballista",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// This process's user and group ids, from `/proc/self/status` (no libc call).
fn proc_status_id(field: &str) -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|id| id.parse().ok())
        .unwrap()
}

fn unsafe_free_uid() -> u32 {
    proc_status_id("Uid:")
}

fn unsafe_free_gid() -> u32 {
    proc_status_id("Gid:")
}

/// Starts the cluster: both executors registered (the scheduler's `/readyz`).
fn cluster() -> Option<Cluster> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !daemon_answers() {
        return None;
    }
    let binary = built();
    assert!(binary.is_file());
    // The share must be at the same path inside the containers: a folder under /tmp, not one the
    // daemon cannot see.
    let share = tempfile::Builder::new()
        .prefix("weir-ballista-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::create_dir_all(share.path().join("tmp")).unwrap();
    // Readable by the containers' user (tempfile makes it 0700).
    std::fs::set_permissions(
        share.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let id = format!(
        "{}-{}",
        std::process::id(),
        share.path().file_name().unwrap().to_string_lossy()
    );
    let id = id.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "");
    let internal = format!("weir-ballista-int-{id}");
    let edge = format!("weir-ballista-edge-{id}");
    let mut cluster = Cluster {
        share,
        scheduler: "127.0.0.1:1".parse().unwrap(),
        containers: Vec::new(),
        networks: Vec::new(),
        _serial: serial,
    };
    // Executors and the scheduler talk on an internal network: no route out of it. Its subnet is
    // fixed so that the scheduler's address is known before it starts: executors report task status
    // to the address the scheduler advertises, and the image has no resolver for names.
    let octet = 16 + std::process::id() % 200;
    let subnet = format!("10.231.{octet}.0/24");
    let scheduler_ip = format!("10.231.{octet}.2");
    docker(&[
        "network",
        "create",
        "--internal",
        "--subnet",
        &subnet,
        &internal,
    ]);
    cluster.networks.push(internal.clone());
    // The scheduler's published port needs a bridge of its own; nothing else is on it.
    docker(&["network", "create", &edge]);
    cluster.networks.push(edge.clone());
    let share_path = cluster.share.path().display().to_string();
    let share_mount = format!("{share_path}:{share_path}:ro");

    let scheduler = format!("weir-ballista-scheduler-{id}");
    let mut args: Vec<String> = vec!["create".into(), "--name".into(), scheduler.clone()];
    args.extend(sandbox());
    args.extend(
        [
            "--network",
            &edge,
            "--publish",
            "127.0.0.1::50050",
            "--volume",
            &share_mount,
            IMAGE_TAG,
            "scheduler",
            "--bind",
            "0.0.0.0:50050",
            "--external-host",
            &scheduler_ip,
            "--executor-timeout",
            "6",
            "--min-ready-executors",
            "2",
        ]
        .map(str::to_owned),
    );
    docker(&args.iter().map(String::as_str).collect::<Vec<_>>());
    cluster.containers.push(scheduler.clone());
    docker(&[
        "network",
        "connect",
        "--ip",
        &scheduler_ip,
        &internal,
        &scheduler,
    ]);
    docker(&["start", &scheduler]);
    let scheduler_on_internal = format!("{scheduler_ip}:50050");

    let mut executors = Vec::new();
    for n in 1..=2 {
        let work_dir = cluster.executor_work_dir(n);
        std::fs::create_dir_all(&work_dir).unwrap();
        // Writable by the container's user whoever owns the test's files.
        std::fs::set_permissions(
            &work_dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let name = format!("weir-ballista-executor-{n}-{id}");
        let alias = format!("executor-{n}");
        let work_mount = format!("{}:/work", work_dir.display());
        let mut args: Vec<String> = vec![
            "run".into(),
            "--detach".into(),
            "--name".into(),
            name.clone(),
        ];
        args.extend(sandbox());
        args.extend(
            [
                "--network",
                &internal,
                "--volume",
                &share_mount,
                "--volume",
                &work_mount,
                IMAGE_TAG,
                "executor",
                "--scheduler",
                &scheduler_on_internal,
                "--id",
                &alias,
                "--bind-host",
                "0.0.0.0",
                "--work-dir",
                "/work",
                "--heartbeat",
                "1",
            ]
            .map(str::to_owned),
        );
        docker(&args.iter().map(String::as_str).collect::<Vec<_>>());
        executors.push(name);
    }
    // Executors first in the list: `executor_container(0)` and `(1)`.
    let scheduler_container = cluster.containers.remove(0);
    cluster.containers = executors;
    cluster.containers.push(scheduler_container.clone());

    let published = docker(&["port", &scheduler_container, "50050/tcp"]);
    let published = published
        .lines()
        .find(|line| line.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("the scheduler's port is not on 127.0.0.1: {published}"));
    cluster.scheduler = published.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while http_status(cluster.scheduler, "/readyz") != Some(200) {
        if Instant::now() > deadline {
            let logs = docker(&["logs", &scheduler_container]);
            panic!("the scheduler never saw both executors; its logs:\n{logs}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Some(cluster)
}

/// Job folders an executor wrote shuffle files into (`<work dir>/<job id>`).
fn jobs_run(work_dir: &Path) -> usize {
    std::fs::read_dir(work_dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                // DataFusion's spill folders (`datafusion-*`) are not jobs.
                .filter(|e| {
                    e.path().is_dir() && !e.file_name().to_string_lossy().starts_with("datafusion-")
                })
                .count()
        })
        .unwrap_or(0)
}

/// Every record of `dataset`, comparable across pulls ([`common::comparable_records`]).
fn records(cluster: &Cluster, ws: &Path, dataset: &str) -> Vec<Value> {
    common::comparable_records(
        &cluster.ok(ws, &["--format", "json", "tail", dataset, "-n", "1000000"]),
        dataset,
    )
}

/// The records a dataset holds, as `weir list` counts them (0 for a dataset with no data yet).
fn dataset_records(cluster: &Cluster, ws: &Path, dataset: &str) -> u64 {
    let list: Value = serde_json::from_str(&cluster.ok(ws, &["--format", "json", "list"])).unwrap();
    list["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == dataset)
        .and_then(|d| d["records"].as_u64())
        .unwrap_or(0)
}

#[test]
fn pulling_through_the_ballista_cluster_gives_the_embedded_engines_records_with_both_executors_working()
 {
    let Some(cluster) = cluster() else { return };
    let binary = built();
    let distributed = cluster.workspace("distributed", &example(), binary);
    let embedded = cluster.workspace("embedded", &example(), binary);

    cluster.ok(
        &distributed,
        &["pull", "--all", "--quiet", "--engine", "process"],
    );
    cluster.ok(&embedded, &["pull", "--all", "--quiet"]);

    // The raw query preprocessing `stations` and the map/filter steps ran as Ballista jobs, the
    // window aggregation in the engine process: all give the embedded engine's records.
    for dataset in ["stations"].into_iter().chain(DERIVATIVES) {
        let got = records(&cluster, &distributed, dataset);
        assert!(!got.is_empty(), "{dataset} has no records");
        assert_eq!(
            got,
            records(&cluster, &embedded, dataset),
            "{dataset}: the distributed and the embedded engine disagree"
        );
    }
    // Both executors ran tasks: each wrote shuffle files of at least one job.
    for n in 1..=2 {
        assert!(
            jobs_run(&cluster.executor_work_dir(n)) > 0,
            "executor-{n} ran no task"
        );
    }
    // Replaying every step through the cluster gives outputs of the same logical hashes as recorded.
    let json: Value = serde_json::from_str(&cluster.ok(
        &distributed,
        &["--format", "json", "verify", "--all", "--engine", "process"],
    ))
    .unwrap();
    assert_eq!(json["verified"], true, "{json}");
}

/// A root of `rows` readings in one CSV file and a map/filter derivative of it.
fn large_workspace(dir: &Path, rows: usize) {
    std::fs::create_dir_all(dir.join("datasets")).unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let mut csv = String::with_capacity(rows * 40);
    csv.push_str("observed_at,station,value\n");
    for i in 0..rows {
        csv.push_str(&format!(
            "2024-06-01T00:00:{:02}Z,S{},{}\n",
            i % 60,
            i % 97,
            (i * 7919) % 1000
        ));
    }
    std::fs::write(dir.join("data/readings.csv"), csv).unwrap();
    std::fs::write(
        dir.join("datasets/readings.yaml"),
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: readings\n  kind: Root\n  metadata:\n    \
         - kind: SetPollingSource\n      fetch: { kind: FilesGlob, path: data/*.csv }\n      \
         read: { kind: Csv, header: true, schema: [\"observed_at TIMESTAMP\", \"station STRING\", \"value BIGINT\"] }\n      \
         merge: { kind: Append }\n    - kind: SetVocab\n      eventTimeColumn: observed_at\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("datasets/filtered.yaml"),
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: filtered\n  kind: Derivative\n  metadata:\n    \
         - kind: SetTransform\n      inputs:\n        - datasetRef: readings\n      \
         transform:\n        kind: Sql\n        engine: datafusion\n        query: >-\n          \
         SELECT observed_at AS event_time, station, value * 2 AS doubled FROM readings WHERE value % 3 <> 0\n",
    )
    .unwrap();
}

#[test]
fn killing_an_executor_mid_job_ends_in_a_retry_or_a_clear_error_with_nothing_committed() {
    let Some(cluster) = cluster() else { return };
    let binary = built();
    let source = cluster.share.path().join("source");
    large_workspace(&source, 1_500_000);
    let ws = cluster.workspace("killed", &source, binary);
    let reference = cluster.workspace("reference", &source, binary);
    // The root is ingested by the coordinator itself; only the derivative's transform is a job.
    cluster.ok(&ws, &["pull", "readings", "--quiet"]);
    cluster.ok(&reference, &["pull", "--all", "--quiet"]);

    let mut pull = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("--workspace")
        .arg(&ws)
        .env("TMPDIR", cluster.scratch())
        .args(["pull", "filtered", "--quiet", "--engine", "process"])
        .env("WEIR_SETTLE_SECS", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill executor-2 as soon as the job has started on it (its first shuffle files).
    let deadline = Instant::now() + Duration::from_secs(120);
    while jobs_run(&cluster.executor_work_dir(2)) == 0 {
        assert!(
            Instant::now() < deadline,
            "the job never reached executor-2"
        );
        if pull.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed_while_running = pull.try_wait().unwrap().is_none();
    docker(&["kill", cluster.executor_container(1)]);
    let out = pull.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);

    if out.status.success() {
        // Ballista ran the lost tasks again on executor-1: the result is complete (every record
        // the uninterrupted pull gave) and correct (the verify below replays it).
        let count = |ws: &Path| dataset_records(&cluster, ws, "filtered");
        assert_eq!(count(&ws), count(&reference));
        assert!(count(&ws) > 0);
        let json: Value = serde_json::from_str(&cluster.ok(
            &ws,
            &[
                "--format", "json", "verify", "filtered", "--engine", "process",
            ],
        ))
        .unwrap_or(Value::Null);
        // Verification needs the cluster, which now has one executor: it still answers.
        assert_eq!(json["verified"], true, "{json}");
    } else {
        // A clear error naming the engine's failure, and nothing of the step committed.
        assert!(
            stderr.contains("engine") || stderr.contains("executor"),
            "unclear error: {stderr}"
        );
        assert_eq!(
            dataset_records(&cluster, &ws, "filtered"),
            0,
            "a failed step committed records"
        );
        cluster.ok(&ws, &["validate"]);
    }
    eprintln!(
        "killed while running: {killed_while_running}; pull {}",
        if out.status.success() {
            "succeeded (tasks retried)"
        } else {
            "failed with a clear error"
        }
    );
}
