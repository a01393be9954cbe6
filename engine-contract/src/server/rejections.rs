//! [`RejectionLog`]: a tower layer that logs every request answered with a gRPC error before it
//! reached the engine (unknown method, wrong content type, an operation the engine does not
//! implement), with the path and `:authority` the client sent, so a refused client leaves a line
//! in the engine's log.

use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tower::{Layer, Service};

use crate::operation::Operation;

/// The layer; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RejectionLog;

impl<S> Layer<S> for RejectionLog {
    type Service = RejectionLogService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RejectionLogService { inner }
    }
}

/// The service of [`RejectionLog`].
#[derive(Debug, Clone)]
pub(crate) struct RejectionLogService<S> {
    inner: S,
}

/// gRPC status code UNIMPLEMENTED.
const UNIMPLEMENTED: &str = "12";

impl<S, B, R> Service<http::Request<B>> for RejectionLogService<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let path = request.uri().path().to_owned();
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            // A trailers-only answer: the status is in the headers, so the engine never streamed.
            let header = |name| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            if let Some(status) = header("grpc-status").filter(|s| s != "0") {
                let message = header("grpc-message").unwrap_or_default();
                let known = Operation::ALL.iter().any(|op| op.path() == path);
                if status == UNIMPLEMENTED && known {
                    tracing::info!(%path, %authority, grpc_status = %status, %message, "operation not implemented by this engine");
                } else {
                    tracing::warn!(%path, %authority, grpc_status = %status, %message, "request rejected");
                }
            } else if !response.status().is_success() {
                tracing::warn!(%path, %authority, http_status = %response.status(), "request rejected");
            }
            Ok(response)
        })
    }
}
