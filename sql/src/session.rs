//! A read-only DataFusion session over the tables of datasets.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::TableReference;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::dataframe::DataFrame;
use datafusion::datasource::empty::EmptyTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::{DFParserBuilder, Statement as DfStatement};
use datafusion::sql::sqlparser::ast::{Ident, ObjectName, ObjectNamePart, visit_relations_mut};
use futures::{Stream, StreamExt};

use crate::error::SqlError;
use crate::live::{OpenedTable, OpenedTables};
use crate::parameters::{self, Parameters};
use crate::tables::Table;

/// The catalog the tables are in.
pub const CATALOG: &str = "weir";
/// The schema (namespace) the tables are in.
pub const SCHEMA: &str = "public";

/// A read-only SQL session over datasets: one table per dataset, named as the dataset.
///
/// Cheap to clone (the clones share the tables); queries run concurrently.
#[derive(Clone)]
pub struct SqlSession {
    ctx: SessionContext,
    /// The tables that exist, by name.
    tables: Arc<BTreeSet<String>>,
    /// Datasets without data or schema: named by the caller, but without a table.
    no_data: Arc<BTreeSet<String>>,
}

impl std::fmt::Debug for SqlSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlSession")
            .field("tables", &self.tables)
            .field("no_data", &self.no_data)
            .finish_non_exhaustive()
    }
}

/// A DataFusion context configured as every session's: catalog `weir`, schema `public`, information
/// schema on, identifiers case-sensitive, strings as `Utf8`, and the JSON functions kamu's sessions and
/// the reference engine offer (`json_get_str`, `json_get_int`, ..., the `->` / `->>` operators), so a
/// transform's query can be tried here as written.
fn new_context() -> SessionContext {
    let mut config = SessionConfig::new()
        .with_default_catalog_and_schema(CATALOG, SCHEMA)
        .with_create_default_catalog_and_schema(true)
        // `SHOW TABLES`, `SHOW COLUMNS FROM t`, `information_schema.*`.
        .with_information_schema(true);
    // Identifiers are case-sensitive, as in the reference engine: columns and datasets are named as they
    // are spelled.
    config.options_mut().sql_parser.enable_ident_normalization = false;
    // Strings as Utf8, the type every Arrow client reads.
    config
        .options_mut()
        .execution
        .parquet
        .schema_force_view_types = false;
    let mut ctx = SessionContext::new_with_config(config);
    if let Err(error) = datafusion_functions_json::register_all(&mut ctx) {
        // Registering into a fresh session cannot conflict; should it fail, the functions are missing
        // and a query using them gets DataFusion's "invalid function" message.
        tracing::error!(%error, "cannot register the JSON functions");
    }
    ctx
}

impl SqlSession {
    /// Opens a session over `tables`: reads the footers of their files (their schemas), nothing else.
    pub async fn new(tables: impl IntoIterator<Item = Table>) -> Result<Self, SqlError> {
        Ok(Self::open(tables, &OpenedTables::new()).await?.0)
    }

    /// Opens a session over `tables`, reusing the tables of `before` whose files and schema are the same;
    /// returns the session and its tables (for the next snapshot to reuse).
    pub(crate) async fn open(
        tables: impl IntoIterator<Item = Table>,
        before: &OpenedTables,
    ) -> Result<(Self, OpenedTables), SqlError> {
        let ctx = new_context();
        let mut names = BTreeSet::new();
        let mut no_data = BTreeSet::new();
        let mut opened = OpenedTables::new();
        for table in tables {
            if names.contains(&table.name) || no_data.contains(&table.name) {
                return Err(SqlError::DuplicateTable { table: table.name });
            }
            let reused = before
                .get(&table.name)
                .filter(|o| o.files == table.files && o.schema == table.schema)
                .map(|o| o.provider.clone());
            let provider: Arc<dyn datafusion::catalog::TableProvider> =
                match (reused, table.files.is_empty(), &table.schema) {
                    (Some(provider), _, _) => provider,
                    (None, false, _) => open_parquet(&ctx, &table.name, &table.files).await?,
                    (None, true, Some(schema)) => Arc::new(EmptyTable::new(schema.clone())),
                    (None, true, None) => {
                        no_data.insert(table.name);
                        continue;
                    }
                };
            ctx.register_table(TableReference::bare(table.name.clone()), provider.clone())
                .map_err(|source| SqlError::OpenTable {
                    table: table.name.clone(),
                    source,
                })?;
            names.insert(table.name.clone());
            opened.insert(
                table.name,
                OpenedTable {
                    files: table.files,
                    schema: table.schema,
                    provider,
                },
            );
        }
        let session = Self {
            ctx,
            tables: Arc::new(names),
            no_data: Arc::new(no_data),
        };
        Ok((session, opened))
    }

