//! `weir sql`: SQL over the workspace's datasets, one table per dataset (`weir-sql` runs it): a query given
//! with `-c`, an interactive shell, or an Arrow Flight SQL server (`weir sql server`).
//!
//! A dataset's table reads its data slices in offset order, from the storage's own files when it is local
//! (not hashed again: `weir verify` checks them), or from checked copies staged in a scratch folder when
//! it is an object store. A dataset without data yet has no table: a query naming it is told so
//! (`weir_sql::SqlError::NoData`).
//!
//! The shell and the server read the datasets' heads again for every statement ([`Heads`], a
//! `weir_sql::TableSource`): a statement sees what was committed before it started, and nothing
//! committed while it runs.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::json;
use weir_sql::{LiveSession, OutputFormat, SqlSession, StatementSplitter, Table, Tables};

use super::Format;
use crate::commands::Output;
use crate::commands::error::CommandError;
use weir_dataset::chain::store::FileKind;
use weir_dataset::chain::store::Storage;
use weir_manifest::workspace::Workspace;
use weir_transaction::Context;

/// How `weir sql` prints rows (`--output-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SqlFormat {
    /// A text table.
    Table,
    /// A JSON array of objects, one per row.
    Json,
    /// CSV with a header line.
    Csv,
}

impl SqlFormat {
    /// The format for `--output-format` when given, else for the global `--format` (`json` gives JSON rows,
    /// anything else a table).
    pub fn for_options(global: Format, output_format: Option<SqlFormat>) -> Self {
        match (output_format, global) {
            (Some(f), _) => f,
            (None, Format::Json) => SqlFormat::Json,
            (None, _) => SqlFormat::Table,
        }
    }

    fn output(self) -> OutputFormat {
        match self {
            SqlFormat::Table => OutputFormat::Table,
            SqlFormat::Json => OutputFormat::Json,
            SqlFormat::Csv => OutputFormat::Csv,
        }
    }
}

/// `weir sql server` options.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The port (0: a free one).
    #[arg(long, default_value_t = 50050)]
    pub port: u16,
    /// The address to listen on. Anything but a loopback address needs `--users-file` or `--tokens-file`
    /// (anonymous access alone is not authentication).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub address: IpAddr,
    /// Users who log in with basic auth (the Flight handshake gives them a session token): a file of
    /// `name:password` lines (`#` starts a comment line).
    #[arg(long, value_name = "FILE")]
    pub users_file: Option<PathBuf>,
    /// Bearer tokens (`authorization: Bearer TOKEN`): a file of `TOKEN` or `NAME TOKEN` lines, each token at
    /// least 16 characters. The environment variable `WEIR_SQL_TOKEN` adds one more.
    #[arg(long, value_name = "FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Let `anonymous` log in with basic auth (password empty or `anonymous`), as kamu's clients do by
    /// default.
    #[arg(long)]
    pub allow_anonymous: bool,
    /// Serve TLS (`grpc+tls://`) with this PEM certificate chain (with `--tls-key`).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// The datasets' current tables, read from the workspace and its storage: what the shell and the server
/// ask before every statement.
///
/// The workspace's manifests are read again each time (a dataset added, renamed or deleted since shows),
/// then each dataset's head; a dataset whose head did not move keeps its file list without reading its
/// chain again. Slices of an object store are staged once into the scratch folder (named by hash).
#[derive(Debug)]
pub struct Heads {
    root: PathBuf,
    storage: Storage,
    /// Staged copies of object-store slices; created on first need, lives as long as `Heads`.
    scratch: Mutex<Option<Arc<tempfile::TempDir>>>,
    /// Per dataset: the head its files were read at, and the files.
    known: Mutex<HashMap<String, ReadAt>>,
}

/// A dataset's data files and the head they were read at (`None`: no head yet).
type ReadAt = (Option<weir_odf::Multihash>, Vec<PathBuf>);

