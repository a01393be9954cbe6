//! The errors `weir` commands end with, their exit codes and hints.

use crate::engine::EngineFailure;
use crate::exit;
use crate::manifest::workspace::WorkspaceError;
use crate::transaction::TxError;
use weir_dataset::chain::integrity::IntegrityError;
use weir_dataset::chain::store::StoreError;
use weir_dataset::chain::upgrade::UpgradeError;
use weir_dataset::data::DataError;
use weir_dataset::workspace_lock::LockError;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The workspace or a manifest is invalid.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// Storage failed or a chain is invalid.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A transaction failed.
    #[error(transparent)]
    Transaction(#[from] TxError),
    /// An engine failed outside a transaction.
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// Records could not be read.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A dataset's stored files do not match its chain.
    #[error(transparent)]
    Integrity(#[from] IntegrityError),
    /// `weir sql`: a query was refused or failed, or the Flight SQL server could not serve.
    #[error(transparent)]
    Sql(#[from] weir_sql::SqlError),
    /// An operation's intent record cannot be read or written, or the operation it records cannot be
    /// completed.
    #[error(transparent)]
    Intent(#[from] super::intent::IntentError),
    /// The workspace lock is held by another process, or cannot be taken.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// No such dataset.
    #[error("unknown dataset `{name}` (datasets: {known})")]
    UnknownDataset {
        /// The name given.
        name: String,
        /// The names that exist.
        known: String,
    },
    /// No record at that offset.
    #[error("dataset `{dataset}` has no record at offset {offset}")]
    NoSuchOffset {
        /// The dataset.
        dataset: String,
        /// The offset.
        offset: u64,
    },
    /// Replay found a difference.
    #[error("{summary}")]
    Mismatch {
        /// What differed, where.
        summary: String,
    },
    /// Stored files of a chain are missing, unreadable or corrupt (`verify`).
    #[error(
        "dataset `{dataset}`: {} of the {checked} stored file(s) its chain references failed the check:\n  - {}",
        problems.len(),
        problems.join("\n  - ")
    )]
    StoredFiles {
        /// The dataset.
        dataset: String,
        /// How many files were checked.
        checked: usize,
        /// One line per file: block, file, expected and actual hash.
        problems: Vec<String>,
    },
    /// Datasets failed during a pull (what each failed with is in the summary, printed before the error).
    #[error("{failed} dataset(s) failed: {}", datasets.join(", "))]
    PullFailed {
        /// How many.
        failed: usize,
        /// Which.
        datasets: Vec<String>,
        /// The exit code of the first failure.
        code: u8,
        /// The pull's summary: every dataset's outcome, as text and as JSON.
        summary: Box<super::Output>,
    },
    /// The stage pipeline failed.
    #[error("pipeline: {message}")]
    Pipeline {
        /// Why.
        message: String,
    },
    /// A dispatcher plugin could not be loaded or used.
    #[error("dispatcher plugin {path}: {message}")]
    Plugin {
        /// The plugin path.
        path: String,
        /// Why.
        message: String,
    },
    /// `weir upgrade` cannot convert a chain; nothing was written.
    #[error(transparent)]
    Upgrade(#[from] UpgradeError),
    /// `weir upgrade` cannot read a block or file it needs; nothing was written.
    #[error("dataset `{dataset}`: {what} cannot be read for the upgrade: {source}")]
    UpgradeRead {
        /// The dataset.
        dataset: String,
        /// The block or file.
        what: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The conformance kit found failures, or could not run every check (a run with checks not run has not
    /// passed).
    #[error("{failed} conformance check(s) failed, {not_run} not run")]
    ConformanceFailed {
        /// Checks that failed.
        failed: usize,
        /// Checks that did not run.
        not_run: usize,
    },
}

impl CommandError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CommandError::Workspace(_) => exit::INVALID_WORKSPACE,
            CommandError::Store(_)
            | CommandError::Data(_)
            | CommandError::Integrity(_)
            | CommandError::StoredFiles { .. }
            | CommandError::Upgrade(_)
            | CommandError::UpgradeRead { .. } => exit::STORAGE,
            CommandError::Transaction(t) => tx_code(t),
            CommandError::Engine(e) => engine_code(e),
            CommandError::UnknownDataset { .. } | CommandError::NoSuchOffset { .. } => {
                exit::NOT_FOUND
            }
            CommandError::Mismatch { .. } | CommandError::ConformanceFailed { .. } => {
                exit::MISMATCH
            }
            CommandError::PullFailed { code, .. } => *code,
            CommandError::Lock(LockError::Locked { .. }) => exit::LOCKED,
            CommandError::Intent(_) => exit::STORAGE,
            CommandError::Lock(LockError::Io { .. }) => exit::STORAGE,
            CommandError::Pipeline { .. } | CommandError::Plugin { .. } => exit::FAILURE,
            CommandError::Sql(e) if e.is_query_error() => exit::INVALID_QUERY,
            CommandError::Sql(weir_sql::SqlError::OpenTable { .. }) => exit::STORAGE,
            CommandError::Sql(_) => exit::FAILURE,
        }
    }

    /// A hint for the user, when there is one.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            CommandError::Workspace(WorkspaceError::NotAWorkspace { .. }) => Some(
                "run weir in a workspace folder (one holding a `datasets/` folder of manifests), or point --workspace at one",
            ),
            CommandError::Workspace(_) => {
                Some("fix the manifest at the position shown, then run `weir validate`")
            }
            CommandError::Transaction(TxError::Engine {
                source: EngineFailure::InvalidQuery { .. },
                ..
            })
            | CommandError::Engine(EngineFailure::InvalidQuery { .. }) => {
                Some("fix the SQL in the dataset's manifest; nothing was committed")
            }
            CommandError::Transaction(TxError::InvalidTransform { .. }) => Some(
                "fix the query at the position shown (nothing was recorded; `weir validate` checks every transform), then rerun `weir pull`",
            ),
            CommandError::Transaction(TxError::QueryChange { .. }) => Some(
                "revert the query, or rerun with `weir pull --recompute DATASET` to reset the dataset to its Seed and compute it again from its inputs with the new query",
            ),
            CommandError::Transaction(TxError::InputMoved(m)) => Some(if m.found.is_none() {
                "restore the missing dataset's folder from a backup (nothing was written); or, to compute the derivative again from a new dataset of that name, run `weir pull --recompute DERIVATIVE`"
            } else {
                "if the input's storage was lost, restore it from a backup (nothing was written); to compute the derivative again from the dataset the name leads to now, run `weir pull --recompute DERIVATIVE`"
            }),
            CommandError::Transaction(TxError::Engine { .. }) => Some(
                "the dataset stayed at its previous head; rerun `weir pull` once the engine is fixed",
            ),
            CommandError::Engine(EngineFailure::NotConfigured { .. }) => {
                Some("configure the engine under `engines:` in weir.yaml or pick another --engine")
            }
            CommandError::StoredFiles { .. } => Some(
                "restore these files from a backup (each is named by the hash of its bytes); `weir validate` checks every dataset",
            ),
            CommandError::Store(StoreError::HashMismatch { .. } | StoreError::Missing { .. })
            | CommandError::Integrity(IntegrityError::Store(
                StoreError::HashMismatch { .. } | StoreError::Missing { .. },
            )) => Some(
                "a stored file was changed or lost after it was written (every file is named by the hash of its bytes): restore it from a backup, then run `weir validate`; nothing was committed",
            ),
            CommandError::Upgrade(_) | CommandError::UpgradeRead { .. } => Some(
                "nothing was written: every dataset is as it was; restore or fix what the message names (stored files are named by the hash of their bytes), then run `weir upgrade` again",
            ),
            CommandError::Store(StoreError::OldFormat { .. }) => Some(
                "`weir upgrade` converts every dataset of the workspace, keeping the old chains in the storage's upgrade-backup folder",
            ),
            CommandError::Store(StoreError::HeadMissing { .. } | StoreError::BadHead { .. }) => {
                Some("restore the head as the message says, then run `weir validate`")
            }
            CommandError::Intent(_) => Some(
                "an operation a killed weir began is recorded in the intent record named; every command completes it first: fix what the message names (permissions, space) and run any command again",
            ),
            CommandError::Lock(LockError::Locked { .. }) => Some(
                "wait for it to finish, or pass --wait-lock to wait for it; list, log, tail and verify do not need the lock",
            ),
            CommandError::UnknownDataset { .. } => {
                Some("`weir list` shows the datasets of the workspace")
            }
            CommandError::Mismatch { .. } => {
                Some("`weir log DATASET` shows the recorded blocks and engines")
            }
            CommandError::PullFailed {
                code: exit::BAD_DATA,
                ..
            } => Some(
                "fix the file at the place named (nothing of it was committed), then rerun `weir pull`",
            ),
            CommandError::PullFailed {
                code: exit::INVALID_QUERY,
                ..
            } => Some(
                "fix the query in the dataset's manifest (`weir validate` checks the workspace); the dataset keeps its previous head",
            ),
            CommandError::PullFailed {
                code: exit::REFUSED,
                ..
            } => Some(
                "revert the query, or rerun with `weir pull --recompute DATASET` to reset the dataset to its Seed and compute it again with the new query; the dataset keeps its previous head",
            ),
            CommandError::PullFailed { .. } => {
                Some("datasets that failed keep their previous head; rerun `weir pull`")
            }
            CommandError::Sql(weir_sql::SqlError::NoData { .. }) => {
                Some("`weir pull DATASET` gives it data; `weir list` shows what each dataset holds")
            }
            CommandError::Sql(e) if e.is_query_error() => Some(
                "every dataset is a table named as the dataset: quote names with dots or dashes, e.g. SELECT * FROM \"readings.clean\"; `SHOW TABLES` lists them",
            ),
            _ => None,
        }
    }
}

