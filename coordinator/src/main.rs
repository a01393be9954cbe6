//! `weir`: the Weir coordinator binary. See `weir --help` and coordinator/README.md.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use weir_cli::cli::{Cli, Command, EngineCommand, InspectCommand, SqlCommand};
use weir_cli::commands::Format;
use weir_cli::commands::error::CommandError;
use weir_cli::commands::sql::SqlFormat;
use weir_cli::commands::{self, Output};
use weir_cli::exit;
use weir_cli::scratch::ScratchRoot;
use weir_dataset::workspace_lock::WorkspaceLock;

fn main() -> ExitCode {
    // Known before the command line parses, so that a bad command line is a JSON document too.
    let json = json_requested(std::env::args_os());
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, json),
    };
    let draws_a_graph = matches!(
        cli.command,
        Command::Lineage { .. }
            | Command::Inspect {
                command: InspectCommand::Lineage { .. }
            }
    );
    if cli.format == Format::Dot && !draws_a_graph {
        use clap::CommandFactory as _;
        return usage_error(
            Cli::command().error(
                clap::error::ErrorKind::InvalidValue,
                "`--format dot` is only for `weir lineage`; use text or json",
            ),
            json,
        );
    }
    // Before any thread exists: this process's scratch folder, where TMPDIR points from now on.
    let scratch = match ScratchRoot::create_in(&std::env::temp_dir()) {
        Ok(s) => {
            // SAFETY: no other thread runs yet (the tracing subscriber and the async runtime start
            // below), so nothing reads the environment while it changes.
            unsafe { std::env::set_var("TMPDIR", s.path()) };
            Some(s)
        }
        Err(e) => {
            eprintln!(
                "weir: warning: cannot make a scratch folder in {}: {e}",
                std::env::temp_dir().display()
            );
            None
        }
    };
    // `weir conformance` sends an engine bad requests on purpose: the embedded engine's and its server's
    // complaints about them are the checks' expected answers, not problems (`--log` still shows them).
    let filter = match (&cli.command, cli.log.as_str()) {
        (Command::Conformance { .. }, "warn") => {
            "warn,weir_reference_engine=off,weir_engine_contract=off".into()
        }
        (_, log) => weir_cli::cli::log_filter(log),
    };
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    // Planning a query recurses over its expression tree: the embedded engine bounds the depth
    // (weir_reference_engine::check_query_depth), and its worker and blocking threads get stacks deep enough
    // for any query within that bound.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(64 << 20)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            report_plain(
                &format!("cannot start the async runtime: {e}"),
                None,
                exit::FAILURE,
                cli.format,
            );
            return ExitCode::from(exit::FAILURE);
        }
    };
    // A panic is a bug; it still ends as a failure the caller can read (one JSON document under
    // `--format json`), after the panic hook printed its message to stderr.
    let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            // `weir sql server` stops itself on SIGINT / SIGTERM, letting calls under way finish; the `weir
            // sql` shell on a terminal takes Ctrl-C to cancel a statement, not to stop.
            let sql_shell = matches!(
                cli.command,
                Command::Sql {
                    query: None,
                    server: None,
                    ..
                }
            ) && std::io::IsTerminal::is_terminal(&std::io::stdin());
            if sql_shell
                || matches!(
                    cli.command,
                    Command::Sql {
                        server: Some(_),
                        ..
                    }
                )
            {
                return Ended::Finished(run(&cli).await);
            }
            // A signal stops engine starts and engine binary hashing at once, on a worker thread, even while
            // the command's own thread is busy hashing; the select below then finishes the shutdown.
            tokio::spawn(async {
                let signal = stop_signal().await;
                let _ = SIGNALLED.set(signal);
                weir_engine_runtime::begin_shutdown();
            });
            let ended = tokio::select! {
                biased;
                signal = stop_signal() => Ended::Signalled(signal),
                result = run(&cli) => Ended::Finished(result),
            };
            // A command that failed because a signal interrupted it (its engine binary's hashing, say) was
            // stopped by that signal.
            match (ended, SIGNALLED.get()) {
                (Ended::Finished(Err(_)), Some(signal)) => Ended::Signalled(*signal),
                (ended, _) => ended,
            }
        })
    }))
    .unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Ended::Panicked(what)
    });
    let code = match ended {
        Ended::Panicked(what) => {
            report_plain(
                &format!("weir failed unexpectedly (a bug): it panicked: {what}"),
                Some(
                    "please report it with the command that failed; `--log weir=debug` shows what led to it",
                ),
                exit::FAILURE,
                cli.format,
            );
            exit::FAILURE
        }
        Ended::Finished(Ok(out)) => {
            let text = out.render(cli.format);
            let null_json = cli.format == Format::Json && out.json.is_null();
            if !(text.is_empty() || null_json) {
                print_stdout(&text);
            }
            exit::OK
        }
        Ended::Finished(Err(e)) => {
            report(&e, cli.format);
            e.exit_code()
        }
        Ended::Signalled((name, code)) => {
            let message = format!(
                "stopped by {name}: transactions in flight were abandoned and their datasets keep their previous head; stopping engines and removing scratch folders"
            );
            match cli.format {
                Format::Json => report_plain(&message, None, code, cli.format),
                _ => eprintln!("weir: {message}"),
            }
            // Engines first: every engine process is killed and every container removed (and no new one
            // starts); then dropping every task drops its operations and staging folders.
            let stopped = runtime.block_on(weir_engine_runtime::shutdown());
            for (container, error) in &stopped.failures {
                eprintln!(
                    "weir: container {container} not removed ({error}); the next weir removes it"
                );
            }
            runtime.shutdown_timeout(Duration::from_secs(10));
            weir_engine_runtime::wait_for_removals(Duration::from_secs(15));
            code
        }
    };
    drop(scratch);
    ExitCode::from(code)
}