impl Heads {
    /// Heads of the workspace of `ctx`.
    pub fn new(ctx: &Context) -> Self {
        Self {
            root: ctx.workspace.root.clone(),
            storage: ctx.storage.clone(),
            scratch: Mutex::new(None),
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The tables as they are now: one per dataset in the workspace's manifests, over the slices up to its
    /// current head.
    pub async fn tables(&self) -> Result<Tables, CommandError> {
        let workspace = Workspace::load(&self.root)?;
        self.tables_of(&workspace).await
    }

    async fn tables_of(&self, workspace: &Workspace) -> Result<Tables, CommandError> {
        let mut tables = Vec::with_capacity(workspace.datasets.len());
        let mut known_now = HashMap::with_capacity(workspace.datasets.len());
        for name in workspace.datasets.keys() {
            let store = self.storage.dataset(name);
            let head = store.head().await?;
            let cached = self.known.lock().ok().and_then(|k| {
                k.get(name)
                    .filter(|(h, _)| *h == head)
                    .map(|(_, f)| f.clone())
            });
            let files = match cached {
                Some(files) => files,
                None => {
                    let chain = store.chain_at(head).await?;
                    let mut files = Vec::new();
                    for slice in chain.data_slices() {
                        let path = match store.local_path(FileKind::Data, &slice.physical_hash) {
                            Some(path) => path,
                            None => {
                                let dir = self.scratch_dir()?;
                                let staged = dir.path().join(slice.physical_hash.to_string());
                                if staged.is_file() {
                                    staged
                                } else {
                                    store
                                        .stage_file(
                                            FileKind::Data,
                                            &slice.physical_hash,
                                            Some(slice.size),
                                            dir.path(),
                                        )
                                        .await?
                                }
                            }
                        };
                        files.push(path);
                    }
                    files
                }
            };
            known_now.insert(name.clone(), (head, files.clone()));
            // No data yet: no table (the chain's ODF schema has no Arrow form here); a query naming it is
            // told the dataset has no data yet.
            tables.push(if files.is_empty() {
                Table::empty(name.clone(), None)
            } else {
                Table::new(name.clone(), files)
            });
        }
        if let Ok(mut known) = self.known.lock() {
            *known = known_now;
        }
        Ok(tables)
    }

    fn scratch_dir(&self) -> Result<Arc<tempfile::TempDir>, CommandError> {
        let mut scratch = self
            .scratch
            .lock()
            .map_err(|_| std::io::Error::other("the scratch folder's lock is poisoned"))
            .map_err(scratch_error)?;
        if let Some(dir) = scratch.as_ref() {
            return Ok(dir.clone());
        }
        let dir = Arc::new(
            tempfile::Builder::new()
                .prefix("weir-sql-")
                .tempdir()
                .map_err(scratch_error)?,
        );
        *scratch = Some(dir.clone());
        Ok(dir)
    }

    /// A session that asks these heads before every statement.
    pub fn live(self: Arc<Self>) -> LiveSession {
        LiveSession::new(move || {
            let heads = self.clone();
            async move {
                heads
                    .tables()
                    .await
                    .map_err(|e| weir_sql::SourceError::from(error_chain(&e)))
            }
        })
    }
}

fn scratch_error(e: std::io::Error) -> CommandError {
    CommandError::from(weir_sql::SqlError::Serve {
        message: format!("cannot make a scratch folder for staged slices: {e}"),
    })
}

/// An error with its causes, one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        source = s.source();
    }
    text
}

