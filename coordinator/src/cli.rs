//! The command line: `weir [--workspace DIR] [--format text|json] <command>`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::commands::Format;
use weir_engines::EngineRuntimeKind;

/// `--engine`: which runtime serves engines ([`EngineRuntimeKind`], spelled for the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineRuntime {
    /// The reference DataFusion engine inside this process.
    Embedded,
    /// A local engine binary (`engines.<name>.binary` in `weir.yaml`).
    Process,
    /// A Docker container pinned by digest (`engines.<name>.image`).
    Docker,
    /// A Podman container pinned by digest.
    Podman,
}

impl From<EngineRuntime> for EngineRuntimeKind {
    fn from(runtime: EngineRuntime) -> Self {
        match runtime {
            EngineRuntime::Embedded => Self::Embedded,
            EngineRuntime::Process => Self::Process,
            EngineRuntime::Docker => Self::Docker,
            EngineRuntime::Podman => Self::Podman,
        }
    }
}

/// Weir: datasets with a verifiable metadata chain, pulled through sandboxed, version-pinned engines.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about, long_about = None, after_help = crate::exit::EXIT_CODES_HELP)]
pub struct Cli {
    /// The workspace folder (holds `weir.yaml` and `datasets/*.yaml`).
    #[arg(long, global = true, default_value = ".")]
    pub workspace: PathBuf,
    /// Output format. `json`: every command writes exactly one JSON document on stdout, whatever its
    /// outcome (a failure's document has `error`, `causes`, `hint` and `exitCode`); logs and progress go to
    /// stderr. `dot`: `lineage` only.
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Which runtime serves engines.
    #[arg(long = "engine", id = "engine_runtime", global = true, value_enum, default_value_t = EngineRuntime::Embedded)]
    pub engine_runtime: EngineRuntime,
    /// Commands that write (pull, ingest, engine deprecate, upgrade) wait for another weir process writing the workspace
    /// to finish, instead of failing with exit 9.
    #[arg(long, global = true)]
    pub wait_lock: bool,
    /// Log filter (`RUST_LOG` syntax), e.g. `weir=debug` (`weir` names weir's own logs; `reference_engine`,
    /// `engine_runtime`, `engine_contract` and `gen_stage` those of its parts).
    #[arg(long, global = true, default_value = "warn")]
    pub log: String,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ingest root datasets and run transforms until everything is up to date.
    Pull {
        /// Pull every dataset.
        #[arg(short = 'a', long, conflicts_with = "datasets")]
        all: bool,
        /// Also pull every dataset the named ones are computed from, all the way up, inputs first
        /// (otherwise a named derivative reads its inputs as they are).
        #[arg(short = 'r', long, conflicts_with = "all")]
        recursive: bool,
        /// Datasets to pull; `%` matches any characters (`readings.%`). None: every dataset.
        datasets: Vec<String>,
        /// A dispatcher plugin (`.so`) that also receives progress events; its snapshot is printed at the end.
        #[arg(long)]
        dispatcher_plugin: Option<PathBuf>,
        /// The plugin's options, as a JSON object (e.g. `{"tag": "nightly"}`).
        #[arg(long, requires = "dispatcher_plugin", value_parser = parse_json_object)]
        dispatcher_plugin_options: Option<serde_json::Value>,
        /// Engine workers running at the same time (at least 1).
        #[arg(long, default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        max_concurrency: usize,
        /// Deadline for one engine operation, in seconds (at least 1).
        #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
        deadline_secs: u64,
        /// No progress bars.
        #[arg(short = 'q', long)]
        quiet: bool,
        /// Settle time of source files in seconds: a file changed more recently may still be being written
        /// and is left for a later pull (default: `source_settle_secs` in weir.yaml, else 2).
        #[arg(long, env = "WEIR_SETTLE_SECS")]
        settle_secs: Option<u64>,
        /// Datasets whose transform changed in a way their recorded state cannot follow (exit 11) are
        /// reset to their Seed and computed again from their inputs with the new query (refused while
        /// other datasets were computed from them: `weir reset DATASET --recursive` first).
        #[arg(long)]
        recompute: bool,
    },
    /// Push data into a root dataset's push source (`AddPushSource`): one transaction, with the checks,
    /// preprocess query and merge strategy of the source (as kamu's `kamu ingest`).
    Ingest {
        /// The root dataset.
        dataset: String,
        /// The data file (CSV, NDJSON or Parquet, as the source reads), or `-` for standard input (the
        /// default).
        file: Option<String>,
        /// The push source, when the dataset declares more than one.
        #[arg(long)]
        source_name: Option<String>,
        /// The data's format when it is not the source's read step's (that step's schema still applies; a
        /// CSV has a header line).
        #[arg(long, value_enum)]
        input_format: Option<crate::commands::ingest::InputFormat>,
        /// No progress line.
        #[arg(long)]
        quiet: bool,
        /// Ingest the data even when it is byte for byte what the last push to this source sent. Without
        /// it such a repeat (a rerun after a crash, say) is not ingested twice: the command names the
        /// block that holds it and exits 0.
        #[arg(long)]
        again: bool,
    },
    /// Check a dataset's stored files against its chain, then replay every transform with its recorded
    /// engine and compare output hashes.
    Verify {
        /// The datasets (with `--recursive`, their inputs too); `%` matches any characters.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        datasets: Vec<String>,
        /// Every dataset of the workspace.
        #[arg(short = 'a', long)]
        all: bool,
        /// The datasets' inputs too, all the way up.
        #[arg(short = 'r', long)]
        recursive: bool,
        /// Check only the stored blocks, data slices and checkpoints against their hashes; replay nothing.
        #[arg(long)]
        integrity: bool,
        /// No progress bar.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Move a dataset's head back to an earlier block (its Seed by default); the next pull computes it
    /// again from there. It keeps its id.
    Reset {
        /// The dataset.
        dataset: String,
        /// The block to go back to: its hash (or the last 8+ characters of it) or `#N` (sequence number).
        #[arg(long)]
        to: Option<String>,
        /// Also reset the datasets computed from the blocks removed (otherwise refused, exit 11).
        #[arg(long)]
        recursive: bool,
    },
    /// Give a dataset a new name; it keeps its id, chain and data, and the datasets that read it follow.
    Rename {
        /// The dataset.
        dataset: String,
        /// Its new name.
        new_name: String,
    },
    /// Remove datasets: their manifests and everything of them in storage. Asks for confirmation on a
    /// terminal; elsewhere refused without `--yes`.
    Delete {
        /// The datasets; `%` matches any characters (`readings.%`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        datasets: Vec<String>,
        /// Every dataset of the workspace.
        #[arg(short = 'a', long)]
        all: bool,
        /// Also delete the datasets that read them, all the way down (otherwise refused, exit 11).
        #[arg(short = 'r', long)]
        recursive: bool,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long, visible_alias = "force", short_alias = 'f')]
        yes: bool,
    },
    /// Engine management.
    Engine {
        /// What to do.
        #[command(subcommand)]
        command: EngineCommand,
    },
    /// Datasets with kind, head, record count and last update.
    List,
    /// Check the manifests and every stored chain.
    Validate,
    /// Where a record came from: the block that wrote it and the input records it was computed from.
    Provenance {
        /// The dataset.
        dataset: String,
        /// The record's offset.
        #[arg(long)]
        offset: u64,
    },
    /// The metadata chain of a dataset, newest block first.
    Log {
        /// The dataset.
        dataset: String,
        /// Show at most this many blocks (the newest).
        #[arg(long, default_value_t = 500)]
        limit: usize,
    },
    /// The last records of a dataset as a table.
    Tail {
        /// The dataset.
        dataset: String,
        /// How many records.
        #[arg(short = 'n', long, default_value_t = 10)]
        num_records: usize,
        /// Skip this many of the newest records first.
        #[arg(
            short = 's',
            long = "skip-records",
            visible_alias = "skip",
            default_value_t = 0
        )]
        skip_records: usize,
    },
    /// Make a new workspace in `--workspace` (default: the current folder): a `datasets/` folder and a
    /// commented `weir.yaml`.
    Init {
        /// Succeed when the folder is a workspace already (nothing is changed).
        #[arg(long)]
        exists_ok: bool,
    },
    /// A dataset's schema, queries or lineage.
    Inspect {
        /// What to show.
        #[command(subcommand)]
        command: InspectCommand,
    },
    /// The dataset graph (`--format text|dot|json`): the whole workspace, or one dataset with everything
    /// upstream and downstream of it.
    Lineage {
        /// The dataset.
        dataset: Option<String>,
    },
    /// Convert datasets written by an older Weir (before its chains were ODF's) to the current format.
    Upgrade {
        /// Say what would change for each dataset, write nothing.
        #[arg(long)]
        dry_run: bool,
        /// No progress bars.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Run the engine-contract conformance kit against an engine.
    Conformance {
        /// Engine name (as used in transforms), served by `--engine`.
        engine: String,
    },
    /// SQL over the datasets, one table per dataset (quote names with dots or dashes:
    /// `SELECT * FROM "readings.clean"`): `-c` runs statements, no `-c` opens a shell, `server` serves
    /// Arrow Flight SQL on 127.0.0.1.
    Sql {
        /// Run these statements (separated by `;`) and print their rows, instead of opening a shell.
        #[arg(short = 'c', long = "command")]
        query: Option<String>,
        /// How rows are printed (default: `json` under `--format json`, else `table`).
        #[arg(long, value_enum)]
        output_format: Option<crate::commands::sql::SqlFormat>,
        /// `server`: serve Arrow Flight SQL instead.
        #[command(subcommand)]
        server: Option<SqlCommand>,
    },
}