/// The stop signal, once one arrived.
static SIGNALLED: std::sync::OnceLock<(&'static str, u8)> = std::sync::OnceLock::new();

/// How the command ended.
enum Ended {
    Finished(Result<Output, CommandError>),
    Signalled((&'static str, u8)),
    /// A panic on the main thread (a bug), with its message.
    Panicked(String),
}

/// Completes on SIGTERM or SIGINT with the signal's name and the exit code for it.
async fn stop_signal() -> (&'static str, u8) {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut terminate), Ok(mut interrupt)) => tokio::select! {
            _ = terminate.recv() => ("SIGTERM", exit::TERMINATED),
            _ = interrupt.recv() => ("SIGINT", exit::INTERRUPTED),
        },
        _ => {
            tracing::warn!(
                "cannot listen for SIGTERM / SIGINT; they stop weir without cleaning up"
            );
            std::future::pending().await
        }
    }
}

/// Whether the raw command line asks for `--format json`: read before clap parses it, so that a command line
/// clap refuses is answered in JSON too.
fn json_requested(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    let mut previous_was_format = false;
    for arg in args {
        let arg = arg.to_string_lossy();
        if arg == "--" {
            break;
        }
        if (previous_was_format && arg == "json") || arg == "--format=json" {
            return true;
        }
        previous_was_format = arg == "--format";
    }
    false
}

/// A command line clap refused (exit 2), or `--help` / `--version` (printed as clap prints them). Under
/// `--format json` a refusal is one JSON document on stdout: clap's message, its tip as the hint and the
/// usage line.
fn usage_error(e: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind;
    let informational = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if !json || informational {
        e.exit();
    }
    let rendered = e.render().to_string();
    let mut message = None;
    let mut tips = Vec::new();
    let mut usage = None;
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(m) = line.strip_prefix("error: ") {
            message.get_or_insert_with(|| m.to_string());
        } else if let Some(t) = line.strip_prefix("tip: ") {
            tips.push(t.to_string());
        } else if let Some(u) = line.strip_prefix("Usage: ") {
            usage.get_or_insert_with(|| u.to_string());
        } else if message.is_none() {
            // Help shown for a missing subcommand: the usage is what there is to say.
            message = Some(line.to_string());
        }
    }
    let hint = if tips.is_empty() {
        "`weir --help` (or `weir COMMAND --help`) shows the commands and their options".to_string()
    } else {
        tips.join("; ")
    };
    let doc = serde_json::json!({
        "error": message.unwrap_or_else(|| rendered.trim().to_string()),
        "causes": [],
        "hint": hint,
        "exitCode": exit::USAGE,
        "usage": usage,
    });
    print_stdout(&doc.to_string());
    ExitCode::from(exit::USAGE)
}

