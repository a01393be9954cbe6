//! The five operations of the engine service, as values ([`Operation`]) and
//! as types ([`OperationKind`]) tying each to its request and response.

use std::fmt;

use serde::Serialize;

use crate::model::{
    DeriveProvenanceRequest, DeriveProvenanceResponse, DeriveProvenanceSuccess, EngineResponse,
    MigrateQueryRequest, MigrateQueryResponse, MigrateQuerySuccess, RawQueryRequest,
    RawQueryResponse, RawQuerySuccess, TransformRequest, TransformResponse, TransformSuccess,
    ValidateQueryRequest, ValidateQueryResponse, ValidateQuerySuccess, WireMessage,
};

/// An operation of the `engine.Engine` service.
///
/// ```
/// use weir_engine_contract::Operation;
///
/// assert_eq!(Operation::ExecuteTransform.path(), "/engine.Engine/ExecuteTransform");
/// assert_eq!(Operation::DeriveProvenance.to_string(), "DeriveProvenance");
/// assert!(Operation::ExecuteRawQuery.is_odf());
/// assert!(!Operation::ValidateQuery.is_odf());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Operation {
    /// ODF: a one-off query over data files.
    ExecuteRawQuery,
    /// ODF: one step of a derivative dataset's transformation.
    ExecuteTransform,
    /// Weir: check a query against input schemas.
    ValidateQuery,
    /// Weir: move state from one transform to the next.
    MigrateQuery,
    /// Weir: input records behind output records.
    DeriveProvenance,
}

impl Operation {
    /// All operations, ODF's first.
    pub const ALL: [Operation; 5] = [
        Operation::ExecuteRawQuery,
        Operation::ExecuteTransform,
        Operation::ValidateQuery,
        Operation::MigrateQuery,
        Operation::DeriveProvenance,
    ];

    /// The gRPC method name.
    pub const fn method_name(self) -> &'static str {
        match self {
            Self::ExecuteRawQuery => "ExecuteRawQuery",
            Self::ExecuteTransform => "ExecuteTransform",
            Self::ValidateQuery => "ValidateQuery",
            Self::MigrateQuery => "MigrateQuery",
            Self::DeriveProvenance => "DeriveProvenance",
        }
    }

    /// The gRPC path, `/engine.Engine/<method>`.
    pub const fn path(self) -> &'static str {
        match self {
            Self::ExecuteRawQuery => "/engine.Engine/ExecuteRawQuery",
            Self::ExecuteTransform => "/engine.Engine/ExecuteTransform",
            Self::ValidateQuery => "/engine.Engine/ValidateQuery",
            Self::MigrateQuery => "/engine.Engine/MigrateQuery",
            Self::DeriveProvenance => "/engine.Engine/DeriveProvenance",
        }
    }

    /// Whether existing ODF engines implement it (the other three are
    /// Weir's and may be answered UNIMPLEMENTED).
    pub const fn is_odf(self) -> bool {
        matches!(self, Self::ExecuteRawQuery | Self::ExecuteTransform)
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.method_name())
    }
}

/// An operation as a type: its request, response and success payload.
///
/// The marker types [`ExecuteRawQuery`], [`ExecuteTransform`],
/// [`ValidateQuery`], [`MigrateQuery`] and [`DeriveProvenance`] implement
/// it; the client and server are generic over it.
pub trait OperationKind: Send + Sync + 'static {
    /// Which operation.
    const OPERATION: Operation;
    /// The request root.
    type Request: WireMessage + Clone + fmt::Debug + Send + Sync + 'static;
    /// What a successful call returns.
    type Success: Clone + fmt::Debug + Send + Sync + 'static;
    /// The response root, [`EngineResponse`] of [`Self::Success`].
    type Response: WireMessage
        + From<EngineResponse<Self::Success>>
        + Into<EngineResponse<Self::Success>>
        + Send
        + 'static;
}

macro_rules! operation_kind {
    ($(#[$doc:meta])* $name:ident, $request:ty, $success:ty, $response:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name;

        impl OperationKind for $name {
            const OPERATION: Operation = Operation::$name;
            type Request = $request;
            type Success = $success;
            type Response = $response;
        }
    };
}

operation_kind!(
    /// ExecuteRawQuery (ODF).
    ExecuteRawQuery,
    RawQueryRequest,
    RawQuerySuccess,
    RawQueryResponse
);
operation_kind!(
    /// ExecuteTransform (ODF).
    ExecuteTransform,
    TransformRequest,
    TransformSuccess,
    TransformResponse
);
operation_kind!(
    /// ValidateQuery (Weir).
    ValidateQuery,
    ValidateQueryRequest,
    ValidateQuerySuccess,
    ValidateQueryResponse
);
operation_kind!(
    /// MigrateQuery (Weir).
    MigrateQuery,
    MigrateQueryRequest,
    MigrateQuerySuccess,
    MigrateQueryResponse
);
operation_kind!(
    /// DeriveProvenance (Weir).
    DeriveProvenance,
    DeriveProvenanceRequest,
    DeriveProvenanceSuccess,
    DeriveProvenanceResponse
);