/// `weir sql -c SQL`: runs the statements of `sql` (separated by `;`) in order on one snapshot of the
/// datasets and prints their rows. The JSON form (`--format json`) is
/// `{"results": [{"statement", "columns", "rows"}, ...]}`, one entry per statement.
pub async fn run_once(ctx: &Context, sql: &str, format: SqlFormat) -> Result<Output, CommandError> {
    let heads = Heads::new(ctx);
    let session = SqlSession::new(heads.tables_of(&ctx.workspace).await?).await?;
    let statements = weir_sql::split_statements(sql);
    if statements.is_empty() {
        return Err(weir_sql::SqlError::StatementCount { count: 0 }.into());
    }
    let mut texts = Vec::with_capacity(statements.len());
    let mut results = Vec::with_capacity(statements.len());
    for statement in &statements {
        let result = session.run(statement).await?;
        texts.push(weir_sql::format_results(
            &result.schema,
            &result.batches,
            format.output(),
        )?);
        results.push(json!({
            "statement": statement,
            "columns": columns(&result.schema),
            "rows": json_rows(&result)?,
        }));
    }
    Ok(Output {
        text: texts.join("\n"),
        json: json!({ "results": results }),
    })
}

/// `weir sql`: the shell. On a terminal: line editing and history (`~/.weir_sql_history`, or the file
/// `WEIR_SQL_HISTORY` names), statements ending with `;` over as many lines as they take, Ctrl-C cancels
/// the statement being typed or running and keeps the shell, Ctrl-D or `\q` quits, and the meta commands
/// `\d`, `\dt`, `\d TABLE`, `\?`. Standard input that is not a terminal is read line by line the same way,
/// without prompts. Every statement reads the datasets as they are when it starts.
pub async fn shell(ctx: &Context, format: SqlFormat) -> Result<Output, CommandError> {
    let heads = Arc::new(Heads::new(ctx));
    let first = SqlSession::new(heads.tables_of(&ctx.workspace).await?).await?;
    let live = heads.live();
    if std::io::stdin().is_terminal() {
        interactive(&first, &live, format).await
    } else {
        piped(&live, format).await
    }
}

/// The shell on a terminal: rustyline's line editing and history, prompts, Ctrl-C handling.
async fn interactive(
    first: &SqlSession,
    live: &LiveSession,
    format: SqlFormat,
) -> Result<Output, CommandError> {
    use rustyline::error::ReadlineError;

    let config = rustyline::Config::builder()
        .auto_add_history(false)
        .history_ignore_dups(true)
        .and_then(|b| b.max_history_size(10_000))
        .map(|b| b.build());
    let editor = config.and_then(rustyline::DefaultEditor::with_config);
    let mut editor = match editor {
        Ok(e) => e,
        Err(e) => {
            eprintln!("weir sql: no line editing on this terminal ({e}); reading plain lines");
            return piped(live, format).await;
        }
    };
    let history = history_path();
    if let Some(path) = &history
        && path.exists()
        && let Err(e) = editor.load_history(path)
    {
        eprintln!("weir sql: history {} not loaded: {e}", path.display());
    }
    // Ctrl-C while a statement runs cancels it; at the prompt rustyline reports it (the terminal is raw).
    let mut interrupts = interrupts();
    // Statements run on a runtime of their own: one that spins in a long computation cannot keep the
    // shell from answering Ctrl-C, and a cancelled one is left behind with its runtime.
    let mut queries = QueryRuntime::new()?;
    let names: Vec<&str> = first.table_names().collect();
    println!(
        "weir sql: {} table(s): {}. Statements end with `;`. \\dt lists tables, \\d TABLE describes one, \\? helps, \\q quits.",
        names.len(),
        names.join(", "),
    );
    let mut splitter = StatementSplitter::default();
    loop {
        let prompt = if splitter.is_blank() {
            "weir> "
        } else {
            "  ...> "
        };
        let (returned, line) = tokio::task::spawn_blocking(move || {
            let line = editor.readline(prompt);
            (editor, line)
        })
        .await
        .map_err(|e| weir_sql::SqlError::Serve {
            message: format!("the line editor stopped: {e}"),
        })?;
        editor = returned;
        let line = match line {
            Ok(line) => line,
            // Ctrl-C at the prompt drops the statement being typed, as in psql.
            Err(ReadlineError::Interrupted) => {
                splitter = StatementSplitter::default();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("error: reading the line: {e}");
                break;
            }
        };
        if splitter.is_blank()
            && let Some(meta) = Meta::parse(&line)
        {
            let _ = editor.add_history_entry(line.trim());
            if meta == Meta::Quit {
                break;
            }
            let live = live.clone();
            let work = queries.spawn(async move {
                run_meta(&live, &meta, format, true).await;
            });
            if cancellable(&mut interrupts, work).await {
                queries.replace()?;
            }
            continue;
        }
        for statement in splitter.push(&format!("{line}\n")) {
            let _ = editor.add_history_entry(format!("{statement};"));
            let live = live.clone();
            let work = queries.spawn(async move {
                run_statement(&live, &statement, format, true).await;
            });
            if cancellable(&mut interrupts, work).await {
                queries.replace()?;
            }
        }
    }
    if let Some(path) = &history
        && let Err(e) = editor.save_history(path)
    {
        eprintln!("weir sql: history not saved to {}: {e}", path.display());
    }
    drop(queries);
    Ok(Output {
        text: String::new(),
        json: serde_json::Value::Null,
    })
}

