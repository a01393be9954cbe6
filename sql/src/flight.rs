//! The Arrow Flight SQL service over a [`LiveSession`]: what `kamu sql server` is, for any Flight SQL
//! client (ADBC, JDBC, DBeaver, `flightsql-dbapi`, `pyarrow.flight`).
//!
//! Every statement reads a fresh [`LiveSession::snapshot`]: the datasets' heads when the statement runs.
//! A statement handle is its SQL text; a prepared statement's handle is its SQL text, an id, and the
//! parameters bound to it, so a handle carries everything needed to run it. Parameters bound with DoPut are
//! also kept under the id until ClosePreparedStatement (a bounded table), for clients that go on using the
//! handle CreatePreparedStatement gave them instead of the one DoPut returns.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::ipc::writer::IpcWriteOptions;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, Any, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandStatementQuery, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo,
    SqlSupportedTransaction, TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse,
    IpcMessage, SchemaAsIpc, Ticket,
};
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::{Auth, Principal};
use crate::error::SqlError;
use crate::live::LiveSession;
use crate::session::{CATALOG, PreparedQuery, RecordBatchStream, SCHEMA, SqlSession};

/// The one table type: every dataset is a `TABLE`.
const TABLE_TYPE: &str = "TABLE";
/// At most this many prepared statements keep parameters bound by DoPut (the oldest binding goes first).
const MAX_BOUND: usize = 4096;

/// The status a Flight SQL client sees for an error.
pub fn status_of(error: &SqlError) -> Status {
    if error.is_query_error() {
        Status::invalid_argument(error.to_string())
    } else {
        Status::internal(error.to_string())
    }
}

/// A prepared statement's handle.
#[derive(Clone, PartialEq, prost::Message)]
struct PreparedHandle {
    /// The statement.
    #[prost(string, tag = "1")]
    sql: String,
    /// Names this prepared statement (random): the key of its bound parameters.
    #[prost(bytes = "vec", tag = "2")]
    id: Vec<u8>,
    /// The bound parameters, an Arrow IPC stream; empty when none are bound.
    #[prost(bytes = "vec", tag = "3")]
    parameters: Vec<u8>,
}

impl PreparedHandle {
    fn decode_from(bytes: &[u8]) -> Result<Self, Status> {
        PreparedHandle::decode(bytes).map_err(|_| {
            Status::invalid_argument("the prepared statement handle is not one of this server")
        })
    }
}

/// Parameters bound with DoPut, by prepared statement id, with the order they were bound in.
#[derive(Default)]
struct Bound {
    by_id: HashMap<Vec<u8>, (u64, Vec<u8>)>,
    next: u64,
}

/// The Flight SQL service (a tonic service through
/// [`FlightServiceServer`](arrow_flight::flight_service_server::FlightServiceServer)).
#[derive(Clone)]
pub struct FlightSqlServer {
    sessions: LiveSession,
    auth: Auth,
    sql_info: Arc<SqlInfoData>,
    bound: Arc<Mutex<Bound>>,
}

impl std::fmt::Debug for FlightSqlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightSqlServer")
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

type DoGetStream = <FlightSqlServer as FlightService>::DoGetStream;
type HandshakeStream = Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>;

impl FlightSqlServer {
    /// The service over `sessions`, authenticating calls with `auth` (its handshake gives session tokens;
    /// the calls themselves are checked by [`Auth::authenticate`] in front of the service, see
    /// [`crate::serve_flight_sql`]).
    pub fn new(sessions: LiveSession, auth: Auth) -> Result<Self, SqlError> {
        let mut info = SqlInfoDataBuilder::new();
        info.append(SqlInfo::FlightSqlServerName, "weir");
        info.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
        // The Arrow format version (Schema.fbs), as the Flight SQL examples report it.
        info.append(SqlInfo::FlightSqlServerArrowVersion, "1.3");
        info.append(SqlInfo::FlightSqlServerReadOnly, true);
        info.append(SqlInfo::FlightSqlServerSql, true);
        info.append(SqlInfo::FlightSqlServerSubstrait, false);
        info.append(
            SqlInfo::FlightSqlServerTransaction,
            SqlSupportedTransaction::None as i32,
        );
        info.append(SqlInfo::FlightSqlServerCancel, false);
        info.append(SqlInfo::SqlDdlCatalog, false);
        info.append(SqlInfo::SqlDdlSchema, false);
        info.append(SqlInfo::SqlDdlTable, false);
        info.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
        let sql_info = info.build().map_err(|e| SqlError::Serve {
            message: format!("building the SqlInfo table: {e}"),
        })?;
        Ok(Self {
            sessions,
            auth,
            sql_info: Arc::new(sql_info),
            bound: Arc::default(),
        })
    }