/// `weir inspect ...`
#[derive(Debug, Subcommand)]
pub enum InspectCommand {
    /// The dataset's schema (its latest `SetDataSchema`): each column's name and type.
    Schema {
        /// The dataset.
        dataset: String,
    },
    /// The transforms a derivative has used, oldest first: each `SetTransform` with its engine and SQL.
    Query {
        /// The dataset.
        dataset: String,
    },
    /// The dataset graph (`--format text|dot|json`): as `weir lineage`.
    Lineage {
        /// The dataset (none: the whole workspace).
        dataset: Option<String>,
    },
}

/// `weir sql ...`
#[derive(Debug, Subcommand)]
pub enum SqlCommand {
    /// Serve Arrow Flight SQL over the datasets on 127.0.0.1 (or `--address`, with authentication) until
    /// SIGINT or SIGTERM; prints its URL (`grpc://127.0.0.1:PORT`) on the first line of standard output.
    /// Every query reads the datasets' current heads.
    Server(crate::commands::sql::ServerArgs),
}

impl Command {
    /// Whether the command writes the workspace's storage, and so takes the workspace lock.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Command::Pull { .. }
                | Command::Ingest { .. }
                | Command::Reset { .. }
                | Command::Rename { .. }
                | Command::Delete { .. }
                | Command::Engine {
                    command: EngineCommand::Deprecate { .. }
                }
                | Command::Upgrade { dry_run: false, .. }
        )
    }
}

