//! The checks that need no data files: garbage request bytes, and the
//! operations an engine may lack (answered UNIMPLEMENTED, or served).

use crate::client::{ClientError, EngineClient};
use crate::grpc::Envelope;
use crate::model::{
    DatasetId, DatasetVocabulary, DeriveProvenanceRequest, MigrateQueryRequest, OffsetInterval,
    Transform, TransformRequest, TransformRequestInput, TransformSql, ValidateQueryInput,
    ValidateQueryRequest,
};
use crate::operation::{ExecuteRawQuery, ExecuteTransform, OperationKind};

use super::report::{Check, CheckReport, CheckStatus};

/// SQL no engine parses.
pub(crate) const BAD_SQL: &str = "SELEC city FORM cities WHERE";

/// A path no engine can create: `/dev/null` is not a directory.
const UNWRITABLE: &str = "/dev/null/weir-conformance/output.parquet";

pub(crate) fn report(check: Check, status: CheckStatus, reason: impl Into<String>) -> CheckReport {
    CheckReport {
        check,
        status,
        reason: reason.into(),
    }
}

fn sql(engine: &str, query: &str) -> Transform {
    Transform::Sql(TransformSql::new(engine, query))
}

fn transform_request(engine: &str, query: &str) -> TransformRequest {
    TransformRequest {
        dataset_id: DatasetId::from_key([0xC0; 32]),
        dataset_alias: "conformance".into(),
        system_time: chrono::DateTime::UNIX_EPOCH,
        vocab: DatasetVocabulary::default(),
        transform: sql(engine, query),
        query_inputs: vec![TransformRequestInput {
            dataset_id: DatasetId::from_key([0xC1; 32]),
            dataset_alias: "cities".into(),
            query_alias: "cities".into(),
            vocab: DatasetVocabulary::default(),
            offset_interval: OffsetInterval::new(0, 0),
            data_paths: vec!["/dev/null/weir-conformance/input.parquet".into()],
            schema_file: "/dev/null/weir-conformance/schema.parquet".into(),
            explicit_watermarks: Vec::new(),
        }],
        next_offset: 0,
        prev_checkpoint_path: None,
        new_checkpoint_path: "/dev/null/weir-conformance/checkpoint".into(),
        new_data_path: UNWRITABLE.into(),
    }
}

/// `Ok(what the terminal was)` when the stream obeyed the rules, whatever
/// the terminal; `Err(why not)` otherwise.
pub(crate) fn stream_obeyed_rules<S: std::fmt::Debug>(
    result: &Result<S, ClientError>,
) -> Result<String, String> {
    match result {
        Ok(_) => Ok("Success".into()),
        Err(ClientError::InvalidQuery { .. }) => Ok("InvalidQuery".into()),
        Err(ClientError::EngineInternalError { .. }) => Ok("InternalError".into()),
        Err(ClientError::OperationNotSupported { .. }) => Ok("UNIMPLEMENTED".into()),
        Err(other) => Err(other.to_string()),
    }
}

pub(crate) async fn run<K: OperationKind>(
    client: &EngineClient,
    request: &K::Request,
) -> Result<K::Success, ClientError> {
    client.call::<K>(request).await?.finish().await
}

async fn run_envelope<K: OperationKind>(
    client: &EngineClient,
    envelope: Envelope,
) -> Result<K::Success, ClientError> {
    client.call_envelope::<K>(envelope).await?.finish().await
}

pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

pub(crate) async fn malformed_request_answered_invalid_query(client: &EngineClient) -> CheckReport {
    let check = Check::MalformedRequestAnsweredInvalidQuery;
    let garbage = || Envelope::from_flatbuffer(&b"\x04\x00\x00\x00garbage, not a FlatBuffer"[..]);
    let outcomes = [
        (
            "ExecuteTransform",
            run_envelope::<ExecuteTransform>(client, garbage())
                .await
                .map(|_| ()),
        ),
        (
            "ExecuteRawQuery",
            run_envelope::<ExecuteRawQuery>(client, garbage())
                .await
                .map(|_| ()),
        ),
    ];
    for (operation, outcome) in outcomes {
        match outcome {
            Err(ClientError::InvalidQuery { .. }) => {}
            Ok(()) => {
                return report(
                    check,
                    CheckStatus::Failed,
                    format!("{operation} succeeded on garbage request bytes"),
                );
            }
            Err(other) => {
                return report(
                    check,
                    CheckStatus::Failed,
                    format!(
                        "{operation} on garbage request bytes: expected InvalidQuery, got: {other}"
                    ),
                );
            }
        }
    }
    report(
        check,
        CheckStatus::Passed,
        "garbage request bytes answered InvalidQuery by ExecuteTransform and ExecuteRawQuery",
    )
}

pub(crate) async fn unimplemented_operations_reported(
    client: &EngineClient,
    engine: &str,
) -> CheckReport {
    let check = Check::UnimplementedOperationsReported;
    let base = transform_request(engine, "SELECT * FROM cities");
    let validate = ValidateQueryRequest {
        dataset_id: base.dataset_id,
        dataset_alias: base.dataset_alias.clone(),
        vocab: base.vocab.clone(),
        transform: base.transform.clone(),
        query_inputs: vec![ValidateQueryInput {
            dataset_id: base.query_inputs[0].dataset_id,
            dataset_alias: "cities".into(),
            query_alias: "cities".into(),
            vocab: DatasetVocabulary::default(),
            schema_file: base.query_inputs[0].schema_file.clone(),
        }],
        output_schema_path: UNWRITABLE.into(),
    };
    let migrate = MigrateQueryRequest {
        dataset_id: base.dataset_id,
        dataset_alias: base.dataset_alias.clone(),
        system_time: base.system_time,
        vocab: base.vocab.clone(),
        prev_transform: base.transform.clone(),
        next_transform: base.transform.clone(),
        query_inputs: base.query_inputs.clone(),
        next_offset: 0,
        prev_checkpoint_path: None,
        new_checkpoint_path: base.new_checkpoint_path.clone(),
        new_data_path: base.new_data_path.clone(),
    };
    let derive = DeriveProvenanceRequest {
        dataset_id: base.dataset_id,
        dataset_alias: base.dataset_alias.clone(),
        system_time: base.system_time,
        vocab: base.vocab.clone(),
        transform: base.transform.clone(),
        query_inputs: base.query_inputs.clone(),
        next_offset: 0,
        prev_checkpoint_path: None,
        output_offsets: vec![0],
    };
    let outcomes = [
        (
            "ValidateQuery",
            stream_obeyed_rules(&run::<crate::ValidateQuery>(client, &validate).await),
        ),
        (
            "MigrateQuery",
            stream_obeyed_rules(&run::<crate::MigrateQuery>(client, &migrate).await),
        ),
        (
            "DeriveProvenance",
            stream_obeyed_rules(&run::<crate::DeriveProvenance>(client, &derive).await),
        ),
    ];
    let mut seen = Vec::new();
    for (operation, outcome) in outcomes {
        match outcome {
            Ok(terminal) => seen.push(format!("{operation}: {terminal}")),
            Err(why) => return report(check, CheckStatus::Failed, format!("{operation}: {why}")),
        }
    }
    report(check, CheckStatus::Passed, seen.join(", "))
}