    /// The datasets as they are now.
    async fn snapshot(&self) -> Result<SqlSession, Status> {
        self.sessions.snapshot().await.map_err(|e| {
            tracing::warn!(error = %e, "Flight SQL: the datasets cannot be read");
            status_of(&e)
        })
    }

    /// Plans `sql` on the datasets as they are now, with the first row of `parameters` bound when given
    /// (for the result schema); the schema of its rows.
    async fn plan(&self, sql: &str, parameters: Option<&RecordBatch>) -> Result<SchemaRef, Status> {
        let session = self.snapshot().await?;
        let prepared = session.prepare(sql).await.map_err(|e| refused(sql, &e))?;
        match parameters {
            Some(values) if values.num_rows() > 0 => prepared
                .bind(values, 0)
                .map(|p| p.schema())
                .map_err(|e| refused(sql, &e)),
            // Unbound placeholders fail here, before a ticket is handed out.
            _ if prepared.needs_parameters() => Err(refused(
                sql,
                &SqlError::Parameters {
                    message: format!(
                        "the statement has {} parameter(s) and none are bound",
                        prepared.parameter_schema().fields().len()
                    ),
                },
            )),
            _ => Ok(prepared.schema()),
        }
    }

    /// Runs `sql` on one snapshot of the datasets: once, or once per row of `parameters` (their rows one
    /// after the other).
    async fn rows(
        &self,
        sql: &str,
        parameters: Option<RecordBatch>,
    ) -> Result<Response<DoGetStream>, Status> {
        let session = self.snapshot().await?;
        let prepared = session.prepare(sql).await.map_err(|e| refused(sql, &e))?;
        let runs: Vec<PreparedQuery> = match &parameters {
            Some(values) if values.num_rows() > 0 => (0..values.num_rows())
                .map(|row| prepared.clone().bind(values, row))
                .collect::<Result<_, _>>()
                .map_err(|e| refused(sql, &e))?,
            _ => vec![prepared],
        };
        let schema = match runs.first() {
            Some(p) => p.schema(),
            None => Arc::new(Schema::empty()),
        };
        let mut streams: Vec<RecordBatchStream> = Vec::with_capacity(runs.len());
        for run in runs {
            streams.push(run.execute().await.map_err(|e| refused(sql, &e))?);
        }
        tracing::debug!(sql, runs = streams.len(), "Flight SQL: query running");
        let batches = futures::stream::iter(streams)
            .flatten()
            .map_err(|e| FlightError::Tonic(Box::new(status_of(&e))));
        Ok(Response::new(encode(schema, batches)))
    }

    /// The parameters a prepared statement runs with: those in its handle, else those bound to its id.
    fn parameters_of(&self, handle: &PreparedHandle) -> Result<Option<RecordBatch>, Status> {
        if !handle.parameters.is_empty() {
            return decode_batch(&handle.parameters).map(Some);
        }
        let bound = self
            .bound
            .lock()
            .map_err(|_| Status::internal("the bound parameters are unusable"))?
            .by_id
            .get(&handle.id)
            .map(|(_, ipc)| ipc.clone());
        bound.map(|ipc| decode_batch(&ipc)).transpose()
    }

    fn principal(&self, metadata: &tonic::metadata::MetadataMap) -> Result<Principal, Status> {
        self.auth.authenticate(metadata)
    }
}

/// A refused statement: logged, and its status.
fn refused(sql: &str, error: &SqlError) -> Status {
    tracing::debug!(sql, error = %error, "Flight SQL: statement refused");
    status_of(error)
}

