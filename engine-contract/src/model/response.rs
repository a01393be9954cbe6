//! [`EngineResponse`]: the shape every operation's response stream shares —
//! zero or more [`Progress`], then one terminal: Success, InvalidQuery or
//! InternalError.

/// Progress of a running operation.
///
/// ODF's Progress tables have no fields. Weir appends three optional fields
/// at the end of each Progress table (new vtable slots): peers that do not
/// know them ignore them, and a Progress without them decodes with all three
/// `None`. So a Weir engine's progress is readable by ODF coordinators and an
/// ODF engine's (empty) progress by Weir.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Progress {
    /// What the engine is doing, e.g. `reading inputs`, `executing`,
    /// `writing output`.
    pub phase: Option<String>,
    /// Input rows read so far.
    pub rows_read: Option<u64>,
    /// Output rows written so far.
    pub rows_written: Option<u64>,
}

/// One problem a query has, as reported by ValidateQuery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValidationError {
    /// Alias of the query step the problem is in, when known.
    pub query_alias: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// A message of an operation's response stream; `S` is the operation's
/// success payload.
///
/// The protocol's aliases name it per operation:
/// [`TransformResponse`](crate::model::TransformResponse),
/// [`RawQueryResponse`](crate::model::RawQueryResponse),
/// [`ValidateQueryResponse`](crate::model::ValidateQueryResponse),
/// [`MigrateQueryResponse`](crate::model::MigrateQueryResponse),
/// [`DeriveProvenanceResponse`](crate::model::DeriveProvenanceResponse).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EngineResponse<S> {
    /// The operation is still running (tag 1).
    Progress(Progress),
    /// The operation finished (tag 2). Terminal.
    Success(S),
    /// The query cannot be run: it does not parse or plan, or breaks a rule
    /// of the contract (tag 3). Terminal.
    InvalidQuery {
        /// What is wrong, for a person.
        message: String,
        /// Structured problems. Only ValidateQuery carries them on the wire;
        /// for the other operations they are appended to `message` when
        /// encoding and decode as empty.
        errors: Vec<ValidationError>,
    },
    /// The engine failed (tag 4). Terminal.
    InternalError {
        /// What failed.
        message: String,
        /// Where, when the engine knows.
        backtrace: Option<String>,
    },
}

impl<S> EngineResponse<S> {
    /// Whether this message ends the stream.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Self::Progress(_))
    }

    /// An InvalidQuery with a message only.
    pub fn invalid_query(message: impl Into<String>) -> Self {
        Self::InvalidQuery {
            message: message.into(),
            errors: Vec::new(),
        }
    }
}

/// The InvalidQuery message for an operation whose wire form has no
/// structured errors: the message, then one line per error that says
/// something the message does not already (an engine that repeats its
/// message as its only error is not shown it twice).
pub(crate) fn message_with_errors(message: &str, errors: &[ValidationError]) -> String {
    let mut text = message.to_owned();
    for error in errors {
        if message.contains(error.message.as_str()) {
            continue;
        }
        text.push('\n');
        if let Some(alias) = &error.query_alias {
            text.push_str(alias);
            text.push_str(": ");
        }
        text.push_str(&error.message);
    }
    text
}

/// Encodes an InvalidQuery table: `plain` tables hold only `message` (the
/// structured errors are folded into it); `with_errors` tables also hold
/// `errors: [ValidationError]`.
macro_rules! encode_invalid_query {
    (plain, $fbb:ident, $invalid:ident, $invalid_args:ident, $message:ident, $errors:ident) => {{
        let text = $crate::model::response::message_with_errors($message, $errors);
        let message = $fbb.create_string(&text);
        let args = $crate::generated::$invalid_args {
            message: Some(message),
        };
        $crate::generated::$invalid::create(&mut $fbb, &args)
    }};
    (with_errors, $fbb:ident, $invalid:ident, $invalid_args:ident, $message:ident, $errors:ident) => {{
        let message = $fbb.create_string($message);
        let tables: Vec<_> = $errors
            .iter()
            .map(|error| {
                let query_alias = error.query_alias.as_deref().map(|a| $fbb.create_string(a));
                let message = $fbb.create_string(&error.message);
                $crate::generated::ValidationError::create(
                    &mut $fbb,
                    &$crate::generated::ValidationErrorArgs {
                        query_alias,
                        message: Some(message),
                    },
                )
            })
            .collect();
        let errors = $fbb.create_vector(&tables);
        let args = $crate::generated::$invalid_args {
            message: Some(message),
            errors: Some(errors),
        };
        $crate::generated::$invalid::create(&mut $fbb, &args)
    }};
}