/// SIGINT as a channel, listened for on a thread of its own (with its own signal driver): statements that
/// keep every worker busy cannot delay it. `None` when SIGINT cannot be listened for.
fn interrupts() -> Option<tokio::sync::mpsc::UnboundedReceiver<()>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return;
            }
        };
        runtime.block_on(async move {
            let mut signal =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
            let _ = ready_tx.send(Ok(()));
            while signal.recv().await.is_some() {
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
    });
    match ready_rx.recv() {
        Ok(Ok(())) => Some(rx),
        Ok(Err(e)) => {
            eprintln!("weir sql: Ctrl-C cannot cancel statements here ({e})");
            None
        }
        Err(_) => None,
    }
}

/// The runtime statements run on, shut down in the background when dropped (a runtime must not be
/// dropped, waiting, inside another).
struct QueryRuntime(Option<tokio::runtime::Runtime>);

impl QueryRuntime {
    fn new() -> Result<Self, CommandError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name("weir-sql-query")
            .enable_all()
            .build()
            .map_err(|e| {
                CommandError::from(weir_sql::SqlError::Serve {
                    message: format!("cannot start the runtime statements run on: {e}"),
                })
            })?;
        Ok(Self(Some(runtime)))
    }

    fn spawn(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        match &self.0 {
            Some(r) => r.spawn(work),
            // Not reached: the runtime is only taken out when dropped.
            None => tokio::spawn(work),
        }
    }

    /// A fresh runtime in place of one whose statement was cancelled; the old one winds down in the
    /// background (a computation that never yields ends with the process).
    fn replace(&mut self) -> Result<(), CommandError> {
        let fresh = Self::new()?;
        *self = fresh;
        Ok(())
    }
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Waits for a statement's task until it ends or Ctrl-C (SIGINT) comes; a cancelled statement's task is
/// aborted and the shell goes on at once. Whether it was cancelled.
async fn cancellable(
    interrupts: &mut Option<tokio::sync::mpsc::UnboundedReceiver<()>>,
    mut work: tokio::task::JoinHandle<()>,
) -> bool {
    let Some(signal) = interrupts.as_mut() else {
        let _ = work.await;
        return false;
    };
    // Interrupts that came while the prompt was up (`kill -INT`) are not for this statement.
    while signal.try_recv().is_ok() {}
    tokio::select! {
        _ = &mut work => false,
        _ = signal.recv() => {
            work.abort();
            eprintln!("cancelled");
            true
        }
    }
}

/// Where the shell keeps its history: `WEIR_SQL_HISTORY`, else `~/.weir_sql_history`; none without a home.
fn history_path() -> Option<PathBuf> {
    match std::env::var_os("WEIR_SQL_HISTORY") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|home| PathBuf::from(home).join(".weir_sql_history")),
    }
}