fn encode(
    schema: SchemaRef,
    batches: impl Stream<Item = Result<RecordBatch, FlightError>> + Send + 'static,
) -> DoGetStream {
    Box::pin(
        FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from),
    )
}

fn one_batch(batch: Result<RecordBatch, FlightError>) -> DoGetStream {
    match batch {
        Ok(batch) => encode(
            batch.schema(),
            futures::stream::once(async move { Ok(batch) }),
        ),
        Err(e) => {
            let status = Status::from(e);
            Box::pin(futures::stream::once(async move { Err(status) }))
        }
    }
}

/// A FlightInfo whose one endpoint's ticket is `ticket` (an `Any`-wrapped command), on this server.
fn flight_info(
    schema: &Schema,
    ticket: Any,
    descriptor: FlightDescriptor,
) -> Result<Response<FlightInfo>, Status> {
    let endpoint = FlightEndpoint::new().with_ticket(Ticket::new(ticket.encode_to_vec()));
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(format!("encoding the schema: {e}")))?
        .with_endpoint(endpoint)
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

fn schema_ipc(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: arrow::error::ArrowError| {
            Status::internal(format!("encoding the schema: {e}"))
        })?;
    Ok(bytes)
}

fn sql_text(handle: &[u8]) -> Result<&str, Status> {
    std::str::from_utf8(handle).map_err(|_| {
        Status::invalid_argument("the statement handle is not a statement of this server")
    })
}

fn encode_batch(batch: &RecordBatch) -> Result<Vec<u8>, Status> {
    let mut out = Vec::new();
    let bad =
        |e: arrow::error::ArrowError| Status::internal(format!("keeping the parameters: {e}"));
    let mut writer =
        arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema()).map_err(bad)?;
    writer.write(batch).map_err(bad)?;
    writer.finish().map_err(bad)?;
    drop(writer);
    Ok(out)
}

fn decode_batch(ipc: &[u8]) -> Result<RecordBatch, Status> {
    let bad = |e: arrow::error::ArrowError| {
        Status::invalid_argument(format!("the handle's parameters do not decode: {e}"))
    };
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(ipc), None).map_err(bad)?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(bad)?;
    arrow::compute::concat_batches(&schema, &batches).map_err(bad)
}

fn new_id() -> Result<Vec<u8>, Status> {
    let mut id = vec![0u8; 16];
    getrandom::fill(&mut id)
        .map_err(|e| Status::internal(format!("no randomness for a statement id: {e}")))?;
    Ok(id)
}

