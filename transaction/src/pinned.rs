//! A derivative's inputs are pinned by dataset id: the `SetTransform` in force names each input by the id it
//! was computed from. An input name that now leads to another dataset (its storage was removed and the
//! name seeded again) or to no dataset at all (its storage vanished) is refused, never followed: reading a
//! new dataset under an old name would duplicate or lose records downstream without a word.

use weir_odf::DatasetId;

use super::{Context, TxError};

/// An input of a derivative that is not the dataset the derivative was computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputMoved {
    /// The derivative.
    pub dataset: String,
    /// The input's name in the workspace.
    pub input: String,
    /// The id the derivative's chain records for it.
    pub recorded: DatasetId,
    /// The id of the dataset the name leads to now; `None` when it has no stored chain.
    pub found: Option<DatasetId>,
}

impl Context {
    /// Every derivative among `names` and the derivatives reading them whose chain records an input id that
    /// the input's name no longer leads to. The datasets of `names` are what is about to be read or
    /// written; a dataset whose storage vanished is found through the derivatives that recorded it.
    pub async fn moved_inputs(&self, names: &[String]) -> Result<Vec<InputMoved>, TxError> {
        let mut moved = Vec::new();
        for (name, manifest) in &self.workspace.datasets {
            let Some(t) = &manifest.transform else {
                continue;
            };
            let touches =
                names.contains(name) || t.inputs.iter().any(|i| names.contains(&i.dataset_ref));
            if !touches {
                continue;
            }
            let chain = self.storage.dataset(name).chain().await?;
            let Some(recorded) = &chain.summary.transform else {
                continue;
            };
            // A changed list of inputs is a changed transform (validated and recorded as such); inputs are
            // compared position by position, as the transform records them.
            if recorded.inputs.len() != t.inputs.len() {
                continue;
            }
            for (input, pinned) in t.inputs.iter().zip(&recorded.inputs) {
                let Some(recorded_id) = pinned.dataset_id() else {
                    continue;
                };
                let found = self
                    .storage
                    .dataset(&input.dataset_ref)
                    .chain()
                    .await?
                    .summary
                    .dataset_id;
                if found != Some(recorded_id) {
                    moved.push(InputMoved {
                        dataset: name.clone(),
                        input: input.dataset_ref.clone(),
                        recorded: recorded_id,
                        found,
                    });
                }
            }
        }
        Ok(moved)
    }

    /// [`Context::moved_inputs`] as an error: the first moved input, with what recovers from it.
    pub async fn check_inputs_pinned(&self, names: &[String]) -> Result<(), TxError> {
        match self.moved_inputs(names).await?.into_iter().next() {
            None => Ok(()),
            Some(m) => Err(TxError::InputMoved(Box::new(m))),
        }
    }
}

impl std::fmt::Display for InputMoved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.found {
            None => write!(
                f,
                "dataset `{}` has no stored chain, but `{}` was computed from it (dataset {}): its storage is missing",
                self.input, self.dataset, self.recorded
            ),
            Some(found) => write!(
                f,
                "input `{}` of `{}` is now dataset {found}, but `{}` was computed from dataset {}: the name leads to another dataset (its storage was removed and seeded again?)",
                self.input, self.dataset, self.dataset, self.recorded
            ),
        }
    }
}
