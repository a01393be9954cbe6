//! The checks that need no data files.

use crate::client::{ClientError, EngineClient};
use crate::grpc::Envelope;
use crate::model::{
    DatasetId, DatasetVocabulary, DeriveProvenanceRequest, MigrateQueryRequest, OffsetInterval,
    RawQueryRequest, Transform, TransformRequest, TransformRequestInput, TransformSql,
    ValidateQueryInput, ValidateQueryRequest,
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

fn raw_query(engine: &str, query: &str) -> RawQueryRequest {
    RawQueryRequest {
        input_data_paths: Vec::new(),
        transform: sql(engine, query),
        output_data_path: UNWRITABLE.into(),
    }
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
fn stream_obeyed_rules<S: std::fmt::Debug>(
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

async fn run<K: OperationKind>(
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

pub(crate) async fn terminal_message_rules(client: &EngineClient, engine: &str) -> CheckReport {
    let check = Check::TerminalMessageRules;
    let raw = run::<ExecuteRawQuery>(client, &raw_query(engine, "SELECT 1 AS x")).await;
    let transform =
        run::<ExecuteTransform>(client, &transform_request(engine, "SELECT * FROM cities")).await;
    match (stream_obeyed_rules(&raw), stream_obeyed_rules(&transform)) {
        (Ok(a), Ok(b)) => report(
            check,
            CheckStatus::Passed,
            format!("ExecuteRawQuery ended with one {a}, ExecuteTransform with one {b}"),
        ),
        (Err(e), _) | (_, Err(e)) => report(check, CheckStatus::Failed, e),
    }
}

pub(crate) async fn invalid_query_for_bad_sql(client: &EngineClient, engine: &str) -> CheckReport {
    let check = Check::InvalidQueryForBadSql;
    match run::<ExecuteRawQuery>(client, &raw_query(engine, BAD_SQL)).await {
        Err(ClientError::InvalidQuery { message, .. }) => report(
            check,
            CheckStatus::Passed,
            format!("InvalidQuery: {}", first_line(&message)),
        ),
        Ok(success) => report(
            check,
            CheckStatus::Failed,
            format!("{BAD_SQL:?} succeeded: {success:?}"),
        ),
        Err(other) => report(
            check,
            CheckStatus::Failed,
            format!("expected InvalidQuery for {BAD_SQL:?}, got: {other}"),
        ),
    }
}

fn first_line(text: &str) -> &str {
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