/// The shell on standard input that is not a terminal: no prompts, no line editing.
async fn piped(live: &LiveSession, format: SqlFormat) -> Result<Output, CommandError> {
    let mut lines = stdin_lines();
    let mut splitter = StatementSplitter::default();
    while let Some(line) = lines.recv().await {
        if splitter.is_blank()
            && let Some(meta) = Meta::parse(&line)
        {
            if meta == Meta::Quit {
                break;
            }
            run_meta(live, &meta, format, false).await;
            continue;
        }
        for statement in splitter.push(&format!("{line}\n")) {
            run_statement(live, &statement, format, false).await;
        }
    }
    // The end of the input ends the last statement, `;` or not.
    if let Some(statement) = splitter.finish() {
        run_statement(live, &statement, format, false).await;
    }
    Ok(Output {
        text: String::new(),
        json: serde_json::Value::Null,
    })
}

/// A backslash command of the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Meta {
    /// `\q`, `\quit`.
    Quit,
    /// `\d`, `\dt`: the tables.
    ListTables,
    /// `\d NAME`: a table's columns.
    Describe(String),
    /// `\?`, `\h`, `help`: the commands.
    Help,
    /// Anything else starting with `\`.
    Unknown(String),
}

impl Meta {
    /// The meta command on `line`, if it is one (a line starting with `\`, or `help`, `quit`, `exit`).
    pub(crate) fn parse(line: &str) -> Option<Meta> {
        let line = line.trim().trim_end_matches(';').trim();
        match line {
            "\\q" | "\\quit" | "quit" | "exit" => return Some(Meta::Quit),
            "\\?" | "\\h" | "\\help" | "help" => return Some(Meta::Help),
            "\\d" | "\\dt" | "\\d+" | "\\dt+" => return Some(Meta::ListTables),
            _ => {}
        }
        let rest = line.strip_prefix('\\')?;
        let (command, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let argument = argument.trim();
        match command {
            "d" | "d+" if !argument.is_empty() => {
                let name = argument
                    .strip_prefix('"')
                    .and_then(|a| a.strip_suffix('"'))
                    .map(|a| a.replace("\"\"", "\""))
                    .unwrap_or_else(|| argument.to_owned());
                Some(Meta::Describe(name))
            }
            "dt" | "dt+" => Some(Meta::ListTables),
            _ => Some(Meta::Unknown(line.to_owned())),
        }
    }
}

/// What `\?` prints.
pub(crate) const HELP: &str = "\
Statements end with `;` and may span lines. Quote dataset names with dots or dashes:
  SELECT * FROM \"readings.clean\" LIMIT 10;
Meta commands (at the start of a line):
  \\d, \\dt       list the tables (datasets)
  \\d TABLE      describe a table's columns (also: DESCRIBE \"TABLE\";)
  \\?            this help
  \\q            quit (also Ctrl-D)
SQL: SHOW TABLES; SHOW COLUMNS FROM \"TABLE\"; information_schema.tables / .columns.
Ctrl-C cancels the statement being typed or running; the shell stays.";

/// Runs a meta command (not `\q`) and prints its result.
pub(crate) async fn run_meta(
    live: &LiveSession,
    meta: &Meta,
    format: SqlFormat,
    interactive: bool,
) {
    match meta {
        Meta::Quit => {}
        Meta::Help => println!("{HELP}"),
        Meta::Unknown(line) => {
            eprintln!("error: unknown command `{line}`; \\? lists the commands");
        }
        Meta::ListTables => {
            let session = match live.snapshot().await {
                Ok(s) => s,
                Err(e) => return eprintln!("error: {e}"),
            };
            run_on(
                &session,
                "SELECT table_name AS \"table\" FROM information_schema.tables \
                 WHERE table_schema = 'public' ORDER BY table_name",
                format,
                interactive,
            )
            .await;
            let empty: Vec<&str> = session.datasets_without_data().collect();
            if !empty.is_empty() {
                println!("without data yet (no table): {}", empty.join(", "));
            }
        }
        Meta::Describe(name) => {
            let session = match live.snapshot().await {
                Ok(s) => s,
                Err(e) => return eprintln!("error: {e}"),
            };
            if session.datasets_without_data().any(|d| d == name) {
                eprintln!(
                    "error: dataset `{name}` has no data yet, so it has no table (pull it first)"
                );
                return;
            }
            if !session.table_names().any(|t| t == name) {
                eprintln!("error: no table `{name}`; \\dt lists the tables");
                return;
            }
            let literal = name.replace('\'', "''");
            run_on(
                &session,
                &format!(
                    "SELECT column_name AS \"column\", data_type AS \"type\", is_nullable AS \"nullable\" \
                     FROM information_schema.columns WHERE table_schema = 'public' \
                     AND table_name = '{literal}' ORDER BY ordinal_position"
                ),
                format,
                interactive,
            )
            .await;
        }
    }
}

/// Runs one statement on a fresh snapshot of the datasets and prints its rows (or its error).
pub(crate) async fn run_statement(
    live: &LiveSession,
    statement: &str,
    format: SqlFormat,
    interactive: bool,
) {
    match live.snapshot().await {
        Ok(session) => run_on(&session, statement, format, interactive).await,
        Err(e) => eprintln!("error: {e}"),
    }
}

async fn run_on(session: &SqlSession, statement: &str, format: SqlFormat, interactive: bool) {
    let shown = session.run(statement).await.and_then(|result| {
        let text = weir_sql::format_results(&result.schema, &result.batches, format.output())?;
        Ok(if interactive && format == SqlFormat::Table {
            let n = result.num_rows();
            format!("{text}\n({n} row{})", if n == 1 { "" } else { "s" })
        } else {
            text
        })
    });
    match shown {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
        Err(e) => eprintln!("error: {e}"),
    }
}

/// Standard input's lines, read on a thread of their own: a read blocked on a terminal must not keep the
/// runtime from shutting down when a signal stops `weir`.
fn stdin_lines() -> tokio::sync::mpsc::Receiver<String> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The server's authentication and TLS from its options (files read now; a bad one is an error naming it).
pub fn serve_options(args: &ServerArgs) -> Result<weir_sql::ServeOptions, CommandError> {
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).map_err(|e| {
            CommandError::from(weir_sql::SqlError::Config {
                message: format!("cannot read {}: {e}", path.display()),
            })
        })
    };
    let mut auth = weir_sql::Auth::none().allowing_anonymous(args.allow_anonymous);
    if let Some(path) = &args.users_file {
        auth = auth.with_users_file(&read(path)?, &path.display().to_string())?;
    }
    if let Some(path) = &args.tokens_file {
        auth = auth.with_tokens_file(&read(path)?, &path.display().to_string())?;
    }
    if let Ok(token) = std::env::var("WEIR_SQL_TOKEN")
        && !token.trim().is_empty()
    {
        auth = auth.with_tokens_file(
            &format!("WEIR_SQL_TOKEN {}", token.trim()),
            "WEIR_SQL_TOKEN",
        )?;
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(weir_sql::Tls::from_files(cert, key)?),
        _ => None,
    };
    Ok(weir_sql::ServeOptions { auth, tls })
}

