//! The Arrow Flight SQL endpoint over a [`SqlSession`]: what `kamu sql server` is, for any Flight SQL
//! client (ADBC, JDBC, DBeaver, `pyarrow.flight`).
//!
//! Stateless: a statement handle and a prepared-statement handle are the SQL text itself, planned again
//! when the ticket is redeemed, so nothing is kept per client and a closed or forgotten statement costs
//! nothing.

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};

use arrow::datatypes::{Schema, SchemaRef};
use arrow::ipc::writer::IpcWriteOptions;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::FlightSqlService;
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, Any, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandStatementQuery, ProstMessageExt, SqlInfo, SqlSupportedTransaction, TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightDescriptor, FlightEndpoint, FlightInfo, IpcMessage, SchemaAsIpc, Ticket,
};
use futures::{Stream, TryStreamExt};
use prost::Message;
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

use crate::error::SqlError;
use crate::session::{CATALOG, SCHEMA, SqlSession};

/// The one table type: every dataset is a `TABLE`.
const TABLE_TYPE: &str = "TABLE";

/// Binds a listener on `127.0.0.1:port` (`0`: a free port), for [`serve_flight_sql`].
pub async fn bind_loopback(port: u16) -> Result<TcpListener, SqlError> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpListener::bind(addr).await.map_err(|e| SqlError::Serve {
        message: format!("cannot listen on {addr}: {e}"),
    })
}

/// Serves Flight SQL over `session` on `listener` until `shutdown` completes, then lets the calls under
/// way finish.
///
/// The listener must be bound to a loopback address ([`bind_loopback`]): there is no authentication.
/// Implemented: `CommandStatementQuery` (GetFlightInfo + DoGet), prepared statements without parameters
/// (CreatePreparedStatement, GetFlightInfo, DoGet, ClosePreparedStatement), `CommandGetCatalogs`,
/// `CommandGetDbSchemas`, `CommandGetTables` (with schemas), `CommandGetTableTypes`, `CommandGetSqlInfo`.
/// Updates, ingestion, transactions, Substrait and keys are `Unimplemented`; a bad query is
/// `InvalidArgument`, an unknown table too, a failure while reading data `Internal`.
pub async fn serve_flight_sql(
    session: SqlSession,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), SqlError> {
    let addr = listener.local_addr().map_err(|e| SqlError::Serve {
        message: format!("the listener has no address: {e}"),
    })?;
    if !addr.ip().is_loopback() {
        return Err(SqlError::NotLoopback { addr });
    }
    let service = FlightSqlServer::new(session)?;
    tracing::info!(%addr, "Flight SQL server listening");
    tonic::transport::Server::builder()
        .add_service(FlightServiceServer::new(service))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )
        .await
        .map_err(|e| SqlError::Serve {
            message: e.to_string(),
        })?;
    tracing::info!(%addr, "Flight SQL server stopped");
    Ok(())
}

/// The status a Flight SQL client sees for an error.
pub fn status_of(error: &SqlError) -> Status {
    if error.is_query_error() {
        Status::invalid_argument(error.to_string())
    } else {
        Status::internal(error.to_string())
    }
}

/// The Flight SQL service (a tonic service through [`FlightServiceServer`]).
#[derive(Clone)]
pub struct FlightSqlServer {
    session: SqlSession,
    sql_info: std::sync::Arc<SqlInfoData>,
}

impl std::fmt::Debug for FlightSqlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightSqlServer")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl FlightSqlServer {
    /// The service over `session`.
    pub fn new(session: SqlSession) -> Result<Self, SqlError> {
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
            session,
            sql_info: std::sync::Arc::new(sql_info),
        })
    }

    async fn plan(&self, sql: &str) -> Result<SchemaRef, Status> {
        match self.session.prepare(sql).await {
            Ok(prepared) => Ok(prepared.schema()),
            Err(e) => {
                tracing::debug!(sql, error = %e, "query refused");
                Err(status_of(&e))
            }
        }
    }

    async fn rows(&self, sql: &str) -> Result<Response<DoGetStream>, Status> {
        let prepared = self.session.prepare(sql).await.map_err(|e| status_of(&e))?;
        let rows = prepared.execute().await.map_err(|e| status_of(&e))?;
        tracing::debug!(sql, "query running");
        let schema = rows.schema();
        let batches = rows.map_err(|e| FlightError::Tonic(Box::new(status_of(&e))));
        Ok(Response::new(encode(schema, batches)))
    }
}

type DoGetStream = <FlightSqlServer as FlightService>::DoGetStream;

fn encode(
    schema: SchemaRef,
    batches: impl Stream<Item = Result<arrow::array::RecordBatch, FlightError>> + Send + 'static,
) -> DoGetStream {
    Box::pin(
        FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from),
    )
}

fn one_batch(batch: Result<arrow::array::RecordBatch, FlightError>) -> DoGetStream {
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

fn sql_text(handle: &[u8]) -> Result<&str, Status> {
    std::str::from_utf8(handle).map_err(|_| {
        Status::invalid_argument("the statement handle is not a statement of this server")
    })
}

#[tonic::async_trait]
impl FlightSqlService for FlightSqlServer {
    type FlightService = FlightSqlServer;

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        if query.transaction_id.is_some() {
            return Err(Status::invalid_argument("transactions are not supported"));
        }
        let schema = self.plan(&query.query).await?;
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
        self.rows(sql_text(&ticket.statement_handle)?).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        if query.transaction_id.is_some() {
            return Err(Status::invalid_argument("transactions are not supported"));
        }
        let schema = self.plan(&query.query).await?;
        let IpcMessage(dataset_schema) = SchemaAsIpc::new(&schema, &IpcWriteOptions::default())
            .try_into()
            .map_err(|e: arrow::error::ArrowError| {
                Status::internal(format!("encoding the schema: {e}"))
            })?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: query.query.into_bytes().into(),
            dataset_schema,
            parameter_schema: Default::default(),
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        _query: ActionClosePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        Ok(())
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = self
            .plan(sql_text(&query.prepared_statement_handle)?)
            .await?;
        flight_info(&schema, query.as_any(), request.into_inner())
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.rows(sql_text(&query.prepared_statement_handle)?).await
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
        let mut builder = query.into_builder();
        for name in self.session.table_names() {
            let schema = self
                .session
                .table_schema(name)
                .await
                .map_err(|e| status_of(&e))?
                .unwrap_or_else(|| std::sync::Arc::new(Schema::empty()));
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
