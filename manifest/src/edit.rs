//! Edits of manifest files that keep everything else of their text (comments, order, layout): what
//! `weir rename` writes. Each edit is parsed back before it is returned, so a file is only ever replaced by
//! a manifest that reads as intended.

use std::path::Path;

use super::snapshot::{DatasetManifest, ManifestError};
use super::yaml::{self, Located};

/// The text of manifest `file` (as the workspace names it, relative to `root`) and its nodes' positions.
fn read(root: &Path, file: &Path) -> Result<(String, Located), ManifestError> {
    let text = std::fs::read_to_string(root.join(file)).map_err(|e| ManifestError::Read {
        file: file.to_path_buf(),
        message: e.to_string(),
    })?;
    let located = Located::parse(&text).map_err(|e| ManifestError::Syntax {
        file: file.to_path_buf(),
        line: e.position.line,
        column: e.position.column,
        message: e.message,
    })?;
    Ok((text, located))
}

fn cannot(file: &Path, field: &str, message: &str) -> ManifestError {
    ManifestError::Field {
        file: file.to_path_buf(),
        line: 1,
        column: 1,
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// The text of the manifest `file` (relative to the workspace folder `root`) with its dataset named `new`.
pub fn renamed(root: &Path, file: &Path, new: &str) -> Result<String, ManifestError> {
    let (text, located) = read(root, file)?;
    let field = "content.name";
    let at = located
        .scalar_position(field)
        .ok_or_else(|| cannot(file, field, "has no name to change"))?;
    let edited = yaml::replace_scalar(&text, at, new)
        .ok_or_else(|| cannot(file, field, "cannot be edited in place"))?;
    let check = DatasetManifest::parse(file, &edited)?;
    if check.name != new {
        return Err(cannot(file, field, "did not read back as the new name"));
    }
    Ok(edited)
}

/// The text of the manifest `file` (relative to the workspace folder `root`) with every transform input
/// naming `old` naming `new`; an input without an `alias` gets `alias: old`, so its queries still read the
/// table they name.
pub fn input_renamed(
    root: &Path,
    file: &Path,
    old: &str,
    new: &str,
) -> Result<String, ManifestError> {
    let (mut text, _) = read(root, file)?;
    let before = DatasetManifest::parse(file, &text)?;
    let Some(index) = before.transform_index else {
        return Ok(text);
    };
    let inputs = before
        .transform
        .as_ref()
        .map(|t| t.inputs.clone())
        .unwrap_or_default();
    // Edit from the last input up, so positions read before an edit stay right for the inputs above it.
    for (k, input) in inputs.iter().enumerate().rev() {
        if input.dataset_ref != old {
            continue;
        }
        let located = Located::parse(&text).map_err(|e| cannot(file, "content", &e.message))?;
        let field = format!("content.metadata[{index}].inputs[{k}].datasetRef");
        if input.alias.is_none() {
            let key = located
                .key_position(&field)
                .ok_or_else(|| cannot(file, &field, "not found"))?;
            text = yaml::insert_key_after(&text, key, "alias", old).ok_or_else(|| {
                cannot(
                    file,
                    &field,
                    "is in flow style (`{...}`); give the input `alias:` by hand, then rename",
                )
            })?;
        }
        let located = Located::parse(&text).map_err(|e| cannot(file, &field, &e.message))?;
        let at = located
            .scalar_position(&field)
            .ok_or_else(|| cannot(file, &field, "not found"))?;
        text = yaml::replace_scalar(&text, at, new)
            .ok_or_else(|| cannot(file, &field, "cannot be edited in place"))?;
    }
    let after = DatasetManifest::parse(file, &text)?;
    let aliases = |m: &DatasetManifest| -> Vec<String> {
        m.transform
            .iter()
            .flat_map(|t| &t.inputs)
            .map(|i| i.query_alias().to_string())
            .collect()
    };
    let refers_old = after
        .transform
        .iter()
        .flat_map(|t| &t.inputs)
        .any(|i| i.dataset_ref == old);
    if aliases(&before) != aliases(&after) || refers_old {
        return Err(cannot(
            file,
            &format!("content.metadata[{index}].inputs"),
            "did not read back with the new input name and the same query aliases",
        ));
    }
    Ok(text)
}