/// `weir sql server`: serves Arrow Flight SQL over the datasets on `--address` (127.0.0.1) and `--port`
/// (`0`: a free port) until SIGINT or SIGTERM. Prints the URL, `grpc://ADDRESS:PORT` (`grpc+tls://` with
/// TLS), alone on the first line of standard output as soon as it listens. Every statement reads the
/// datasets' current heads.
pub async fn server(ctx: &Context, args: &ServerArgs) -> Result<Output, CommandError> {
    server_until(ctx, args, stop_signal()).await
}

/// [`server`], serving until `shutdown` completes.
pub async fn server_until(
    ctx: &Context,
    args: &ServerArgs,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<Output, CommandError> {
    let options = serve_options(args)?;
    let heads = Arc::new(Heads::new(ctx));
    // Read once before listening: a workspace whose heads cannot be read fails now, not per query.
    let tables = heads.tables_of(&ctx.workspace).await?;
    let count = tables.iter().filter(|t| !t.files.is_empty()).count();
    let live = heads.live();
    let listener = weir_sql::bind(SocketAddr::new(args.address, args.port), &options.auth).await?;
    let addr = listener
        .local_addr()
        .map_err(|e| weir_sql::SqlError::Serve {
            message: format!("the listener has no address: {e}"),
        })?;
    let scheme = if options.tls.is_some() {
        "grpc+tls"
    } else {
        "grpc"
    };
    let url = format!("{scheme}://{addr}");
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{url}");
        let _ = out.flush();
    }
    let auth = &options.auth;
    let access = match (auth.has_credentials(), auth.is_enabled()) {
        (true, _) => "authentication required",
        (false, true) => "anonymous login required",
        (false, false) => "no authentication (loopback only)",
    };
    eprintln!(
        "weir sql server: Arrow Flight SQL on {url} over {count} table(s), {access}; every query reads the datasets' current heads; SIGINT or SIGTERM stops it"
    );
    weir_sql::serve_flight_sql(live, listener, options, shutdown).await?;
    Ok(Output {
        text: String::new(),
        json: json!({ "url": url, "stopped": true }),
    })
}