    /// Runs one query and collects its rows.
    ///
    /// Dataset names are table names; quote those with anything but letters, digits and `_`:
    /// `SELECT * FROM "readings.clean"`. A name with dots also works unquoted in `FROM` and `JOIN`
    /// (`FROM readings.clean`), when no real schema-qualified table has that name.
    pub async fn query(&self, sql: &str) -> Result<Vec<RecordBatch>, SqlError> {
        self.prepare(sql).await?.collect().await
    }

    /// Parses, checks and plans one statement without running it: its result schema is known.
    pub async fn prepare(&self, sql: &str) -> Result<PreparedQuery, SqlError> {
        // Before the parser and the planner, which recurse over the expression tree.
        weir_query_depth::check_query_depth(sql).map_err(|source| SqlError::TooDeep { source })?;
        let mut statements = DFParserBuilder::new(sql)
            .build()
            .and_then(|mut parser| parser.parse_statements())
            .map_err(|source| SqlError::Parse { source })?;
        if statements.len() != 1 {
            return Err(SqlError::StatementCount {
                count: statements.len(),
            });
        }
        let Some(mut statement) = statements.pop_front() else {
            return Err(SqlError::StatementCount { count: 0 });
        };
        refuse_extensions(&statement)?;
        self.quote_dotted_names(&mut statement);
        parameters::number_question_marks(&mut statement)?;
        let state = self.ctx.state();
        let references = state
            .resolve_table_references(&statement)
            .map_err(SqlError::from_datafusion)?;
        if let Some(dataset) = references
            .iter()
            .find(|r| r.schema().is_none_or(|s| s == SCHEMA) && self.no_data.contains(r.table()))
        {
            return Err(SqlError::NoData {
                dataset: dataset.table().to_owned(),
            });
        }
        let described = describe(&statement);
        let plan = state
            .statement_to_plan(statement)
            .await
            .map_err(SqlError::from_datafusion)?;
        refuse_writes(&plan, &described)?;
        let parameters = Parameters::new(
            plan.get_parameter_types()
                .map_err(SqlError::from_datafusion)?,
        );
        tracing::debug!(sql, parameters = parameters.len(), "query planned");
        Ok(PreparedQuery {
            frame: DataFrame::new(state, plan),
            parameters,
            bound: false,
        })
    }

    /// The names of the tables, sorted.
    pub fn table_names(&self) -> impl Iterator<Item = &str> {
        self.tables.iter().map(String::as_str)
    }

    /// The names of the datasets that have no table (no data and no schema yet), sorted.
    pub fn datasets_without_data(&self) -> impl Iterator<Item = &str> {
        self.no_data.iter().map(String::as_str)
    }

    /// The schema of a table, `None` when there is no such table.
    pub async fn table_schema(&self, name: &str) -> Result<Option<SchemaRef>, SqlError> {
        if !self.tables.contains(name) {
            return Ok(None);
        }
        let provider = self
            .ctx
            .table_provider(TableReference::bare(name))
            .await
            .map_err(SqlError::from_datafusion)?;
        Ok(Some(provider.schema()))
    }