#[tonic::async_trait]
impl FlightSqlService for FlightSqlServer {
    type FlightService = FlightSqlServer;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<HandshakeStream>, Status> {
        let principal = match request.extensions().get::<Principal>() {
            Some(p) => p.clone(),
            None => self.principal(request.metadata())?,
        };
        let token = self.auth.session_token(&principal)?;
        let header = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|_| Status::internal("the session token is not a header value"))?;
        let response = HandshakeResponse {
            protocol_version: 0,
            payload: token.into_bytes().into(),
        };
        let stream: HandshakeStream = Box::pin(futures::stream::once(async move { Ok(response) }));
        let mut response = Response::new(stream);
        response.metadata_mut().insert("authorization", header);
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        if query.transaction_id.is_some() {
            return Err(Status::invalid_argument("transactions are not supported"));
        }
        let schema = self.plan(&query.query, None).await?;
        let ticket = TicketStatementQuery {
            statement_handle: query.query.into_bytes().into(),
        };
        flight_info(&schema, ticket.as_any(), request.into_inner())
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.rows(sql_text(&ticket.statement_handle)?, None).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        if query.transaction_id.is_some() {
            return Err(Status::invalid_argument("transactions are not supported"));
        }
        let session = self.snapshot().await?;
        let prepared = session
            .prepare(&query.query)
            .await
            .map_err(|e| refused(&query.query, &e))?;
        let handle = PreparedHandle {
            sql: query.query,
            id: new_id()?,
            parameters: Vec::new(),
        };
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.encode_to_vec().into(),
            dataset_schema: schema_ipc(&prepared.schema())?,
            parameter_schema: schema_ipc(&prepared.parameter_schema())?,
        })
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let mut handle = PreparedHandle::decode_from(&query.prepared_statement_handle)?;
        let mut stream = FlightRecordBatchStream::new_from_flight_data(
            request.into_inner().map_err(FlightError::from),
        );
        let mut batches = Vec::new();
        while let Some(batch) = stream.next().await {
            batches.push(batch.map_err(|e| {
                Status::invalid_argument(format!("the bound parameters do not decode: {e}"))
            })?);
        }
        let Some(schema) = batches.first().map(RecordBatch::schema) else {
            return Err(Status::invalid_argument(
                "no parameters were sent (bind at least one row)",
            ));
        };
        let values = arrow::compute::concat_batches(&schema, &batches).map_err(|e| {
            Status::invalid_argument(format!("the bound parameter batches differ: {e}"))
        })?;
        // Checked now, so that a bad binding fails where it is made.
        let session = self.snapshot().await?;
        let prepared = session
            .prepare(&handle.sql)
            .await
            .map_err(|e| refused(&handle.sql, &e))?;
        for row in 0..values.num_rows() {
            prepared
                .clone()
                .bind(&values, row)
                .map_err(|e| refused(&handle.sql, &e))?;
        }
        let ipc = encode_batch(&values)?;
        {
            let mut bound = self
                .bound
                .lock()
                .map_err(|_| Status::internal("the bound parameters are unusable"))?;
            bound.next += 1;
            let seq = bound.next;
            bound.by_id.insert(handle.id.clone(), (seq, ipc.clone()));
            if bound.by_id.len() > MAX_BOUND
                && let Some(oldest) = bound
                    .by_id
                    .iter()
                    .min_by_key(|(_, (seq, _))| *seq)
                    .map(|(id, _)| id.clone())
            {
                bound.by_id.remove(&oldest);
            }
        }
        tracing::debug!(sql = %handle.sql, rows = values.num_rows(), "Flight SQL: parameters bound");
        handle.parameters = ipc;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.encode_to_vec().into()),
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        if let Ok(handle) = PreparedHandle::decode(query.prepared_statement_handle.as_ref())
            && let Ok(mut bound) = self.bound.lock()
        {
            bound.by_id.remove(&handle.id);
        }
        Ok(())
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let mut handle = PreparedHandle::decode_from(&query.prepared_statement_handle)?;
        let parameters = self.parameters_of(&handle)?;
        let schema = self.plan(&handle.sql, parameters.as_ref()).await?;
        // The ticket carries the parameters: it runs as bound now, whatever is bound later.
        if let Some(values) = &parameters {
            handle.parameters = encode_batch(values)?;
        }
        let ticket = CommandPreparedStatementQuery {
            prepared_statement_handle: handle.encode_to_vec().into(),
        };
        flight_info(&schema, ticket.as_any(), request.into_inner())
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let handle = PreparedHandle::decode_from(&query.prepared_statement_handle)?;
        let parameters = self.parameters_of(&handle)?;
        self.rows(&handle.sql, parameters).await
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        flight_info(&schema, query.as_any(), request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let mut builder = query.into_builder();
        builder.append(CATALOG);
        Ok(Response::new(one_batch(builder.build())))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        flight_info(&schema, query.as_any(), request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let mut builder = query.into_builder();
        builder.append(CATALOG, SCHEMA);
        Ok(Response::new(one_batch(builder.build())))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        flight_info(&schema, query.as_any(), request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let session = self.snapshot().await?;
        let mut builder = query.into_builder();
        for name in session.table_names() {
            let schema = session
                .table_schema(name)
                .await
                .map_err(|e| status_of(&e))?
                .unwrap_or_else(|| Arc::new(Schema::empty()));
            builder
                .append(CATALOG, SCHEMA, name, TABLE_TYPE, &schema)
                .map_err(|e| Status::internal(format!("listing tables: {e}")))?;
        }
        Ok(Response::new(one_batch(builder.build())))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        flight_info(&schema, query.as_any(), request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let mut builder = query.into_builder();
        builder.append(TABLE_TYPE);
        Ok(Response::new(one_batch(builder.build())))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&self.sql_info).schema();
        flight_info(&schema, query.as_any(), request.into_inner())
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(Response::new(one_batch(
            query.into_builder(&self.sql_info).build(),
        )))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