/// The exit code of a failed transaction.
pub fn tx_code(t: &TxError) -> u8 {
    match t {
        TxError::Store(_) | TxError::InputMoved(_) => exit::STORAGE,
        TxError::Engine { source, .. } => engine_code(source),
        TxError::UnknownDataset { .. } => exit::NOT_FOUND,
        TxError::BadData { .. } => exit::BAD_DATA,
        TxError::Data { .. }
        | TxError::Fetch { .. }
        | TxError::Prepare { .. }
        | TxError::Scratch { .. } => exit::FAILURE,
        TxError::Unsupported { .. } => exit::INVALID_WORKSPACE,
        TxError::InvalidTransform { .. } => exit::INVALID_QUERY,
        TxError::QueryChange { .. } | TxError::Refused { .. } => exit::REFUSED,
    }
}

fn engine_code(e: &EngineFailure) -> u8 {
    match e {
        EngineFailure::InvalidQuery { .. } => exit::INVALID_QUERY,
        EngineFailure::NotConfigured { .. } => exit::NOT_FOUND,
        EngineFailure::Output { .. } => exit::FAILURE,
        EngineFailure::Internal { .. }
        | EngineFailure::Contract { .. }
        | EngineFailure::NotSupported { .. } => exit::ENGINE_FAILED,
    }
}
