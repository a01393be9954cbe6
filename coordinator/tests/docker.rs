//! The reference engine as a Docker image (`weir/reference-engine:dev`, built once per test binary by
//! `cargo xtask image --engine reference`) serving the coordinator through `--engine docker`: pull,
//! tail, log, verify, engine deprecate and the conformance kit, with no container left behind.
//!
//! Without a Docker daemon the container tests print SKIPPED and pass, unless `WEIR_REQUIRE_DOCKER=1`
//! (CI), which makes them fail.
use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::*;
use serde_json::Value;
use weir_engine_runtime::{DaemonSocket, DockerDaemon};

/// The tag `cargo xtask image --engine reference` builds.
const IMAGE_TAG: &str = "weir/reference-engine:dev";
/// The derivatives of the example workspace (every transform step runs in the engine).
const DERIVATIVES: [&str; 3] = ["readings.clean", "readings.daily", "readings.hot-days"];

fn docker_required() -> bool {
    std::env::var("WEIR_REQUIRE_DOCKER").is_ok_and(|v| v == "1")
}

/// Whether a container daemon answers; prints why the test is skipped when none does (and fails
/// instead with `WEIR_REQUIRE_DOCKER=1`).
fn daemon_answers() -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match rt.block_on(DockerDaemon::connect(&DaemonSocket::Auto)) {
        Ok(_) => true,
        Err(error) if docker_required() => {
            panic!("WEIR_REQUIRE_DOCKER=1 but no container daemon answers: {error}")
        }
        Err(error) => {
            eprintln!(
                "SKIPPED: container test needs a Docker daemon ({error}); set WEIR_REQUIRE_DOCKER=1 to fail instead"
            );
            false
        }
    }
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Builds `weir/reference-engine:dev` the way `cargo xtask image --engine reference` does, once per
/// test binary, and returns its image id (`sha256:...`) as `docker image inspect` reports it.
fn image_id() -> &'static str {
    static BUILT: OnceLock<Result<String, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args(["xtask", "image", "--engine", "reference"])
            .output()
            .map_err(|e| format!("cannot run cargo xtask: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "`cargo xtask image --engine reference` failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let id = docker(&["image", "inspect", "--format", "{{.Id}}", IMAGE_TAG]);
        if id.starts_with("sha256:") && id.len() == 7 + 64 {
            Ok(id)
        } else {
            Err(format!(
                "`docker image inspect {IMAGE_TAG}` gave the id {id:?}"
            ))
        }
    });
    match built {
        Ok(id) => id,
        Err(why) => panic!("{why}"),
    }
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

/// The engine containers of the image, running or not (the runtime labels every container it
/// creates `io.weir.managed=true`).
fn engine_containers(image_id: &str) -> Vec<String> {
    docker(&[
        "ps",
        "--all",
        "--filter",
        "label=io.weir.managed=true",
        "--filter",
        &format!("ancestor={image_id}"),
        "--format",
        "{{.Names}}",
    ])
    .lines()
    .map(str::to_owned)
    .collect()
}

/// What a container test gets: the image, and the daemon to itself as far as this binary goes.
struct Image {
    /// `sha256:<hex>`: the image id.
    id: &'static str,
    /// `weir/reference-engine@sha256:<hex>`: the image pinned by its id, as weir.yaml names it.
    pinned: String,
    /// Container tests run one at a time, so that "no container left" sees only its own.
    _serial: MutexGuard<'static, ()>,
}

impl Drop for Image {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let left = engine_containers(self.id);
            assert!(left.is_empty(), "engine containers left behind: {left:?}");
        }
    }
}

/// The freshly built image, or `None` (skip, see [`daemon_answers`]).
fn image() -> Option<Image> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !daemon_answers() {
        return None;
    }
    let id = image_id();
    let left = engine_containers(id);
    assert!(
        left.is_empty(),
        "engine containers before the test: {left:?}"
    );
    Some(Image {
        id,
        pinned: format!("weir/reference-engine@{id}"),
        _serial: serial,
    })
}