/// Completes on SIGINT or SIGTERM (never, when they cannot be listened for). The signals are listened for
/// from the call on, before the future is first polled: a signal that comes right after the URL is printed
/// stops the server cleanly instead of killing it.
fn stop_signal() -> impl std::future::Future<Output = ()> + Send {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        match signals {
            (Ok(mut interrupt), Ok(mut terminate)) => {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            }
            _ => std::future::pending().await,
        }
    }
}

fn columns(schema: &weir_sql::arrow::datatypes::SchemaRef) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

/// Rows as JSON objects (weir-sql's JSON rows, parsed back into values).
fn json_rows(result: &weir_sql::QueryResult) -> Result<serde_json::Value, CommandError> {
    let text = weir_sql::format_results(&result.schema, &result.batches, OutputFormat::Json)?;
    serde_json::from_str(&text).map_err(|e| {
        CommandError::from(weir_sql::SqlError::Format {
            format: "json",
            source: weir_sql::arrow::error::ArrowError::JsonError(e.to_string()),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_format_wins_over_the_global_format_which_gives_json_rows_or_a_table() {
        assert_eq!(
            SqlFormat::for_options(Format::Json, Some(SqlFormat::Csv)),
            SqlFormat::Csv
        );
        assert_eq!(SqlFormat::for_options(Format::Json, None), SqlFormat::Json);
        assert_eq!(SqlFormat::for_options(Format::Text, None), SqlFormat::Table);
        assert_eq!(SqlFormat::for_options(Format::Dot, None), SqlFormat::Table);
    }

    #[test]
    fn meta_commands_are_recognised_with_their_arguments() {
        assert_eq!(Meta::parse("\\q"), Some(Meta::Quit));
        assert_eq!(Meta::parse("  \\dt  "), Some(Meta::ListTables));
        assert_eq!(Meta::parse("\\d"), Some(Meta::ListTables));
        assert_eq!(
            Meta::parse("\\d \"readings.clean\""),
            Some(Meta::Describe("readings.clean".into()))
        );
        assert_eq!(
            Meta::parse("\\d stations"),
            Some(Meta::Describe("stations".into()))
        );
        assert_eq!(Meta::parse("\\x"), Some(Meta::Unknown("\\x".into())));
        assert_eq!(Meta::parse("SELECT 1;"), None);
    }
}
