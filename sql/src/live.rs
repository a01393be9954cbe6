//! Sessions that follow the datasets: every statement reads the tables as they are when it starts.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;

use crate::error::SqlError;
use crate::session::SqlSession;
use crate::tables::Tables;

/// The error a [`TableSource`] fails with: whatever went wrong reading the datasets' heads.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed future of the tables, as a [`TableSource`] returns them.
pub type TablesFuture<'a> = Pin<Box<dyn Future<Output = Result<Tables, SourceError>> + Send + 'a>>;

/// Where a [`LiveSession`] gets its tables: asked once per statement for the datasets as they are now (each
/// dataset's slices up to its current head).
///
/// The caller (the `weir` CLI) resolves heads; this crate knows nothing of chains. A closure returning a
/// future of [`Tables`] is a source:
///
/// ```
/// use weir_sql::{LiveSession, SourceError, Table, Tables};
///
/// let session = LiveSession::new(|| async { Ok::<Tables, SourceError>(vec![Table::empty("t", None)]) });
/// # let _ = session;
/// ```
pub trait TableSource: Send + Sync + 'static {
    /// The tables as they are now.
    fn tables(&self) -> TablesFuture<'_>;
}

impl<F, Fut> TableSource for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Tables, SourceError>> + Send + 'static,
{
    fn tables(&self) -> TablesFuture<'_> {
        Box::pin(self())
    }
}

/// A table opened before: reused while the dataset's files are the same.
#[derive(Clone)]
pub(crate) struct OpenedTable {
    pub(crate) files: Vec<PathBuf>,
    pub(crate) schema: Option<SchemaRef>,
    pub(crate) provider: Arc<dyn TableProvider>,
}

/// Tables opened by earlier snapshots, by name.
pub(crate) type OpenedTables = HashMap<String, OpenedTable>;

/// A read-only SQL session over datasets that change: each [`snapshot`](Self::snapshot) asks the
/// [`TableSource`] for the datasets' current heads and gives a [`SqlSession`] over exactly those files.
///
/// A statement runs on one snapshot, so it reads one consistent state of every dataset it names, however
/// long it runs; the next statement's snapshot sees what was committed since. A dataset whose files did not
/// change keeps its opened table (its Parquet footers are not read again); slices are content-addressed, so
/// the same file list is the same data.
///
/// Cheap to clone (clones share the source and the opened tables).
#[derive(Clone)]
pub struct LiveSession {
    source: Arc<dyn TableSource>,
    opened: Arc<Mutex<OpenedTables>>,
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSession").finish_non_exhaustive()
    }
}

impl LiveSession {
    /// A session over what `source` says, asked again for every snapshot.
    pub fn new(source: impl TableSource) -> Self {
        Self {
            source: Arc::new(source),
            opened: Arc::default(),
        }
    }

    /// A session over tables that never change.
    pub fn fixed(tables: Tables) -> Self {
        Self::new(move || {
            let tables = tables.clone();
            async move { Ok::<_, SourceError>(tables) }
        })
    }

    /// The tables as they are now, opened: one statement's view of the datasets.
    pub async fn snapshot(&self) -> Result<SqlSession, SqlError> {
        let tables = self
            .source
            .tables()
            .await
            .map_err(|source| SqlError::Source { source })?;
        let before = self
            .opened
            .lock()
            .map(|opened| opened.clone())
            .unwrap_or_default();
        let (session, now) = SqlSession::open(tables, &before).await?;
        // Only the datasets there now: a deleted or renamed one's table is dropped.
        if let Ok(mut opened) = self.opened.lock() {
            *opened = now;
        }
        Ok(session)
    }
}