/// Writes `text` and a newline to stdout; a closed pipe (`weir log x | head`) is not an error worth a panic.
fn print_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// An error that is not a [`CommandError`]: text on stderr, or under `--format json` one document on stdout.
fn report_plain(message: &str, hint: Option<&str>, code: u8, format: Format) {
    if format == Format::Json {
        let doc =
            serde_json::json!({ "error": message, "causes": [], "hint": hint, "exitCode": code });
        print_stdout(&doc.to_string());
        return;
    }
    eprintln!("error: {message}");
    if let Some(h) = hint {
        eprintln!("  hint: {h}");
    }
}

/// How a command failed. Under `--format json`: one JSON document on stdout, `{"error", "causes", "hint",
/// "exitCode"}`, with the report of what the command did before it failed beside it (a pull's datasets).
/// As text: that report on stdout, the error, its causes and the hint on stderr.
fn report(e: &CommandError, format: Format) {
    let mut chain = vec![e.to_string()];
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let t = s.to_string();
        if !chain.iter().any(|c| c.contains(&t)) {
            chain.push(t);
        }
        src = s.source();
    }
    let summary = e.partial_output();
    // Each dataset a pull failed is a cause of its own: `weir pull > report.txt` still says why on stderr.
    if let Some(items) = summary.and_then(|s| s.json["datasets"].as_array()) {
        for item in items.iter().filter(|i| i["state"] == "failed") {
            if let (Some(name), Some(error)) = (item["dataset"].as_str(), item["error"].as_str()) {
                chain.push(format!("{name}: {error}"));
            }
        }
    }
    if format == Format::Json {
        let mut v = serde_json::json!({ "error": chain[0], "causes": &chain[1..], "hint": e.hint(), "exitCode": e.exit_code() });
        // A failed pull stays one structured document: every dataset's outcome beside the error.
        if let (Some(s), Some(fields)) = (summary, v.as_object_mut())
            && let Some(more) = s.json.as_object()
        {
            for (k, val) in more {
                fields.entry(k.clone()).or_insert_with(|| val.clone());
            }
        }
        print_stdout(&serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string()));
        return;
    }
    if let Some(s) = summary {
        print_stdout(&s.text);
    }
    eprintln!("error: {}", chain[0]);
    for c in &chain[1..] {
        eprintln!("  caused by: {c}");
    }
    if let Some(h) = e.hint() {
        eprintln!("  hint: {h}");
    }
}