/// Sets `weir.yaml` of `ws` to serve the engine name `datafusion` with `image`.
fn use_image(ws: &Path, image: &str) {
    std::fs::write(
        ws.join("weir.yaml"),
        format!("storage: .weir\nengines:\n  datafusion:\n    image: {image}\n"),
    )
    .unwrap();
}

/// Every record of `dataset`, comparable across pulls ([`common::comparable_records`]).
fn records(ws: &Path, dataset: &str) -> Vec<Value> {
    common::comparable_records(
        &ok(ws, &["--format", "json", "tail", dataset, "-n", "100000"]),
        dataset,
    )
}

/// The engines recorded by the ExecuteTransform blocks of `dataset` (`weir log --format json`).
fn recorded_engines(ws: &Path, dataset: &str) -> Vec<Value> {
    let log: Value = serde_json::from_str(&ok(ws, &["--format", "json", "log", dataset])).unwrap();
    log["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["block"]["event"]["kind"] == "ExecuteTransform")
        // The engine recorded by the SetTransform in force (its `version`), as `weir log` reads it.
        .map(|b| b["engine"].clone())
        .collect()
}

/// Runs weir expecting failure; returns the exit code and stderr.
fn fails(ws: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = weir(ws).args(args).output().unwrap();
    assert!(!out.status.success(), "weir {args:?} succeeded");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pulling_through_docker_gives_the_records_of_the_embedded_engine_and_records_the_image_id() {
    let Some(image) = image() else { return };
    let in_docker = workspace();
    use_image(in_docker.path(), &image.pinned);
    let embedded = workspace();

    let out = ok(
        in_docker.path(),
        &["pull", "--all", "--quiet", "--engine", "docker"],
    );
    assert!(out.contains("readings.hot-days: up to date"), "{out}");
    ok(embedded.path(), &["pull", "--all", "--quiet"]);

    // Same records as the in-process engine, for the preprocessed root (a raw query in the
    // container) and every derivative, including the windowed one whose state lives in checkpoints.
    for dataset in ["stations"].into_iter().chain(DERIVATIVES) {
        let docker_records = records(in_docker.path(), dataset);
        assert!(!docker_records.is_empty(), "{dataset} has no records");
        assert_eq!(
            docker_records,
            records(embedded.path(), dataset),
            "{dataset}: the container and the embedded engine disagree"
        );
    }
    // And the same table printed by `weir tail` (its system_time column aside).
    let table = |ws: &Path| -> Vec<Vec<String>> {
        let text = ok(ws, &["tail", "readings.daily", "-n", "100"]);
        let cells =
            |line: &str| -> Vec<String> { line.split('|').map(|c| c.trim().to_owned()).collect() };
        let header = text
            .lines()
            .map(cells)
            .find(|c| c.contains(&"system_time".to_owned()))
            .expect("a header");
        let column = header.iter().position(|c| c == "system_time").unwrap();
        text.lines()
            .map(cells)
            .filter(|c| c.len() == header.len())
            .map(|mut c| {
                c.remove(column);
                c
            })
            .collect()
    };
    let docker_table = table(in_docker.path());
    assert!(docker_table.len() > 12, "{docker_table:?}");
    assert_eq!(docker_table, table(embedded.path()));

    // Every ExecuteTransform step records the image it ran from (in the SetTransform in force), pinned
    // by the id the daemon reports, and the runtime.
    for dataset in DERIVATIVES {
        let engines = recorded_engines(in_docker.path(), dataset);
        assert!(
            !engines.is_empty(),
            "{dataset} has no ExecuteTransform block"
        );
        for engine in engines {
            assert_eq!(engine["name"], "datafusion", "{dataset}: {engine}");
            assert_eq!(engine["runtime"], "docker", "{dataset}: {engine}");
            assert_eq!(
                engine["reference"],
                image.pinned.as_str(),
                "{dataset}: {engine}"
            );
            assert!(
                engine["reference"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("@{}", image.id))
            );
        }
    }
    let log: Value = serde_json::from_str(&ok(
        in_docker.path(),
        &["--format", "json", "log", "readings.daily"],
    ))
    .unwrap();
    let versions: Vec<_> = log["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["block"]["event"])
        .filter(|e| e["kind"] == "SetTransform")
        .map(|e| e["transform"]["version"].clone())
        .collect();
    assert_eq!(versions, [Value::from(format!("docker:{}", image.pinned))]);
    let log = ok(in_docker.path(), &["log", "readings.daily"]);
    assert!(
        log.contains(&format!("engine=datafusion (docker {})", image.pinned)),
        "{log}"
    );
    // The chains the container's outputs went into are valid, every file readable and as hashed.
    ok(in_docker.path(), &["validate"]);
}

#[test]
fn verify_through_docker_replays_every_step_in_containers_identically() {
    let Some(image) = image() else { return };
    let ws = workspace();
    use_image(ws.path(), &image.pinned);
    ok(
        ws.path(),
        &["pull", "--all", "--quiet", "--engine", "docker"],
    );

    for dataset in DERIVATIVES {
        let json: Value = serde_json::from_str(&ok(
            ws.path(),
            &["--format", "json", "verify", dataset, "--engine", "docker"],
        ))
        .unwrap();
        assert_eq!(json["verified"], true, "{dataset}: {json}");
        let steps = json["steps"].as_array().unwrap();
        assert!(!steps.is_empty(), "{dataset}: {json}");
        for step in steps {
            assert_eq!(step["replayEngine"]["runtime"], "docker", "{step}");
            assert_eq!(step["replayEngine"]["reference"], image.pinned.as_str());
            assert_eq!(step["recorded"], step["replayed"], "{step}");
        }
    }
    let out = ok(
        ws.path(),
        &["verify", "readings.daily", "--engine", "docker"],
    );
    assert!(out.contains("all outputs identical"), "{out}");
}

#[test]
fn deprecating_the_embedded_engine_for_the_image_replays_history_in_containers_and_records_it() {
    let Some(image) = image() else { return };
    let ws = workspace();
    use_image(ws.path(), &image.pinned);
    ok(ws.path(), &["pull", "--all", "--quiet"]);

    // Recorded with the embedded engine: the image may not stand in for it yet.
    let (code, err) = fails(
        ws.path(),
        &["verify", "readings.hot-days", "--engine", "docker"],
    );
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("engine deprecate"), "{err}");

    let json: Value = serde_json::from_str(&ok(
        ws.path(),
        &[
            "--format",
            "json",
            "engine",
            "deprecate",
            "datafusion",
            "--to",
            &image.pinned,
        ],
    ))
    .unwrap();
    assert_eq!(json["replacement"]["runtime"], "docker", "{json}");
    assert_eq!(json["replacement"]["reference"], image.pinned.as_str());
    let steps = json["steps"].as_array().unwrap();
    let replayed: std::collections::BTreeSet<&str> = steps
        .iter()
        .map(|s| s["dataset"].as_str().unwrap())
        .collect();
    assert_eq!(replayed, DERIVATIVES.into_iter().collect());
    for step in steps {
        assert_eq!(step["recordedEngine"]["runtime"], "embedded", "{step}");
        assert_eq!(step["replayEngine"]["reference"], image.pinned.as_str());
        assert_eq!(step["recorded"], step["replayed"], "{step}");
    }
    let recorded = json["recorded"].as_array().unwrap();
    assert_eq!(recorded.len(), 1, "{json}");
    assert_eq!(recorded[0]["deprecated"]["runtime"], "embedded");
    assert_eq!(
        recorded[0]["replacement"]["reference"],
        image.pinned.as_str()
    );
    assert_eq!(recorded[0]["stepsVerified"], steps.len());

    // The record is kept in the workspace storage and listed...
    let list = ok(ws.path(), &["engine", "list"]);
    assert!(list.contains(&format!("docker {}", image.pinned)), "{list}");
    let stored: Value = serde_json::from_slice(
        &std::fs::read(ws.path().join(".weir/engines/compatibility.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stored[0]["replacement"]["reference"], image.pinned.as_str());

    // ... and lets the image replay what the embedded engine recorded.
    for dataset in DERIVATIVES {
        let out = ok(ws.path(), &["verify", dataset, "--engine", "docker"]);
        assert!(out.contains("all outputs identical"), "{out}");
    }
}

#[test]
fn the_conformance_kit_passes_against_the_image_as_against_the_embedded_engine() {
    let Some(image) = image() else { return };
    let ws = workspace();
    use_image(ws.path(), &image.pinned);

    let report = |args: &[&str]| -> Value {
        let mut all = vec!["--format", "json", "conformance", "datafusion"];
        all.extend_from_slice(args);
        let json: Value = serde_json::from_str(&ok(ws.path(), &all)).unwrap();
        json
    };
    let in_docker = report(&["--engine", "docker"]);
    assert_eq!(in_docker["engine"]["runtime"], "docker", "{in_docker}");
    assert_eq!(in_docker["engine"]["reference"], image.pinned.as_str());
    let statuses = |json: &Value| -> Vec<(String, String)> {
        json["report"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["check"].to_string(), c["status"].to_string()))
            .collect()
    };
    let checks = statuses(&in_docker);
    assert!(checks.len() > 10, "{in_docker}");
    assert!(
        checks.iter().all(|(_, status)| !status.contains("Failed")),
        "{in_docker}"
    );
    // The same checks pass (and the same are skipped) as in process.
    assert_eq!(checks, statuses(&report(&[])));

    let text = ok(
        ws.path(),
        &["conformance", "datafusion", "--engine", "docker"],
    );
    assert!(text.contains(" 0 failed"), "{text}");
}

/// No daemon needed: a tag is refused before any container is started.
#[test]
fn an_image_named_by_tag_is_refused_with_how_to_pin_it() {
    let ws = workspace();
    use_image(ws.path(), IMAGE_TAG);
    let (code, err) = fails(
        ws.path(),
        &["conformance", "datafusion", "--engine", "docker"],
    );
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("must be pinned by digest"), "{err}");
    assert!(
        err.contains(&format!(
            "docker image inspect --format '{{{{.Id}}}}' {IMAGE_TAG}"
        )),
        "{err}"
    );

    let (code, err) = fails(
        ws.path(),
        &[
            "engine",
            "deprecate",
            "datafusion",
            "--to",
            &format!("docker:{IMAGE_TAG}"),
        ],
    );
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("must be pinned by digest"), "{err}");
}

#[test]
fn a_changed_query_is_validated_and_migrated_in_containers_as_on_the_embedded_engine() {
    let Some(image) = image() else { return };
    let edit = |ws: &Path, from: &str, to: &str| {
        let file = ws.join("datasets/readings.daily.yaml");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(from));
        std::fs::write(&file, text.replace(from, to)).unwrap();
    };
    let (docker_ws, embedded_ws) = (workspace(), workspace());
    use_image(docker_ws.path(), &image.pinned);
    ok(
        docker_ws.path(),
        &["--engine", "docker", "pull", "--all", "--quiet"],
    );
    ok(embedded_ws.path(), &["pull", "--all", "--quiet"]);

    // An invalid query: ValidateQuery in a container refuses it, nothing is recorded.
    let before = list(docker_ws.path());
    edit(docker_ws.path(), "FROM clean", "FROM clean_typo");
    let (code, stderr) = fails(
        docker_ws.path(),
        &["--engine", "docker", "pull", "--all", "--quiet"],
    );
    assert_eq!(code, Some(5), "{stderr}");
    assert!(stderr.contains("readings.daily.yaml:"), "{stderr}");
    assert_eq!(list(docker_ws.path()), before);
    edit(docker_ws.path(), "FROM clean_typo", "FROM clean");

    // A windowed query changed: MigrateQuery in a container, the same records as the embedded engine.
    for ws in [docker_ws.path(), embedded_ws.path()] {
        edit(
            ws,
            "max(temperature_c) AS max_temperature_c",
            "max(temperature_c + 100.0) AS max_temperature_c",
        );
    }
    ok(
        docker_ws.path(),
        &["--engine", "docker", "pull", "--all", "--quiet"],
    );
    ok(embedded_ws.path(), &["pull", "--all", "--quiet"]);
    let daily = records(docker_ws.path(), "readings.daily");
    assert_eq!(daily.len(), 18, "the open day finalised");
    assert_eq!(daily, records(embedded_ws.path(), "readings.daily"));
    ok(docker_ws.path(), &["--engine", "docker", "validate"]);
}