pub(crate) use encode_invalid_query;

/// Decodes the structured errors of an InvalidQuery table (see
/// [`encode_invalid_query`]).
macro_rules! decode_invalid_query_errors {
    (plain, $invalid:ident) => {
        Vec::new()
    };
    (with_errors, $invalid:ident) => {
        $crate::model::decode::tables($invalid.errors(), |error| {
            Ok($crate::model::ValidationError {
                query_alias: $crate::model::decode::optional_string(error.query_alias()),
                message: $crate::model::decode::required_string(
                    error.message(),
                    "ValidationError",
                    "message",
                )?,
            })
        })?
    };
}

pub(crate) use decode_invalid_query_errors;

/// Implements [`WireMessage`](crate::model::WireMessage) and inherent
/// `encode`/`decode` for `EngineResponse<$success>`.
macro_rules! response_wire {
    (
        success: $success:ty,
        root: $root:ident, $root_args:ident,
        union: $union:ident,
        progress: $progress:ident, $progress_args:ident, $as_progress:ident,
        success_table: $success_table:ident, $as_success:ident,
        invalid_query($errors:ident): $invalid:ident, $invalid_args:ident, $as_invalid:ident,
        internal_error: $internal:ident, $internal_args:ident, $as_internal:ident $(,)?
    ) => {
        impl $crate::model::WireMessage for $crate::model::EngineResponse<$success> {
            const ROOT: &'static str = stringify!($root);

            fn encode(&self) -> Vec<u8> {
                use $crate::generated as fb;
                use $crate::model::EngineResponse;
                let mut fbb = flatbuffers::FlatBufferBuilder::new();
                let (value_type, value) = match self {
                    EngineResponse::Progress(progress) => {
                        let phase = progress.phase.as_deref().map(|p| fbb.create_string(p));
                        let args = fb::$progress_args {
                            phase,
                            rows_read: progress.rows_read,
                            rows_written: progress.rows_written,
                        };
                        (
                            fb::$union::$progress,
                            fb::$progress::create(&mut fbb, &args).as_union_value(),
                        )
                    }
                    EngineResponse::Success(success) => (
                        fb::$union::$success_table,
                        success.to_fb(&mut fbb).as_union_value(),
                    ),
                    EngineResponse::InvalidQuery { message, errors } => {
                        let invalid = $crate::model::response::encode_invalid_query!(
                            $errors,
                            fbb,
                            $invalid,
                            $invalid_args,
                            message,
                            errors
                        );
                        (fb::$union::$invalid, invalid.as_union_value())
                    }
                    EngineResponse::InternalError { message, backtrace } => {
                        let message = fbb.create_string(message);
                        let backtrace = backtrace.as_deref().map(|b| fbb.create_string(b));
                        let args = fb::$internal_args {
                            message: Some(message),
                            backtrace,
                        };
                        (
                            fb::$union::$internal,
                            fb::$internal::create(&mut fbb, &args).as_union_value(),
                        )
                    }
                };
                let root = fb::$root::create(
                    &mut fbb,
                    &fb::$root_args {
                        value_type,
                        value: Some(value),
                    },
                );
                fbb.finish_minimal(root);
                fbb.finished_data().to_vec()
            }

            fn decode(bytes: &[u8]) -> Result<Self, $crate::model::DecodeError> {
                use $crate::generated as fb;
                use $crate::model::EngineResponse;
                use $crate::model::decode::{
                    optional_string, required, required_string, unknown_union_tag, verified_root,
                };
                const ROOT: &str = stringify!($root);
                let root = verified_root::<fb::$root<'_>>(ROOT, bytes)?;
                match root.value_type() {
                    fb::$union::$progress => {
                        let progress = required(root.$as_progress(), ROOT, "value")?;
                        Ok(EngineResponse::Progress($crate::model::Progress {
                            phase: optional_string(progress.phase()),
                            rows_read: progress.rows_read(),
                            rows_written: progress.rows_written(),
                        }))
                    }
                    fb::$union::$success_table => {
                        let success = required(root.$as_success(), ROOT, "value")?;
                        Ok(EngineResponse::Success(<$success>::from_fb(success)?))
                    }
                    fb::$union::$invalid => {
                        let invalid = required(root.$as_invalid(), ROOT, "value")?;
                        Ok(EngineResponse::InvalidQuery {
                            message: required_string(
                                invalid.message(),
                                stringify!($invalid),
                                "message",
                            )?,
                            errors: $crate::model::response::decode_invalid_query_errors!(
                                $errors, invalid
                            ),
                        })
                    }
                    fb::$union::$internal => {
                        let internal = required(root.$as_internal(), ROOT, "value")?;
                        Ok(EngineResponse::InternalError {
                            message: required_string(
                                internal.message(),
                                stringify!($internal),
                                "message",
                            )?,
                            backtrace: optional_string(internal.backtrace()),
                        })
                    }
                    fb::$union::NONE => Err($crate::model::DecodeError::MissingField {
                        table: ROOT,
                        field: "value",
                    }),
                    other => Err(unknown_union_tag(
                        ROOT,
                        "value",
                        other.0,
                        "1 (Progress), 2 (Success), 3 (InvalidQuery), 4 (InternalError)",
                    )),
                }
            }
        }

        impl $crate::model::EngineResponse<$success> {
            /// The FlatBuffers bytes of this message.
            pub fn encode(&self) -> Vec<u8> {
                <Self as $crate::model::WireMessage>::encode(self)
            }

            /// Verifies and decodes untrusted bytes.
            pub fn decode(bytes: &[u8]) -> Result<Self, $crate::model::DecodeError> {
                <Self as $crate::model::WireMessage>::decode(bytes)
            }
        }
    };
}

