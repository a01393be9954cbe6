//! The errors `weir` commands end with, their exit codes and hints.

use crate::exit;
use weir_dataset::chain::integrity::IntegrityError;
use weir_dataset::chain::store::StoreError;
use weir_dataset::chain::upgrade::UpgradeError;
use weir_dataset::data::DataError;
use weir_dataset::workspace_lock::LockError;
use weir_engines::EngineFailure;
use weir_manifest::workspace::WorkspaceError;
use weir_transaction::TxError;

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
    /// `reset --to` names no block of the dataset's chain (or more than one).
    #[error("dataset `{dataset}`: cannot reset: {reason}")]
    BadBlock {
        /// The dataset.
        dataset: String,
        /// Why.
        reason: super::reset::BlockSpecError,
    },
    /// A destructive command was not confirmed: nothing was changed.
    #[error("{what} not confirmed ({why}): nothing was changed")]
    NotConfirmed {
        /// What was asked.
        what: String,
        /// Why there is no confirmation.
        why: String,
    },
    /// `weir init` in a folder that is a workspace already.
    #[error("{path} is a weir workspace already ({found}): nothing was changed")]
    AlreadyAWorkspace {
        /// The folder.
        path: String,
        /// What makes it one.
        found: String,
    },
    /// `weir init` cannot write the new workspace.
    #[error("cannot make the workspace in {path}: {source}")]
    Init {
        /// What could not be written.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `%` pattern that matches no dataset.
    #[error("no dataset matches `{pattern}` (`%` matches any characters; datasets: {known})")]
    NoMatch {
        /// The pattern given.
        pattern: String,
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
        /// The hint for the first failure's error, when it has one.
        hint: Option<&'static str>,
        /// The pull's summary: every dataset's outcome, as text and as JSON.
        summary: Box<super::Output>,
    },
    /// A dispatcher plugin failed during a pull whose transactions went on without it: what the pull
    /// committed stands (the summary says what, per dataset).
    #[error(
        "dispatcher plugin {path} failed during the pull, which went on without it: {message}; {committed}"
    )]
    PluginFailed {
        /// The plugin path.
        path: String,
        /// Why.
        message: String,
        /// What the pull committed, in words: the datasets with new blocks, and those that failed.
        committed: String,
        /// The exit code: the first failed dataset's, or 1 when every dataset completed.
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
    /// What the command did before it failed, when it did something worth reporting: a pull's summary of
    /// every dataset's outcome. `weir` prints it with the error (under `--format json`, in the same document).
    pub fn partial_output(&self) -> Option<&super::Output> {
        match self {
            CommandError::PullFailed { summary, .. }
            | CommandError::PluginFailed { summary, .. } => Some(summary),
            _ => None,
        }
    }

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
            CommandError::UnknownDataset { .. }
            | CommandError::NoMatch { .. }
            | CommandError::NoSuchOffset { .. } => exit::NOT_FOUND,
            CommandError::BadBlock {
                reason:
                    super::reset::BlockSpecError::Ambiguous { .. }
                    | super::reset::BlockSpecError::NotANumber { .. },
                ..
            } => exit::USAGE,
            CommandError::BadBlock { .. } => exit::NOT_FOUND,
            CommandError::Mismatch { .. } | CommandError::ConformanceFailed { .. } => {
                exit::MISMATCH
            }
            CommandError::PullFailed { code, .. } | CommandError::PluginFailed { code, .. } => {
                *code
            }
            CommandError::Lock(LockError::Locked { .. }) => exit::LOCKED,
            CommandError::Intent(_) => exit::STORAGE,
            CommandError::Lock(LockError::Io { .. }) => exit::STORAGE,
            CommandError::Pipeline { .. } | CommandError::Plugin { .. } => exit::FAILURE,
            CommandError::NotConfirmed { .. } | CommandError::AlreadyAWorkspace { .. } => {
                exit::REFUSED
            }
            CommandError::Init { .. } => exit::FAILURE,
            CommandError::Sql(e) if e.is_query_error() => exit::INVALID_QUERY,
            CommandError::Sql(weir_sql::SqlError::OpenTable { .. }) => exit::STORAGE,
            CommandError::Sql(_) => exit::FAILURE,
        }
    }

    /// A hint for the user, when there is one: what to do about this error (never advice that cannot
    /// help, such as rerunning a pull that failed on a damaged stored file).
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            CommandError::Workspace(WorkspaceError::NotAWorkspace { .. }) => Some(
                "run weir in a workspace folder (one holding a `datasets/` folder of manifests), point --workspace at one, or make one with `weir init`",
            ),
            CommandError::Workspace(WorkspaceError::DuplicateDataset { .. }) => Some(
                "give each dataset one manifest: remove or rename one of the two, then run `weir validate`",
            ),
            CommandError::Workspace(WorkspaceError::Cycle { .. }) => Some(
                "a derivative cannot read itself, even through others: change the inputs of one dataset of the cycle, then run `weir validate`",
            ),
            CommandError::Workspace(_) => {
                Some("fix the manifest at the position shown, then run `weir validate`")
            }
            CommandError::Transaction(t) => tx_hint(t),
            CommandError::Engine(EngineFailure::InvalidQuery { .. }) => {
                Some("fix the SQL in the dataset's manifest; nothing was committed")
            }
            CommandError::Engine(EngineFailure::NotConfigured { .. }) => {
                Some("configure the engine under `engines:` in weir.yaml or pick another --engine")
            }
            CommandError::StoredFiles { .. } => Some(
                "restore these files from a backup (each is named by the hash of its bytes); `weir validate` checks every dataset",
            ),
            CommandError::Store(e) | CommandError::Integrity(IntegrityError::Store(e)) => {
                store_hint(e)
            }
            CommandError::Integrity(_) => Some(
                "restore the files named from a backup (each is named by the hash of its bytes); `weir validate` checks every dataset",
            ),
            CommandError::Data(_) => Some(
                "a stored slice could not be read: `weir verify DATASET --integrity` checks every file of its chain against its hash",
            ),
            CommandError::Upgrade(_) | CommandError::UpgradeRead { .. } => Some(
                "nothing was written: every dataset is as it was; restore or fix what the message names (stored files are named by the hash of their bytes), then run `weir upgrade` again",
            ),
            CommandError::Intent(_) => Some(
                "an operation a killed weir began is recorded in the intent record named; every command completes it first: fix what the message names (permissions, space) and run any command again",
            ),
            CommandError::Lock(LockError::Locked { .. }) => Some(
                "wait for it to finish, or pass --wait-lock to wait for it; list, log, tail and verify do not need the lock",
            ),
            CommandError::UnknownDataset { .. } | CommandError::NoMatch { .. } => {
                Some("`weir list` shows the datasets of the workspace")
            }
            CommandError::BadBlock {
                reason: super::reset::BlockSpecError::Empty,
                ..
            } => Some("the dataset has nothing to reset: `weir pull DATASET` gives it blocks"),
            CommandError::BadBlock { .. } => Some(
                "`weir log DATASET` shows each block's hash and sequence number: give `--to` a hash (its last 8 or more characters) or `#N`",
            ),
            CommandError::NotConfirmed { .. } => Some(
                "pass --yes (-y) to delete without being asked, e.g. in scripts; `weir reset` empties a dataset but keeps it and its id",
            ),
            CommandError::AlreadyAWorkspace { .. } => Some(
                "`weir init --exists-ok` accepts an existing workspace; `weir list` shows its datasets",
            ),
            CommandError::Init { .. } => Some(
                "make the folder writable (or pick another with --workspace), then run `weir init` again",
            ),
            CommandError::NoSuchOffset { .. } => Some(
                "offsets run from 0 to the dataset's record count minus one (`weir list` shows the count)",
            ),
            CommandError::Mismatch { .. } => {
                Some("`weir log DATASET` shows the recorded blocks and engines")
            }
            CommandError::PluginFailed { .. } => Some(
                "the datasets the pull committed stay committed (`weir list` shows their heads) and a rerun of `weir pull` has nothing to redo for them; the plugin missed the events after its failure: fix it, or pull without --dispatcher-plugin",
            ),
            CommandError::PullFailed {
                hint: Some(hint), ..
            } => Some(hint),
            CommandError::PullFailed { code, .. } => pull_hint(*code),
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

