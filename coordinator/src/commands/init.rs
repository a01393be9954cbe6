//! `weir init [--exists-ok]`: a new, empty workspace in the `--workspace` folder (created when missing): a
//! `datasets/` folder for the manifests and a `weir.yaml` whose every setting is a comment showing its
//! default. A folder that is a workspace already is left alone (refused, or accepted with `--exists-ok`).

use std::path::Path;

use serde_json::json;

use super::Output;
use crate::commands::error::CommandError;

/// The `weir.yaml` of a new workspace: every setting commented out, at its default.
pub const CONFIG_TEMPLATE: &str = "\
# Weir workspace settings. Every setting is optional; the values shown commented out are the defaults.
#
# Where the datasets' metadata chains and data live: a folder relative to this file, or an object-store
# URL (s3://bucket/prefix, configured by the usual AWS_* environment variables).
# storage: .weir
#
# Which engine serves each engine name a transform asks for (`engine: datafusion` in a manifest), per
# --engine runtime. The embedded engine (--engine embedded, the default) needs nothing here.
# engines:
#   datafusion:
#     binary: path/to/weir-engine                 # --engine process
#     image: weir/reference-engine@sha256:<id>    # --engine docker|podman: an image pinned by digest
";

/// What a new workspace's `datasets/` folder explains about itself.
const DATASETS_README: &str = "\
One manifest per dataset (an ODF DatasetSnapshot in YAML), e.g. `readings.yaml` for the dataset
`readings`. `weir validate` checks them; `weir pull --all` ingests and computes every dataset.
";

/// Runs `init` in `root`.
pub fn run(root: &Path, exists_ok: bool) -> Result<Output, CommandError> {
    let datasets = root.join("datasets");
    let config = root.join("weir.yaml");
    let found: Vec<&str> = [
        (datasets.exists(), "a `datasets/` folder"),
        (config.exists(), "a `weir.yaml`"),
    ]
    .into_iter()
    .filter_map(|(present, what)| present.then_some(what))
    .collect();
    if !found.is_empty() {
        if exists_ok {
            return Ok(Output {
                text: format!(
                    "{} is a weir workspace already; nothing was changed",
                    root.display()
                ),
                json: json!({ "workspace": root, "created": false }),
            });
        }
        return Err(CommandError::AlreadyAWorkspace {
            path: root.display().to_string(),
            found: format!("it has {}", found.join(" and ")),
        });
    }
    let fail = |path: &Path| {
        let path = path.display().to_string();
        move |source| CommandError::Init { path, source }
    };
    std::fs::create_dir_all(&datasets).map_err(fail(&datasets))?;
    let readme = datasets.join("README.md");
    std::fs::write(&readme, DATASETS_README).map_err(fail(&readme))?;
    std::fs::write(&config, CONFIG_TEMPLATE).map_err(fail(&config))?;
    tracing::info!(workspace = %root.display(), "workspace created");
    Ok(Output {
        text: format!(
            "made a weir workspace in {}: put dataset manifests in datasets/ (see coordinator/README.md), settings in weir.yaml; then `weir validate` and `weir pull --all`",
            root.display()
        ),
        json: json!({
            "workspace": root,
            "created": true,
            "files": [datasets.join("README.md"), config],
        }),
    })
}
