//! A workspace: a folder with an optional `weir.yaml` and dataset manifests under `datasets/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::snapshot::{DatasetManifest, ManifestError};
use super::yaml::Located;

/// Which engine serves an engine name, per runtime (`weir.yaml` → `engines.<name>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// Serve this engine name with another engine: `engines: {flink: {use: datafusion}}` runs transforms
    /// that ask for `flink` on the engine configured for (or embedded as) `datafusion`, so a kamu manifest
    /// need not be edited. Its SQL must then be that engine's dialect. The chain keeps the name the
    /// manifest gives; the engine that ran is recorded as for any other step.
    #[serde(default, rename = "use")]
    pub use_engine: Option<String>,
    /// OCI image pinned by digest, for `--engine docker|podman` (e.g. an ODF engine image).
    #[serde(default)]
    pub image: Option<String>,
    /// The TCP port the engine listens on. For an image: 2884 for ODF engine images, Weir's included (run
    /// with their own command; without `port:`, Weir's image is served on a Unix socket with no network).
    /// For a binary (`--engine process`): the engine is started with only `args` and reached on
    /// 127.0.0.1:`port` (a foreign ODF engine binary); without `port:`, Weir passes `--unix-socket PATH`.
    #[serde(default)]
    pub port: Option<u16>,
    /// A local engine binary, for `--engine process` (relative to the workspace).
    #[serde(default)]
    pub binary: Option<String>,
    /// Arguments of the engine binary (`--engine process`), before any Weir adds.
    #[serde(default)]
    pub args: Vec<String>,
    /// How the engine gets its data: `local` (the default: inputs staged as local files, mounted into a
    /// container) or `object-store`: the engine is given `s3://` URLs of the inputs and checkpoint where
    /// the storage keeps them and of where to write its output and new checkpoint, and reads and writes
    /// them itself (needs `storage: s3://...`).
    #[serde(default)]
    pub exchange: DataExchange,
    /// With `exchange: object-store`: the IAM role the coordinator assumes for each transaction (STS
    /// AssumeRole), with a session policy granting that transaction's objects only; the engine is given
    /// those temporary credentials instead of the coordinator's.
    #[serde(default)]
    pub assume_role: Option<String>,
}

/// `weir.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Where the chains and data live: a directory relative to the workspace (default `.weir`), or an
    /// object-store URL such as `s3://bucket/prefix`.
    #[serde(default)]
    pub storage: Option<String>,
    /// Engine name → how to run it.
    #[serde(default)]
    pub engines: BTreeMap<String, EngineConfig>,
    /// The settle time of source files, in seconds: a `FilesGlob` file changed more recently than this
    /// may still be being written and is left for a later pull (default 2; `weir pull --settle-secs`
    /// overrides it).
    #[serde(default)]
    pub source_settle_secs: Option<u64>,
}

/// A loaded, cross-checked workspace.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The workspace folder.
    pub root: PathBuf,
    /// `weir.yaml`.
    pub config: WorkspaceConfig,
    /// Datasets by name.
    pub datasets: BTreeMap<String, DatasetManifest>,
}

/// Why a workspace cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkspaceError {
    /// The folder does not exist or has no `datasets/`.
    #[error("{root}: not a weir workspace: {message}")]
    NotAWorkspace {
        /// The folder.
        root: PathBuf,
        /// Why.
        message: String,
    },
    /// A manifest (or `weir.yaml`) is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Two manifests declare the same dataset.
    #[error("dataset `{name}` is declared twice: in {first} and {second}")]
    DuplicateDataset {
        /// The name.
        name: String,
        /// One file.
        first: PathBuf,
        /// The other file.
        second: PathBuf,
    },
    /// Transforms form a cycle.
    #[error("datasets form a cycle: {}", cycle.join(" -> "))]
    Cycle {
        /// The datasets in the cycle.
        cycle: Vec<String>,
    },
}

impl Workspace {
    /// Loads `root/weir.yaml` (optional) and every `root/datasets/*.yaml`.
    pub fn load(root: &Path) -> Result<Self, WorkspaceError> {
        let (config, manifests, errors) = Self::read(root)?;
        if let Some(e) = ManifestError::from_all(errors) {
            return Err(e.into());
        }
        let mut datasets: BTreeMap<String, DatasetManifest> = BTreeMap::new();
        for m in manifests {
            if let Some(prev) = datasets.get(&m.name) {
                return Err(WorkspaceError::DuplicateDataset {
                    name: m.name.clone(),
                    first: prev.file.clone(),
                    second: m.file.clone(),
                });
            }
            datasets.insert(m.name.clone(), m);
        }
        let ws = Self {
            root: root.to_path_buf(),
            config,
            datasets,
        };
        ws.check_inputs()?;
        ws.topological_order()?;
        Ok(ws)
    }