/// The hint for a failed transaction: what helps for its error.
pub fn tx_hint(t: &TxError) -> Option<&'static str> {
    match t {
        TxError::Engine {
            source: EngineFailure::InvalidQuery { .. },
            ..
        } => Some("fix the SQL in the dataset's manifest; nothing was committed"),
        TxError::Engine {
            source: EngineFailure::NotConfigured { .. },
            ..
        } => Some("configure the engine under `engines:` in weir.yaml or pick another --engine"),
        TxError::Engine { .. } => Some(
            "the dataset stayed at its previous head; rerun `weir pull` once the engine is fixed",
        ),
        TxError::InvalidTransform { .. } => Some(
            "fix the query at the position shown (nothing was recorded; `weir validate` checks every transform), then rerun `weir pull`",
        ),
        TxError::QueryChange { .. } => Some(
            "revert the query, or rerun with `weir pull --recompute DATASET` to reset the dataset to its Seed and compute it again from its inputs with the new query",
        ),
        TxError::InputMoved(m) => Some(if m.found.is_none() {
            "restore the missing dataset's folder from a backup (nothing was written); or, to compute the derivative again from a new dataset of that name, run `weir pull --recompute DERIVATIVE`"
        } else {
            "if the input's storage was lost, restore it from a backup (nothing was written); to compute the derivative again from the dataset the name leads to now, run `weir pull --recompute DERIVATIVE`"
        }),
        TxError::Store(e) => store_hint(e),
        TxError::BadData { .. } => Some(
            "fix the file at the place named (nothing of it was committed), then rerun `weir pull`",
        ),
        TxError::Unsupported { .. } => Some(
            "change the manifest to what Weir carries out (coordinator/README.md lists it), then run `weir validate`",
        ),
        TxError::Fetch { .. } => Some(
            "make the source reachable (the message names it), then rerun `weir pull`; the dataset keeps its previous head",
        ),
        TxError::Scratch { .. } => Some(
            "free space or fix permissions of the temporary folder (TMPDIR), then rerun `weir pull`",
        ),
        TxError::Prepare { .. } => Some(
            "fix the prepare step or the file it names (nothing was committed), then rerun `weir pull`",
        ),
        TxError::Refused { .. } | TxError::UnknownDataset { .. } | TxError::Data { .. } => None,
    }
}