async fn run(cli: &Cli) -> Result<Output, CommandError> {
    let deadline = match &cli.command {
        Command::Pull { deadline_secs, .. } => Duration::from_secs(*deadline_secs),
        // A new workspace has nothing to lock or read yet.
        Command::Init { exists_ok } => return commands::init::run(&cli.workspace, *exists_ok),
        _ => Duration::from_secs(600),
    };
    // The lock first, then anything the command reads: manifests and heads read before the lock could be
    // stale by the time it is ours (a rename or delete queued ahead of this command).
    let (root, storage) = commands::open_storage(&cli.workspace)?;
    let lock_path = WorkspaceLock::path_for(&storage, &root);
    let _lock = if cli.command.writes() {
        Some(if cli.wait_lock {
            WorkspaceLock::acquire_waiting(&lock_path).await?
        } else {
            WorkspaceLock::try_acquire(&lock_path)?
        })
    } else {
        None
    };
    if _lock.is_some() {
        // The lock is ours: what a killed writer left half-written is nobody's.
        storage.remove_stale_temporaries();
    }
    // An operation a killed command began (rename, delete, reset) is completed before anything else; a
    // reader takes the lock for that moment.
    let journal = commands::intent::Journal::for_workspace(&storage, &root);
    if journal.pending()?.is_some() {
        let _held = match &_lock {
            Some(_) => None,
            None => Some(WorkspaceLock::try_acquire(&lock_path)?),
        };
        if let Some(done) = journal.recover(&storage).await? {
            eprintln!(
                "weir: completed the interrupted {} before this command",
                done.describe()
            );
        }
    }
    let ctx = commands::open(&cli.workspace, cli.engine_runtime.into(), deadline)?;
    match &cli.command {
        Command::Pull {
            all,
            recursive,
            datasets,
            dispatcher_plugin,
            dispatcher_plugin_options,
            max_concurrency,
            quiet,
            recompute,
            settle_secs,
            ..
        } => {
            let opts = commands::pull::PullOptions {
                all: *all,
                recursive: *recursive,
                datasets: datasets.clone(),
                max_concurrency: *max_concurrency,
                dispatcher_plugin: dispatcher_plugin.clone(),
                dispatcher_plugin_options: dispatcher_plugin_options.clone().unwrap_or_default(),
                quiet: *quiet || cli.format == Format::Json,
                recompute: *recompute,
                settle: settle_secs.map(Duration::from_secs),
            };
            commands::pull::run(&ctx, &opts).await
        }
        Command::Ingest {
            dataset,
            file,
            source_name,
            input_format,
            quiet,
            again,
        } => {
            let opts = commands::ingest::IngestOptions {
                dataset: dataset.clone(),
                file: file.clone(),
                source_name: source_name.clone(),
                input_format: *input_format,
                quiet: *quiet || cli.format == Format::Json,
                again: *again,
            };
            commands::ingest::run(&ctx, &opts).await
        }
        Command::Verify {
            datasets,
            all,
            recursive,
            integrity,
            quiet,
        } => {
            let opts = commands::verify::VerifyOptions {
                all: *all,
                recursive: *recursive,
                integrity_only: *integrity,
                quiet: *quiet || cli.format == Format::Json,
            };
            commands::verify::run_many(&ctx, datasets, &opts).await
        }
        Command::Reset {
            dataset,
            to,
            recursive,
        } => commands::reset::run(&ctx, dataset, to.as_deref(), *recursive).await,
        Command::Rename { dataset, new_name } => {
            commands::rename::run(&ctx, dataset, new_name).await
        }
        Command::Delete {
            datasets,
            all,
            recursive,
            yes,
        } => {
            let opts = commands::delete::DeleteOptions {
                all: *all,
                recursive: *recursive,
                yes: *yes,
            };
            commands::delete::run(&ctx, datasets, &opts).await
        }
        Command::Engine {
            command: EngineCommand::Deprecate { engine, to },
        } => commands::deprecate::run(&ctx, engine, to).await,
        Command::Engine {
            command: EngineCommand::List,
        } => commands::deprecate::list(&ctx).await,
        Command::List => commands::list::run(&ctx).await,
        Command::Validate => commands::validate::run(&ctx).await,
        Command::Provenance { dataset, offset } => {
            commands::provenance::run(&ctx, dataset, *offset).await
        }
        Command::Log { dataset, limit } => commands::log::run(&ctx, dataset, *limit).await,
        Command::Tail {
            dataset,
            num_records,
            skip_records,
        } => commands::tail::run(&ctx, dataset, *num_records, *skip_records).await,
        Command::Lineage { dataset }
        | Command::Inspect {
            command: InspectCommand::Lineage { dataset },
        } => commands::lineage::run(&ctx, dataset.as_deref(), cli.format),
        Command::Inspect {
            command: InspectCommand::Schema { dataset },
        } => commands::inspect::schema(&ctx, dataset).await,
        Command::Inspect {
            command: InspectCommand::Query { dataset },
        } => commands::inspect::query(&ctx, dataset).await,
        Command::Init { exists_ok } => commands::init::run(&cli.workspace, *exists_ok),
        Command::Upgrade { dry_run, quiet } => {
            let opts = commands::upgrade::UpgradeOptions {
                dry_run: *dry_run,
                quiet: *quiet || cli.format == Format::Json,
            };
            commands::upgrade::run(&ctx, &opts).await
        }
        Command::Conformance { engine } => commands::conformance::run(&ctx, engine).await,
        Command::Sql {
            server: Some(SqlCommand::Server(args)),
            ..
        } => commands::sql::server(&ctx, args).await,
        Command::Sql {
            query: Some(sql),
            output_format,
            ..
        } => {
            let format = SqlFormat::for_options(cli.format, *output_format);
            commands::sql::run_once(&ctx, sql, format).await
        }
        Command::Sql { output_format, .. } => {
            let format = SqlFormat::for_options(cli.format, *output_format);
            commands::sql::shell(&ctx, format).await
        }
    }
}