    /// `a.b` (unquoted, in `FROM` or `JOIN`) means the table `"a.b"` when a dataset has that name: names
    /// with dots are DataFusion's schema-qualified names otherwise.
    fn quote_dotted_names(&self, statement: &mut DfStatement) {
        let known = |name: &str| self.tables.contains(name) || self.no_data.contains(name);
        let mut rewrite = |name: &mut ObjectName| {
            if name.0.len() > 1 {
                let parts: Option<Vec<&str>> = name
                    .0
                    .iter()
                    .map(|part| match part {
                        ObjectNamePart::Identifier(ident) if ident.quote_style.is_none() => {
                            Some(ident.value.as_str())
                        }
                        _ => None,
                    })
                    .collect();
                if let Some(joined) = parts.map(|p| p.join("."))
                    && known(&joined)
                {
                    *name = ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
                        '"', joined,
                    ))]);
                }
            }
            ControlFlow::<()>::Continue(())
        };
        match statement {
            DfStatement::Statement(s) => {
                let _ = visit_relations_mut(s.as_mut(), &mut rewrite);
            }
            DfStatement::Explain(explain) => {
                if let DfStatement::Statement(s) = explain.statement.as_mut() {
                    let _ = visit_relations_mut(s.as_mut(), &mut rewrite);
                }
            }
            _ => {}
        }
    }
}

/// DataFusion's own statements that write or configure: `CREATE EXTERNAL TABLE`, `COPY ... TO`, `RESET`,
/// also under `EXPLAIN`. (Refused before planning: planning `CREATE EXTERNAL TABLE` may look at its
/// location.)
fn refuse_extensions(statement: &DfStatement) -> Result<(), SqlError> {
    match statement {
        DfStatement::Statement(_) => Ok(()),
        DfStatement::Explain(explain) => refuse_extensions(&explain.statement),
        DfStatement::CreateExternalTable(_) | DfStatement::CopyTo(_) | DfStatement::Reset(_) => {
            Err(SqlError::ReadOnly {
                statement: describe(statement),
            })
        }
    }
}

/// A statement's first two words, for messages: `CREATE TABLE …`, `INSERT INTO …`.
fn describe(statement: &DfStatement) -> String {
    let text = statement.to_string();
    let words: Vec<&str> = text.split_whitespace().take(3).collect();
    match words.as_slice() {
        [a, b, _] => format!("`{a} {b} …`"),
        _ => format!("`{}`", words.join(" ")),
    }
}