/// The hint for a storage error.
fn store_hint(e: &StoreError) -> Option<&'static str> {
    match e {
        StoreError::HashMismatch { .. } | StoreError::Missing { .. } => Some(
            "a stored file was changed or lost after it was written (every file is named by the hash of its bytes): restore it from a backup, then run `weir validate`; rerunning the command cannot help, and nothing was committed",
        ),
        StoreError::OldFormat { .. } => Some(
            "`weir upgrade` converts every dataset of the workspace, keeping the old chains in the storage's upgrade-backup folder",
        ),
        StoreError::HeadMissing { .. } | StoreError::BadHead { .. } => {
            Some("restore the head as the message says, then run `weir validate`")
        }
        StoreError::InvalidChain { .. } | StoreError::Decode { .. } => Some(
            "the metadata chain is damaged: restore the dataset's folder from a backup (`weir validate` checks every chain); `weir reset DATASET --to BLOCK` goes back to a block before the damage",
        ),
        _ => None,
    }
}

/// The hint for a pull whose first failed dataset exited with `code`, when its error has none of its own.
fn pull_hint(code: u8) -> Option<&'static str> {
    match code {
        exit::BAD_DATA => Some(
            "fix the file at the place named (nothing of it was committed), then rerun `weir pull`",
        ),
        exit::INVALID_QUERY => Some(
            "fix the query in the dataset's manifest (`weir validate` checks the workspace); the dataset keeps its previous head",
        ),
        exit::REFUSED => Some(
            "revert the query, or rerun with `weir pull --recompute DATASET` to reset the dataset to its Seed and compute it again with the new query; the dataset keeps its previous head",
        ),
        exit::STORAGE => Some(
            "stored data is missing, damaged or unreadable, as the error names: rerunning `weir pull` cannot help; restore it from a backup (`weir validate` checks every dataset); the datasets that failed keep their previous head",
        ),
        exit::INVALID_WORKSPACE => {
            Some("fix the manifest as the error says, then run `weir validate`")
        }
        _ => Some(
            "the datasets that failed keep their previous head; fix what the error names, then rerun `weir pull`",
        ),
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
