//! `weir sql`: SQL over the workspace's datasets, one table per dataset (`weir-sql` runs it): a query given
//! with `-c`, an interactive shell, or an Arrow Flight SQL server (`weir sql server`).
//!
//! A dataset's table reads its data slices in offset order, from the storage's own files when it is local
//! (not hashed again: `weir verify` checks them), or from checked copies staged in a scratch folder when
//! it is an object store. A dataset without data yet has no table: a query naming it is told so
//! (`weir_sql::SqlError::NoData`).

use std::io::{IsTerminal, Write};

use serde_json::json;
use weir_sql::{OutputFormat, SqlSession, StatementSplitter, Table};

use super::Format;
use crate::commands::Output;
use crate::commands::error::CommandError;
use crate::transaction::Context;
use weir_dataset::chain::store::FileKind;

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

/// The tables of the workspace's datasets, and the scratch folder holding staged copies of their slices
/// (object-store storage only; it must outlive the session).
pub async fn open_session(
    ctx: &Context,
) -> Result<(SqlSession, Option<tempfile::TempDir>), CommandError> {
    let mut tables = Vec::with_capacity(ctx.workspace.datasets.len());
    let mut scratch: Option<tempfile::TempDir> = None;
    for name in ctx.workspace.datasets.keys() {
        let store = ctx.storage.dataset(name);
        let chain = store.chain().await?;
        let mut files = Vec::new();
        for slice in chain.data_slices() {
            let path = match store.local_path(FileKind::Data, &slice.physical_hash) {
                Some(path) => path,
                None => {
                    let dir = match scratch.take() {
                        Some(dir) => dir,
                        None => ctx.scratch("sql")?,
                    };
                    let staged = store
                        .stage_file(
                            FileKind::Data,
                            &slice.physical_hash,
                            Some(slice.size),
                            dir.path(),
                        )
                        .await?;
                    scratch = Some(dir);
                    staged
                }
            };
            files.push(path);
        }
        // No data yet: no table (the chain's ODF schema has no Arrow form here); a query naming it is told
        // the dataset has no data yet.
        tables.push(if files.is_empty() {
            Table::empty(name.clone(), None)
        } else {
            Table::new(name.clone(), files)
        });
    }
    let session = SqlSession::new(tables).await?;
    Ok((session, scratch))
}

/// `weir sql -c SQL`: runs the statements of `sql` (separated by `;`) in order and prints their rows.
/// The JSON form (`--format json`) is `{"results": [{"statement", "columns", "rows"}, ...]}`, one entry per
/// statement.
pub async fn run_once(ctx: &Context, sql: &str, format: SqlFormat) -> Result<Output, CommandError> {
    let (session, _scratch) = open_session(ctx).await?;
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

/// `weir sql`: an interactive shell on standard input. Statements end with `;` (they may span lines);
/// `\q` or the end of the input quits; an error is printed and the shell goes on. The prompt `weir> `
/// (`  ...> ` inside a statement) shows only when standard input is a terminal.
pub async fn shell(ctx: &Context, format: SqlFormat) -> Result<Output, CommandError> {
    let (session, _scratch) = open_session(ctx).await?;
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        let names: Vec<&str> = session.table_names().collect();
        println!(
            "weir sql: {} table(s): {}. Quote names with dots or dashes: SELECT * FROM \"{}\"; \\q quits.",
            names.len(),
            names.join(", "),
            names.first().copied().unwrap_or("dataset.name"),
        );
    }
    let mut lines = stdin_lines();
    let mut splitter = StatementSplitter::default();
    loop {
        if interactive {
            print!(
                "{}",
                if splitter.is_blank() {
                    "weir> "
                } else {
                    "  ...> "
                }
            );
            let _ = std::io::stdout().flush();
        }
        let Some(line) = lines.recv().await else {
            break;
        };
        if splitter.is_blank() && matches!(line.trim(), "\\q" | "\\quit") {
            break;
        }
        for statement in splitter.push(&format!("{line}\n")) {
            run_in_shell(&session, &statement, format, interactive).await;
        }
    }
    // The end of the input ends the last statement, `;` or not.
    if let Some(statement) = splitter.finish() {
        run_in_shell(&session, &statement, format, interactive).await;
    }
    Ok(Output {
        text: String::new(),
        json: serde_json::Value::Null,
    })
}

async fn run_in_shell(session: &SqlSession, statement: &str, format: SqlFormat, interactive: bool) {
    let shown = session.run(statement).await.and_then(|result| {
        let text = weir_sql::format_results(&result.schema, &result.batches, format.output())?;
        Ok(if interactive && format == SqlFormat::Table {
            format!("{text}\n({} rows)", result.num_rows())
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

/// `weir sql server --port P`: serves Arrow Flight SQL over the datasets on `127.0.0.1:P` (`0`: a free
/// port) until SIGINT or SIGTERM. Prints the URL, `grpc://127.0.0.1:PORT`, alone on the first line of
/// standard output as soon as it listens.
pub async fn server(ctx: &Context, port: u16) -> Result<Output, CommandError> {
    server_until(ctx, port, stop_signal()).await
}

/// [`server`], serving until `shutdown` completes.
pub async fn server_until(
    ctx: &Context,
    port: u16,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<Output, CommandError> {
    let (session, _scratch) = open_session(ctx).await?;
    let listener = weir_sql::bind_loopback(port).await?;
    let addr = listener
        .local_addr()
        .map_err(|e| weir_sql::SqlError::Serve {
            message: format!("the listener has no address: {e}"),
        })?;
    let url = format!("grpc://{addr}");
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{url}");
        let _ = out.flush();
    }
    eprintln!(
        "weir sql server: Arrow Flight SQL on {url} over {} table(s); SIGINT or SIGTERM stops it",
        session.table_names().count()
    );
    weir_sql::serve_flight_sql(session, listener, shutdown).await?;
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
}