    /// Reads `weir.yaml` and every manifest: the manifests that parse, and the errors of those that do not
    /// (every error of every manifest). A missing `datasets/` folder or a broken `weir.yaml` is an error.
    pub fn read(
        root: &Path,
    ) -> Result<(WorkspaceConfig, Vec<DatasetManifest>, Vec<ManifestError>), WorkspaceError> {
        let not_ws = |message: String| WorkspaceError::NotAWorkspace {
            root: root.to_path_buf(),
            message,
        };
        let dir = root.join("datasets");
        let config = WorkspaceConfig::load(root)?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| not_ws(e.to_string()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        let mut manifests = Vec::new();
        // Every manifest is read, and every error of every manifest reported together.
        let mut errors = Vec::new();
        for f in files {
            let display = f
                .strip_prefix(root)
                .map(Path::to_path_buf)
                .unwrap_or(f.clone());
            let parsed = std::fs::read_to_string(&f)
                .map_err(|e| ManifestError::Read {
                    file: display.clone(),
                    message: e.to_string(),
                })
                .and_then(|text| DatasetManifest::parse(&display, &text));
            let m = match parsed {
                Ok(m) => m,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            manifests.push(m);
        }
        Ok((config, manifests, errors))
    }

    fn check_inputs(&self) -> Result<(), WorkspaceError> {
        for m in self.datasets.values() {
            let (Some(t), Some(idx)) = (&m.transform, m.transform_index) else {
                continue;
            };
            let mut aliases = BTreeSet::new();
            for (j, input) in t.inputs.iter().enumerate() {
                let field = format!("content.metadata[{idx}].inputs[{j}].datasetRef");
                if !self.datasets.contains_key(&input.dataset_ref) {
                    let known: Vec<&str> = self.datasets.keys().map(String::as_str).collect();
                    return Err(m
                        .field_error(
                            &field,
                            format!(
                                "unknown dataset `{}` (known: {})",
                                input.dataset_ref,
                                known.join(", ")
                            ),
                        )
                        .into());
                }
                if !aliases.insert(input.query_alias().to_string()) {
                    return Err(m
                        .field_error(
                            &field,
                            format!("alias `{}` is used twice", input.query_alias()),
                        )
                        .into());
                }
            }
        }
        Ok(())
    }

    /// Dataset names with every input before the datasets that read it.
    pub fn topological_order(&self) -> Result<Vec<String>, WorkspaceError> {
        let mut order = Vec::new();
        let mut done = BTreeSet::new();
        for name in self.datasets.keys() {
            self.visit(name, &mut Vec::new(), &mut done, &mut order)?;
        }
        Ok(order)
    }

    fn visit(
        &self,
        name: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) -> Result<(), WorkspaceError> {
        if done.contains(name) {
            return Ok(());
        }
        if let Some(pos) = path.iter().position(|p| p == name) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(name.to_string());
            return Err(WorkspaceError::Cycle { cycle });
        }
        path.push(name.to_string());
        for input in self.inputs_of(name) {
            self.visit(&input, path, done, order)?;
        }
        path.pop();
        done.insert(name.to_string());
        order.push(name.to_string());
        Ok(())
    }

    /// The names of a dataset's inputs.
    pub fn inputs_of(&self, name: &str) -> Vec<String> {
        self.datasets
            .get(name)
            .and_then(|m| m.transform.as_ref())
            .map(|t| t.inputs.iter().map(|i| i.dataset_ref.clone()).collect())
            .unwrap_or_default()
    }

    /// Datasets that read `name` directly.
    pub fn dependents_of(&self, name: &str) -> Vec<String> {
        self.datasets
            .keys()
            .filter(|d| self.inputs_of(d).iter().any(|i| i == name))
            .cloned()
            .collect()
    }

    /// The storage location, resolved against the workspace folder.
    pub fn storage_location(&self) -> String {
        self.config.storage_location(&self.root)
    }
}

impl WorkspaceConfig {
    /// `root/weir.yaml` of the workspace folder `root` (the defaults when there is none), without reading
    /// any manifest: what a command needs to find the storage and take the workspace lock before it reads
    /// the manifests.
    pub fn load(root: &Path) -> Result<Self, WorkspaceError> {
        if !root.join("datasets").is_dir() {
            return Err(WorkspaceError::NotAWorkspace {
                root: root.to_path_buf(),
                message: "no `datasets/` folder".into(),
            });
        }
        let config_file = root.join("weir.yaml");
        Ok(if config_file.exists() {
            load_config(&config_file)?
        } else {
            WorkspaceConfig::default()
        })
    }