/// `weir engine ...`
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Replay history with a new engine; when every step matches, let it serve in place of the old one.
    Deprecate {
        /// The engine name whose recorded runs are replayed (e.g. `datafusion`).
        engine: String,
        /// The new engine: `embedded`, `process:<path>`, `docker:<image@digest>`, `podman:<image@digest>`
        /// (a bare `image@sha256:...` means docker).
        #[arg(long)]
        to: String,
    },
    /// Engine compatibility records.
    List,
}

/// The `--log` filter as tracing reads it: `weir` stands for Weir's own logs, whose targets are the module
/// paths of the coordinator and of the libraries it drives (`weir_cli::...`, `weir_transaction::...`,
/// `weir_engines::...`, `weir_dataset::...`, `weir_ingest::...`) and `weir::engine` (the lines engines print);
/// `weir::MODULE` names one module of them (`weir::transaction`, `weir::engine`, `weir::chain`,
/// `weir::ingest`, `weir::commands`).
///
/// ```
/// use weir_cli::cli::log_filter;
/// assert_eq!(
///     log_filter("weir=debug"),
///     "weir_cli=debug,weir_transaction=debug,weir_engines=debug,weir::engine=debug,weir_dataset=debug,weir_ingest=debug"
/// );
/// assert_eq!(log_filter("warn,weir::transaction=trace,weir_gen_stage=info"), "warn,weir_transaction=trace,weir_gen_stage=info");
/// assert_eq!(log_filter("weir::engine=debug"), "weir_engines=debug,weir::engine=debug");
/// assert_eq!(log_filter("weir::commands::pull=debug"), "weir_cli::commands::pull=debug");
/// assert_eq!(log_filter("weir::chain::store=debug"), "weir_dataset::chain::store=debug");
/// assert_eq!(log_filter("weir::ingest=debug"), "weir_ingest=debug");
/// assert_eq!(log_filter("weirdo=debug"), "weirdo=debug");
/// ```
pub fn log_filter(filter: &str) -> String {
    /// The modules of `weir-dataset`, which `weir::MODULE` reaches.
    const DATASET: &[&str] = &[
        "chain",
        "data",
        "durable",
        "fault",
        "identity",
        "progress",
        "workspace_lock",
    ];
    filter
        .split(',')
        .map(|directive| {
            let (target, rest) = directive
                .find(['=', '['])
                .map_or((directive, ""), |i| directive.split_at(i));
            let target = target.trim();
            match target.strip_prefix("weir") {
                // `weir::engine` is also the target of the lines engines print (`weir-engine-runtime`).
                Some("") => format!(
                    "weir_cli{rest},weir_transaction{rest},weir_engines{rest},weir::engine{rest},weir_dataset{rest},weir_ingest{rest}"
                ),
                Some(tail) if tail.starts_with("::") => {
                    let path = &tail[2..];
                    let module = path.split("::").next().unwrap_or_default();
                    // A library named by its module: the rest of the path is inside it.
                    let library = match module {
                        "ingest" => Some("weir_ingest"),
                        "transaction" => Some("weir_transaction"),
                        _ => None,
                    };
                    if module == "engine" {
                        let inner = &path[module.len()..];
                        format!("weir_engines{inner}{rest},weir::engine{inner}{rest}")
                    } else if let Some(library) = library {
                        format!("{library}{}{rest}", &path[module.len()..])
                    } else if DATASET.contains(&module) {
                        format!("weir_dataset::{path}{rest}")
                    } else {
                        format!("weir_cli::{path}{rest}")
                    }
                }
                _ => directive.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A JSON object given on the command line.
fn parse_json_object(text: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(_) => Err("expected a JSON object, e.g. {\"key\": \"value\"}".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}
