//! `weir`: the Weir coordinator binary. See `weir --help` and coordinator/README.md.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use coordinator::cli::{Cli, Command, EngineCommand, SqlCommand};
use coordinator::commands::Format;
use coordinator::commands::error::CommandError;
use coordinator::commands::sql::SqlFormat;
use coordinator::commands::{self, Output};
use coordinator::exit;
use coordinator::scratch::ScratchRoot;
use tracing_subscriber::EnvFilter;
use weir_dataset::workspace_lock::WorkspaceLock;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.format == Format::Dot && !matches!(cli.command, Command::Lineage { .. }) {
        use clap::CommandFactory as _;
        Cli::command()
            .error(
                clap::error::ErrorKind::InvalidValue,
                "`--format dot` is only for `weir lineage`; use text or json",
            )
            .exit();
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
            "warn,reference_engine=off,engine_contract=off".into()
        }
        (_, log) => coordinator::cli::log_filter(log),
    };
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    // Planning a query recurses over its expression tree: the embedded engine bounds the depth
    // (reference_engine::check_query_depth), and its worker and blocking threads get stacks deep enough
    // for any query within that bound.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(64 << 20)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let ended = runtime.block_on(async {
        // `weir sql server` stops itself on SIGINT / SIGTERM, letting calls under way finish; the `weir sql`
        // shell on a terminal takes Ctrl-C to cancel a statement, not to stop.
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
        tokio::select! {
            result = run(&cli) => Ended::Finished(result),
            signal = stop_signal() => Ended::Signalled(signal),
        }
    });
    let code = match ended {
        Ended::Finished(Ok(out)) => {
            let text = out.render(cli.format);
            let null_json = cli.format == Format::Json && out.json.is_null();
            if !(text.is_empty() || null_json) {
                // A closed pipe (`weir log x | head`) is not an error worth a panic.
                use std::io::Write;
                let _ = writeln!(std::io::stdout(), "{text}");
            }
            exit::OK
        }
        Ended::Finished(Err(e)) => {
            report(&e, cli.format);
            e.exit_code()
        }
        Ended::Signalled((name, code)) => {
            eprintln!(
                "weir: stopped by {name}: transactions in flight were abandoned and their datasets keep their previous head; stopping engines and removing scratch folders"
            );
            // Engines first: every engine process is killed and every container removed (and no new one
            // starts); then dropping every task drops its operations and staging folders.
            let stopped = runtime.block_on(engine_runtime::shutdown());
            for (container, error) in &stopped.failures {
                eprintln!(
                    "weir: container {container} not removed ({error}); the next weir removes it"
                );
            }
            runtime.shutdown_timeout(Duration::from_secs(10));
            engine_runtime::wait_for_removals(Duration::from_secs(15));
            code
        }
    };
    drop(scratch);
    ExitCode::from(code)
}

/// How the command ended.
enum Ended {
    Finished(Result<Output, CommandError>),
    Signalled((&'static str, u8)),
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
    let summary = match e {
        CommandError::PullFailed { summary, .. } => Some(summary),
        _ => None,
    };
    if format == Format::Json {
        let mut v = serde_json::json!({ "error": chain[0], "causes": &chain[1..], "hint": e.hint(), "exitCode": e.exit_code() });
        // A failed pull stays one structured document: every dataset's outcome beside the error.
        if let (Some(s), Some(fields)) = (summary, v.as_object_mut())
            && let Some(more) = s.json.as_object()
        {
            for (k, val) in more {
                fields.insert(k.clone(), val.clone());
            }
        }
        eprintln!("{v}");
        return;
    }
    if let Some(s) = summary {
        eprintln!("{}", s.text);
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
    let ctx = commands::open(&cli.workspace, cli.engine_runtime, deadline)?;
    match &cli.command {
        Command::Pull {
            all,
            datasets,
            dispatcher_plugin,
            dispatcher_plugin_options,
            max_concurrency,
            quiet,
            recompute,
            ..
        } => {
            let opts = commands::pull::PullOptions {
                all: *all,
                datasets: datasets.clone(),
                max_concurrency: *max_concurrency,
                dispatcher_plugin: dispatcher_plugin.clone(),
                dispatcher_plugin_options: dispatcher_plugin_options.clone().unwrap_or_default(),
                quiet: *quiet || cli.format == Format::Json,
                recompute: *recompute,
            };
            commands::pull::run(&ctx, &opts).await
        }
        Command::Verify {
            datasets,
            all,
            recursive,
        } => commands::verify::run_many(&ctx, datasets, *all, *recursive).await,
        Command::Reset {
            dataset,
            to,
            recursive,
        } => commands::reset::run(&ctx, dataset, to.as_deref(), *recursive).await,
        Command::Rename { dataset, new_name } => {
            commands::rename::run(&ctx, dataset, new_name).await
        }
        Command::Delete { dataset, recursive } => {
            commands::delete::run(&ctx, dataset, *recursive).await
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
        Command::Log { dataset } => commands::log::run(&ctx, dataset).await,
        Command::Tail {
            dataset,
            num_records,
        } => commands::tail::run(&ctx, dataset, *num_records).await,
        Command::Lineage { dataset } => {
            commands::lineage::run(&ctx, dataset.as_deref(), cli.format)
        }
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