/// Refuses a plan that would change something anywhere in it (`EXPLAIN ANALYZE INSERT` runs the insert).
fn refuse_writes(plan: &LogicalPlan, described: &str) -> Result<(), SqlError> {
    let mut refused = false;
    plan.apply_with_subqueries(|node| {
        refused = matches!(
            node,
            LogicalPlan::Ddl(_)
                | LogicalPlan::Dml(_)
                | LogicalPlan::Copy(_)
                | LogicalPlan::Statement(_)
        );
        Ok(if refused {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })
    .map_err(SqlError::from_datafusion)?;
    if refused {
        return Err(SqlError::ReadOnly {
            statement: described.to_owned(),
        });
    }
    Ok(())
}

/// Opens Parquet files of any name (slices are named by hash) as one table, its schema merged from their
/// footers.
async fn open_parquet(
    ctx: &SessionContext,
    name: &str,
    files: &[std::path::PathBuf],
) -> Result<Arc<ListingTable>, SqlError> {
    let open_err = |source: DataFusionError| SqlError::OpenTable {
        table: name.to_owned(),
        source,
    };
    let mut urls = Vec::with_capacity(files.len());
    for file in files {
        if !file.is_file() {
            return Err(open_err(DataFusionError::Execution(format!(
                "{} is not a file",
                file.display()
            ))));
        }
        let absolute = std::path::absolute(file).map_err(|e| open_err(e.into()))?;
        urls.push(ListingTableUrl::parse(absolute.to_string_lossy()).map_err(open_err)?);
    }
    let format = ParquetFormat::default().with_force_view_types(false);
    let options = ListingOptions::new(Arc::new(format)).with_file_extension("");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .infer_schema(&ctx.state())
        .await
        .map_err(open_err)?;
    Ok(Arc::new(ListingTable::try_new(config).map_err(open_err)?))
}

/// A planned query, ready to run (once its parameters, if any, are bound).
#[derive(Debug, Clone)]
pub struct PreparedQuery {
    frame: DataFrame,
    parameters: Parameters,
    bound: bool,
}

impl PreparedQuery {
    /// The schema of the rows it returns.
    pub fn schema(&self) -> SchemaRef {
        self.frame.schema().inner().clone()
    }

    /// The query's parameters, one field per placeholder (`$1`, `$2`, …, a `?` counting as the next
    /// number), typed where DataFusion infers a type from the placeholder's use (`WHERE city = $1`: the
    /// column's type) and `Null` otherwise. Empty without placeholders.
    pub fn parameter_schema(&self) -> Schema {
        self.parameters.schema()
    }

    /// Whether the query has placeholders still to bind.
    pub fn needs_parameters(&self) -> bool {
        !self.bound && !self.parameters.is_empty()
    }

    /// The query with its placeholders replaced by the values in row `row` of `values` (column `i` is
    /// parameter `i + 1`; named placeholders take the column of their name).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use weir_sql::arrow::array::{Int64Array, RecordBatch};
    /// # use weir_sql::arrow::datatypes::{DataType, Field, Schema};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let session = weir_sql::SqlSession::new(Vec::new()).await?;
    /// let query = session.prepare("SELECT ? + 1 AS n").await?;
    /// let values = RecordBatch::try_new(
    ///     Arc::new(Schema::new(vec![Field::new("p", DataType::Int64, false)])),
    ///     vec![Arc::new(Int64Array::from(vec![41]))],
    /// )?;
    /// let rows = query.bind(&values, 0)?.collect().await?;
    /// assert_eq!(rows[0].column(0).as_any().downcast_ref::<Int64Array>().unwrap().value(0), 42);
    /// # Ok(())
    /// # }
    /// ```
    pub fn bind(self, values: &RecordBatch, row: usize) -> Result<PreparedQuery, SqlError> {
        if row >= values.num_rows() {
            return Err(SqlError::Parameters {
                message: format!(
                    "parameter row {row} is not bound ({} row(s) bound)",
                    values.num_rows()
                ),
            });
        }
        let params = self.parameters.values(values, row)?;
        let frame = self
            .frame
            .with_param_values(params)
            .map_err(|e| SqlError::Parameters {
                message: e.to_string(),
            })?;
        Ok(PreparedQuery {
            frame,
            parameters: self.parameters,
            bound: true,
        })
    }

    /// Runs it, its rows as a stream.
    pub async fn execute(self) -> Result<RecordBatchStream, SqlError> {
        if self.needs_parameters() {
            return Err(SqlError::Parameters {
                message: format!(
                    "the statement has {} parameter(s) and none are bound",
                    self.parameters.len()
                ),
            });
        }
        let inner = self
            .frame
            .execute_stream()
            .await
            .map_err(SqlError::from_datafusion)?;
        Ok(RecordBatchStream { inner })
    }

    /// Runs it and collects its rows.
    pub async fn collect(self) -> Result<Vec<RecordBatch>, SqlError> {
        let mut stream = self.execute().await?;
        let mut batches = Vec::new();
        while let Some(batch) = stream.next().await {
            batches.push(batch?);
        }
        Ok(batches)
    }

    /// Runs it; its schema and rows.
    pub async fn run(self) -> Result<QueryResult, SqlError> {
        let stream = self.execute().await?;
        let schema = stream.schema();
        let mut batches = Vec::new();
        let mut stream = stream;
        while let Some(batch) = stream.next().await {
            batches.push(batch?);
        }
        Ok(QueryResult { schema, batches })
    }
}

/// A query's rows with their schema (known even when there are none).
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// The columns.
    pub schema: SchemaRef,
    /// The rows.
    pub batches: Vec<RecordBatch>,
}

impl QueryResult {
    /// How many rows.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

impl SqlSession {
    /// Runs one query; its schema and rows.
    pub async fn run(&self, sql: &str) -> Result<QueryResult, SqlError> {
        self.prepare(sql).await?.run().await
    }
}

/// A running query's rows, a batch at a time.
pub struct RecordBatchStream {
    inner: SendableRecordBatchStream,
}

impl std::fmt::Debug for RecordBatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatchStream")
            .field("schema", &self.inner.schema())
            .finish_non_exhaustive()
    }
}

impl RecordBatchStream {
    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

impl Stream for RecordBatchStream {
    type Item = Result<RecordBatch, SqlError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner
            .poll_next_unpin(cx)
            .map(|item| item.map(|r| r.map_err(|source| SqlError::Execution { source })))
    }
}