pub(crate) use response_wire;

/// Implements [`WireMessage`](crate::model::WireMessage) and inherent
/// `encode`/`decode` for a request root with `to_fb`/`from_fb`.
macro_rules! request_wire {
    ($request:ty, $root:ident) => {
        impl $crate::model::WireMessage for $request {
            const ROOT: &'static str = stringify!($root);

            fn encode(&self) -> Vec<u8> {
                let mut fbb = flatbuffers::FlatBufferBuilder::new();
                let root = self.to_fb(&mut fbb);
                fbb.finish_minimal(root);
                fbb.finished_data().to_vec()
            }

            fn decode(bytes: &[u8]) -> Result<Self, $crate::model::DecodeError> {
                let root = $crate::model::decode::verified_root::<$crate::generated::$root<'_>>(
                    stringify!($root),
                    bytes,
                )?;
                Self::from_fb(root)
            }
        }

        impl $request {
            /// The FlatBuffers bytes of this request.
            pub fn encode(&self) -> Vec<u8> {
                <Self as $crate::model::WireMessage>::encode(self)
            }

            /// Verifies and decodes untrusted bytes.
            pub fn decode(bytes: &[u8]) -> Result<Self, $crate::model::DecodeError> {
                <Self as $crate::model::WireMessage>::decode(bytes)
            }
        }
    };
}

pub(crate) use request_wire;

#[cfg(test)]
mod tests {
    use super::*;

    fn error(alias: Option<&str>, message: &str) -> ValidationError {
        ValidationError {
            query_alias: alias.map(str::to_owned),
            message: message.to_owned(),
        }
    }

    #[test]
    fn an_error_repeating_the_message_is_not_folded_in_twice() {
        let message = "column `x` not found";
        assert_eq!(
            message_with_errors(message, &[error(Some("step1"), message)]),
            message
        );
        assert_eq!(
            message_with_errors(
                "2 problems",
                &[error(Some("a"), "bad a"), error(None, "bad b")]
            ),
            "2 problems\na: bad a\nbad b"
        );
    }
}