    /// The settle time of source files (`source_settle_secs`, or the default).
    pub fn source_settle(&self) -> std::time::Duration {
        self.source_settle_secs.map_or(
            weir_ingest::files_glob::DEFAULT_SETTLE,
            std::time::Duration::from_secs,
        )
    }

    /// The storage location, resolved against the workspace folder `root`.
    pub fn storage_location(&self, root: &Path) -> String {
        match &self.storage {
            Some(s) if s.contains("://") => s.clone(),
            Some(s) => root.join(s).to_string_lossy().into_owned(),
            None => root.join(".weir").to_string_lossy().into_owned(),
        }
    }
}

fn load_config(file: &Path) -> Result<WorkspaceConfig, ManifestError> {
    let text = std::fs::read_to_string(file).map_err(|e| ManifestError::Read {
        file: PathBuf::from("weir.yaml"),
        message: e.to_string(),
    })?;
    let located = Located::parse(&text).map_err(|e| ManifestError::Syntax {
        file: PathBuf::from("weir.yaml"),
        line: e.position.line,
        column: e.position.column,
        message: e.message,
    })?;
    let value = match located.value.clone() {
        serde_json::Value::Null => serde_json::Value::Object(Default::default()),
        v => v,
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let pos = located.position_of(&field);
        ManifestError::Field {
            file: PathBuf::from("weir.yaml"),
            line: pos.map_or(1, |p| p.line),
            column: pos.map_or(1, |p| p.column),
            field,
            message: e.into_inner().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join("datasets")).unwrap();
        std::fs::write(dir.join("datasets").join(name), text).unwrap();
    }

    fn derivative(name: &str, input: &str) -> String {
        format!(
            "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: Derivative\n  metadata:\n    - kind: SetTransform\n      inputs:\n        - datasetRef: {input}\n      transform:\n        kind: Sql\n        engine: datafusion\n        query: select * from {input}\n"
        )
    }

    const ROOT: &str = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: raw\n  kind: Root\n  metadata:\n    - kind: SetPollingSource\n      fetch: {kind: FilesGlob, path: 'in/*.csv'}\n      read: {kind: Csv, header: true}\n      merge: {kind: Append}\n";

    #[test]
    fn datasets_are_ordered_inputs_first() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &derivative("b", "a1"));
        write(dir.path(), "b.yaml", &derivative("a1", "raw"));
        write(dir.path(), "c.yaml", ROOT);
        let ws = Workspace::load(dir.path()).unwrap();
        assert_eq!(ws.topological_order().unwrap(), vec!["raw", "a1", "b"]);
        assert_eq!(ws.dependents_of("raw"), vec!["a1"]);
    }

    #[test]
    fn an_unknown_input_points_at_its_dataset_ref_line() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &derivative("b", "nope"));
        let err = Workspace::load(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("datasets/a.yaml:9:"), "{text}");
        assert!(
            text.contains("content.metadata[0].inputs[0].datasetRef"),
            "{text}"
        );
    }

    #[test]
    fn a_cycle_is_named() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &derivative("a", "b"));
        write(dir.path(), "b.yaml", &derivative("b", "a"));
        assert!(matches!(
            Workspace::load(dir.path()).unwrap_err(),
            WorkspaceError::Cycle { .. }
        ));
    }

    #[test]
    fn weir_yaml_configures_storage_and_engines() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "c.yaml", ROOT);
        std::fs::write(
            dir.path().join("weir.yaml"),
            "storage: store\nengines:\n  datafusion:\n    image: example/engine@sha256:00\n    port: 2884\n",
        )
        .unwrap();
        let ws = Workspace::load(dir.path()).unwrap();
        assert!(ws.storage_location().ends_with("store"));
        assert_eq!(ws.config.engines["datafusion"].port, Some(2884));
        std::fs::write(
            dir.path().join("weir.yaml"),
            "engines:\n  datafusion:\n    prot: 1\n",
        )
        .unwrap();
        let err = Workspace::load(dir.path()).unwrap_err().to_string();
        assert!(err.starts_with("weir.yaml:3:"), "{err}");
    }
}

/// How an engine gets its data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataExchange {
    /// Staged to local files (mounted into containers).
    #[default]
    Local,
    /// `s3://` URLs in the storage, read and written by the engine itself.
    ObjectStore,
}
