//! The checks that write input Parquet files and read the engine's output.
//!
//! Each check is a scenario (input tables + a request, built without I/O),
//! one or two calls, and an evaluation of the result and output table (a
//! pure function, unit-tested below).

use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};

use super::data_free::{BAD_SQL, first_line, report, run, stream_obeyed_rules};
use super::fixtures::{Column, ColumnType, DataFixtures, Table, Value};
use super::report::{Check, CheckReport, CheckStatus};
use crate::client::{ClientError, EngineClient};
use crate::model::{
    DatasetId, DatasetVocabulary, OffsetInterval, OperationType, RawQueryRequest, RawQuerySuccess,
    Transform, TransformRequest, TransformRequestInput, TransformSql, TransformSuccess, Watermark,
};
use crate::operation::{ExecuteRawQuery, ExecuteTransform};

/// Where the data checks put their files: `host_dir` as the kit sees it,
/// `engine_dir` as the engine sees the same directory (equal for an engine
/// on the same host; the mount point for one in a container). Each check
/// writes its inputs in a subfolder and opens that subfolder's `out` folder,
/// where the engine writes, to every user (the engine may run as another
/// user), so `host_dir` should be a private temporary folder.
#[derive(Clone)]
pub struct DataSetup {
    /// Writes and reads Parquet.
    pub fixtures: std::sync::Arc<dyn DataFixtures>,
    /// The work directory on this host.
    pub host_dir: PathBuf,
    /// The same directory as the engine sees it.
    pub engine_dir: PathBuf,
}

impl std::fmt::Debug for DataSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataSetup")
            .field("host_dir", &self.host_dir)
            .field("engine_dir", &self.engine_dir)
            .finish_non_exhaustive()
    }
}

const COLUMNS: [(&str, ColumnType); 6] = [
    ("offset", ColumnType::Int64),
    ("op", ColumnType::Int32),
    ("system_time", ColumnType::TimestampMillisUtc),
    ("event_time", ColumnType::TimestampMillisUtc),
    ("city", ColumnType::Utf8),
    ("population", ColumnType::Int64),
];

/// The query every data scenario projects with (system columns other than
/// `op` and `event_time` are the engine's to add).
const PROJECTION: &str = "SELECT op, event_time, city, population FROM cities";

fn utc(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2023, 1, day, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::UNIX_EPOCH)
}

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// One input record: (op, event day of January 2023, city, population).
type Record = (OperationType, u32, &'static str, i64);

/// An input table with offsets from 0 and system_time 2023-01-31.
fn cities(records: &[Record]) -> Table {
    let columns = COLUMNS
        .iter()
        .map(|(name, data_type)| Column {
            name: (*name).to_owned(),
            data_type: data_type.clone(),
            nullable: false,
        })
        .collect();
    let rows = records
        .iter()
        .enumerate()
        .map(|(offset, (op, day, city, population))| {
            vec![
                Value::Int(offset as i64),
                Value::Int(i64::from(u8::from(*op))),
                Value::TimestampMillis(millis(utc(31))),
                Value::TimestampMillis(millis(utc(*day))),
                Value::Utf8((*city).to_owned()),
                Value::Int(*population),
            ]
        })
        .collect();
    Table { columns, rows }
}

const APPEND: OperationType = OperationType::Append;

fn three_cities() -> Table {
    cities(&[
        (APPEND, 1, "A", 1000),
        (APPEND, 2, "B", 2000),
        (APPEND, 3, "C", 3000),
    ])
}

/// The system time the scenarios stamp (whole milliseconds).
fn request_system_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2023, 3, 1, 12, 0, 0)
        .single()
        .unwrap_or(DateTime::UNIX_EPOCH)
}

/// An input of a scenario: its table (None: no new data) and watermarks.
struct ScenarioInput {
    alias: &'static str,
    table: Table,
    offset_interval: Option<OffsetInterval>,
    watermarks: Vec<Watermark>,
}

impl ScenarioInput {
    fn all_of(alias: &'static str, table: Table) -> Self {
        let rows = table.rows.len() as u64;
        Self {
            alias,
            table,
            offset_interval: rows
                .checked_sub(1)
                .and_then(|end| OffsetInterval::new(0, end)),
            watermarks: Vec::new(),
        }
    }
}

struct Scenario {
    query: String,
    inputs: Vec<ScenarioInput>,
    next_offset: u64,
}

/// Lets the engine write its outputs in `dir` whichever user it runs as: a sandboxed engine runs as
/// another user than the kit (a container engine of a root coordinator runs as `nobody`), and a folder
/// the kit creates belongs to the kit's user. `host_dir` is meant to be private to the caller (a fresh
/// temporary folder).
fn writable_by_anyone(dir: &std::path::Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| format!("opening {} to the engine: {e}", dir.display()))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Files of one scenario run.
struct Prepared {
    request: TransformRequest,
    host_output: PathBuf,
}

/// A fresh folder for `check` with an empty `out` folder: (as the kit sees it, as the engine does).
fn check_dir(setup: &DataSetup, check: Check) -> Result<(PathBuf, PathBuf), String> {
    let host = setup.host_dir.join(check.name());
    let seen = setup.engine_dir.join(check.name());
    if host.exists() {
        std::fs::remove_dir_all(&host).map_err(|e| format!("cleaning {}: {e}", host.display()))?;
    }
    std::fs::create_dir_all(host.join("out"))
        .map_err(|e| format!("creating {}: {e}", host.display()))?;
    writable_by_anyone(&host.join("out"))?;
    Ok((host, seen))
}

fn prepare(
    setup: &DataSetup,
    engine: &str,
    check: Check,
    scenario: &Scenario,
) -> Result<Prepared, String> {
    let (host, seen) = check_dir(setup, check)?;
    let mut query_inputs = Vec::new();
    for (i, input) in scenario.inputs.iter().enumerate() {
        let data = format!("{}-data.parquet", input.alias);
        let schema = format!("{}-schema.parquet", input.alias);
        let write = |name: &str, table: &Table| {
            setup
                .fixtures
                .write_parquet(&host.join(name), table)
                .map_err(|e| format!("writing {name}: {e}"))
        };
        write(&schema, &input.table.schema_only())?;
        let data_paths = if input.offset_interval.is_some() {
            write(&data, &input.table)?;
            vec![path_text(&seen.join(&data))]
        } else {
            Vec::new()
        };
        query_inputs.push(TransformRequestInput {
            dataset_id: DatasetId::from_key([0x10 + i as u8; 32]),
            dataset_alias: input.alias.to_owned(),
            query_alias: input.alias.to_owned(),
            vocab: DatasetVocabulary::default(),
            offset_interval: input.offset_interval,
            data_paths,
            schema_file: path_text(&seen.join(&schema)),
            explicit_watermarks: input.watermarks.clone(),
        });
    }
    let request = TransformRequest {
        dataset_id: DatasetId::from_key([0x0F; 32]),
        dataset_alias: "conformance".into(),
        system_time: request_system_time(),
        vocab: DatasetVocabulary::default(),
        transform: Transform::Sql(TransformSql::new(engine, scenario.query.clone())),
        query_inputs,
        next_offset: scenario.next_offset,
        prev_checkpoint_path: None,
        new_checkpoint_path: path_text(&seen.join("out/checkpoint")),
        new_data_path: path_text(&seen.join("out/data")),
    };
    Ok(Prepared {
        request,
        host_output: host.join("out/data"),
    })
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Result and output of one run.
struct Ran {
    success: TransformSuccess,
    output: Option<Table>,
}

async fn execute(
    client: &EngineClient,
    setup: &DataSetup,
    prepared: &Prepared,
) -> Result<Ran, String> {
    let success = client
        .call::<ExecuteTransform>(&prepared.request)
        .await
        .map_err(|e| e.to_string())?
        .finish()
        .await
        .map_err(|e| e.to_string())?;
    let output = if prepared.host_output.exists() {
        Some(
            setup
                .fixtures
                .read_parquet(&prepared.host_output)
                .map_err(|e| format!("reading the output: {e}"))?,
        )
    } else {
        None
    };
    Ok(Ran { success, output })
}

/// A raw query as a coordinator sends one: an input file in the check's folder, the output in
/// its `out` folder (kamu: `/opt/engine/in/input` -> `/opt/engine/out/output`).
struct RawPrepared {
    request: RawQueryRequest,
    host_output: PathBuf,
}

fn prepare_raw(
    setup: &DataSetup,
    engine: &str,
    check: Check,
    input: &Table,
    query: &str,
) -> Result<RawPrepared, String> {
    let (host, seen) = check_dir(setup, check)?;
    setup
        .fixtures
        .write_parquet(&host.join("input.parquet"), input)
        .map_err(|e| format!("writing input.parquet: {e}"))?;
    Ok(RawPrepared {
        request: RawQueryRequest {
            input_data_paths: vec![path_text(&seen.join("input.parquet"))],
            transform: Transform::Sql(TransformSql::new(engine, query)),
            output_data_path: path_text(&seen.join("out/output.parquet")),
        },
        host_output: host.join("out/output.parquet"),
    })
}

async fn execute_raw(
    client: &EngineClient,
    setup: &DataSetup,
    prepared: &RawPrepared,
) -> Result<(RawQuerySuccess, Table), String> {
    let success = run::<ExecuteRawQuery>(client, &prepared.request)
        .await
        .map_err(|e| e.to_string())?;
    if !prepared.host_output.exists() {
        return Err(format!(
            "the raw query succeeded ({} records) but wrote no output file",
            success.num_records
        ));
    }
    let output = setup
        .fixtures
        .read_parquet(&prepared.host_output)
        .map_err(|e| format!("reading the output: {e}"))?;
    Ok((success, output))
}

// ---------------------------------------------------------------------------
// Evaluations: pure functions of request, result and output.
// ---------------------------------------------------------------------------

/// Output rows sorted by offset, with the named columns' values.
fn sorted_by_offset(output: &Table) -> Result<Table, String> {
    let offset = output
        .column_index("offset")
        .ok_or("the output has no `offset` column")?;
    let mut sorted = output.clone();
    sorted
        .rows
        .sort_by(|a, b| a.get(offset).cmp(&b.get(offset)));
    Ok(sorted)
}

fn column(output: &Table, name: &str) -> Result<Vec<Value>, String> {
    output
        .column(name)
        .ok_or_else(|| format!("the output has no `{name}` column"))
}

/// Offsets run from next_offset, system_time is the request's, the
/// interval matches, event_time / city / op are as expected per row.
fn evaluate_rows(
    request: &TransformRequest,
    ran: &Ran,
    expected: &[(OperationType, &str, i64)],
) -> Result<String, String> {
    let output = ran.output.as_ref().ok_or("no output file was written")?;
    let output = sorted_by_offset(output)?;
    let n = expected.len() as u64;
    if output.rows.len() as u64 != n {
        return Err(format!(
            "expected {n} output rows, got {}",
            output.rows.len()
        ));
    }
    let offsets: Vec<Value> = (0..n)
        .map(|i| Value::Int((request.next_offset + i) as i64))
        .collect();
    if column(&output, "offset")? != offsets {
        return Err(format!(
            "offsets should run from next_offset {}: got {:?}",
            request.next_offset,
            column(&output, "offset")?
        ));
    }
    let system_time = Value::TimestampMillis(request.system_time.timestamp_millis());
    if let Some(bad) = column(&output, "system_time")?
        .iter()
        .find(|v| **v != system_time)
    {
        return Err(format!(
            "system_time should be the request's {system_time:?}, got {bad:?}"
        ));
    }
    let ops: Vec<Value> = expected
        .iter()
        .map(|(op, _, _)| Value::Int(i64::from(u8::from(*op))))
        .collect();
    if column(&output, "op")? != ops {
        return Err(format!(
            "op column should be {ops:?}, got {:?}",
            column(&output, "op")?
        ));
    }
    let cities: Vec<Value> = expected
        .iter()
        .map(|(_, c, _)| Value::Utf8((*c).to_owned()))
        .collect();
    if column(&output, "city")? != cities {
        return Err(format!(
            "records out of order or altered: city column {:?}, expected {cities:?}",
            column(&output, "city")?
        ));
    }
    let populations: Vec<Value> = expected.iter().map(|(_, _, p)| Value::Int(*p)).collect();
    if column(&output, "population")? != populations {
        return Err(format!(
            "population column {:?}, expected {populations:?}",
            column(&output, "population")?
        ));
    }
    let interval = n
        .checked_sub(1)
        .and_then(|last| OffsetInterval::new(request.next_offset, request.next_offset + last));
    if ran.success.new_offset_interval != interval {
        return Err(format!(
            "new_offset_interval should be {interval:?}, got {:?}",
            ran.success.new_offset_interval
        ));
    }
    Ok(format!(
        "{n} rows at offsets {interval:?}, system_time stamped, op as expected"
    ))
}

fn evaluate_event_times(input: &Table, ran: &Ran) -> Result<(), String> {
    let output = ran.output.as_ref().ok_or("no output file was written")?;
    let by_city = |table: &Table| -> Result<Vec<(Value, Value)>, String> {
        let mut pairs: Vec<(Value, Value)> = column(table, "city")?
            .into_iter()
            .zip(column(table, "event_time")?)
            .collect();
        pairs.sort();
        Ok(pairs)
    };
    if by_city(input)? != by_city(output)? {
        return Err(format!(
            "event_time should be kept per record: input {:?}, output {:?}",
            by_city(input)?,
            by_city(output)?
        ));
    }
    Ok(())
}

fn evaluate_empty(ran: &Ran, expect_columns: &[&str]) -> Result<String, String> {
    if let Some(interval) = ran.success.new_offset_interval {
        return Err(format!(
            "no rows were produced, yet new_offset_interval is {interval:?}"
        ));
    }
    let output = ran
        .output
        .as_ref()
        .ok_or("no output file was written for zero rows (it must carry the schema)")?;
    if !output.rows.is_empty() {
        return Err(format!(
            "expected zero output rows, got {}",
            output.rows.len()
        ));
    }
    for name in expect_columns {
        if output.column_index(name).is_none() {
            return Err(format!("the zero-row output lacks column `{name}`"));
        }
    }
    Ok("no offsets, output file with the schema and zero rows".into())
}

/// The column the raw-query check computes in SQL: a naive timestamp literal (UTC by ODF's rule).
const COMPUTED_TIMESTAMP: &str = "computed_time";

/// The SQL of the raw-query check: every input column, plus one timestamp computed by the query.
fn raw_types_query() -> String {
    format!("SELECT *, CAST('2023-01-01 00:00:00' AS TIMESTAMP) AS {COMPUTED_TIMESTAMP} FROM input")
}

/// Columns and types a raw query over [`cities`] plus [`COMPUTED_TIMESTAMP`] must write.
fn evaluate_raw_types(
    input: &Table,
    success: &RawQuerySuccess,
    output: &Table,
) -> Result<String, String> {
    let mut expected: Vec<(String, ColumnType)> = input
        .columns
        .iter()
        .map(|c| (c.name.clone(), c.data_type.clone()))
        .collect();
    expected.push((
        COMPUTED_TIMESTAMP.to_owned(),
        ColumnType::TimestampMillisUtc,
    ));
    let mut wrong = Vec::new();
    for (name, data_type) in &expected {
        match output.columns.iter().find(|c| &c.name == name) {
            None => wrong.push(format!("`{name}` is missing")),
            Some(column) if &column.data_type != data_type => wrong.push(format!(
                "`{name}` is {}, ODF engines write {}",
                type_name(&column.data_type),
                type_name(data_type)
            )),
            Some(_) => {}
        }
    }
    if !wrong.is_empty() {
        return Err(format!("raw query output types: {}", wrong.join("; ")));
    }
    let rows = output.rows.len() as u64;
    if success.num_records != rows || rows != input.rows.len() as u64 {
        return Err(format!(
            "num_records {} for an output of {rows} rows from {} input rows",
            success.num_records,
            input.rows.len()
        ));
    }
    let midnight = Value::TimestampMillis(millis(
        Utc.with_ymd_and_hms(2023, 1, 1, 0, 0, 0)
            .single()
            .unwrap_or(DateTime::UNIX_EPOCH),
    ));
    if let Some(bad) = column(output, COMPUTED_TIMESTAMP)?
        .iter()
        .find(|v| **v != midnight)
    {
        return Err(format!(
            "`{COMPUTED_TIMESTAMP}` should be 2023-01-01T00:00:00Z (a naive timestamp is UTC), got {bad:?}"
        ));
    }
    Ok(format!(
        "{rows} records; offset Int64, op Int32, timestamps (also one computed in SQL) Timestamp(ms, \"UTC\")"
    ))
}

fn type_name(data_type: &ColumnType) -> String {
    match data_type {
        ColumnType::Int64 => "Int64".into(),
        ColumnType::Int32 => "Int32".into(),
        ColumnType::Utf8 => "Utf8".into(),
        ColumnType::TimestampMillisUtc => "Timestamp(ms, \"UTC\")".into(),
        ColumnType::Other(name) => name.clone(),
    }
}

fn evaluate_watermark(ran: &Ran, expected: DateTime<Utc>) -> Result<String, String> {
    match ran.success.new_watermark {
        Some(watermark) if watermark == expected => Ok(format!("new_watermark {expected}")),
        other => Err(format!(
            "new_watermark should be the minimum over inputs of their latest explicit watermark, {expected}; got {other:?}"
        )),
    }
}

// ---------------------------------------------------------------------------
// The checks.
// ---------------------------------------------------------------------------

fn verdict(check: Check, outcome: Result<String, String>) -> CheckReport {
    match outcome {
        Ok(reason) => report(check, CheckStatus::Passed, reason),
        Err(reason) => report(check, CheckStatus::Failed, reason),
    }
}

async fn run_scenario(
    client: &EngineClient,
    setup: &DataSetup,
    engine: &str,
    check: Check,
    scenario: &Scenario,
) -> Result<(Prepared, Ran), String> {
    let prepared = prepare(setup, engine, check, scenario)?;
    let ran = execute(client, setup, &prepared).await?;
    Ok((prepared, ran))
}

pub(crate) async fn run_check(
    check: Check,
    client: &EngineClient,
    setup: &DataSetup,
    engine: &str,
) -> CheckReport {
    let projection = |inputs: Vec<ScenarioInput>, next_offset| Scenario {
        query: PROJECTION.into(),
        inputs,
        next_offset,
    };
    let outcome = match check {
        Check::OffsetsAndSystemColumns => {
            let input = three_cities();
            let scenario = projection(vec![ScenarioInput::all_of("cities", input.clone())], 10);
            async {
                let (prepared, ran) = run_scenario(client, setup, engine, check, &scenario).await?;
                let expected = [
                    (APPEND, "A", 1000),
                    (APPEND, "B", 2000),
                    (APPEND, "C", 3000),
                ];
                let summary = evaluate_rows(&prepared.request, &ran, &expected)?;
                evaluate_event_times(&input, &ran)?;
                Ok(summary)
            }
            .await
        }
        Check::InputOffsetIntervalRespected => {
            let table = cities(&[
                (APPEND, 1, "A", 1),
                (APPEND, 2, "B", 2),
                (APPEND, 3, "C", 3),
                (APPEND, 4, "D", 4),
                (APPEND, 5, "E", 5),
            ]);
            let input = ScenarioInput {
                offset_interval: OffsetInterval::new(1, 3),
                ..ScenarioInput::all_of("cities", table)
            };
            let scenario = projection(vec![input], 0);
            async {
                let (prepared, ran) = run_scenario(client, setup, engine, check, &scenario).await?;
                let expected = [(APPEND, "B", 2), (APPEND, "C", 3), (APPEND, "D", 4)];
                evaluate_rows(&prepared.request, &ran, &expected)
                    .map(|_| "only records at offsets [1, 3] of a 5-record file were read".into())
            }
            .await
        }
        Check::RetractionAndCorrectionPropagation => {
            let table = cities(&[
                (APPEND, 1, "A", 1000),
                (APPEND, 1, "B", 2000),
                (OperationType::Retract, 1, "A", 1000),
                (OperationType::CorrectFrom, 1, "B", 2000),
                (OperationType::CorrectTo, 1, "B", 2500),
            ]);
            let scenario = projection(vec![ScenarioInput::all_of("cities", table)], 0);
            async {
                let (prepared, ran) = run_scenario(client, setup, engine, check, &scenario).await?;
                let expected = [
                    (APPEND, "A", 1000),
                    (APPEND, "B", 2000),
                    (OperationType::Retract, "A", 1000),
                    (OperationType::CorrectFrom, "B", 2000),
                    (OperationType::CorrectTo, "B", 2500),
                ];
                evaluate_rows(&prepared.request, &ran, &expected)
                    .map(|_| "retraction and correction pair passed through in order".into())
            }
            .await
        }
        Check::WatermarkRule => {
            let watermark = |system_day, event_day| Watermark {
                system_time: utc(system_day),
                event_time: utc(event_day),
            };
            let with_watermarks = |alias, watermarks| ScenarioInput {
                watermarks,
                ..ScenarioInput::all_of(alias, cities(&[(APPEND, 1, alias, 1)]))
            };
            let scenario = Scenario {
                query: "SELECT op, event_time, city, population FROM a \
                        UNION ALL SELECT op, event_time, city, population FROM b \
                        UNION ALL SELECT op, event_time, city, population FROM c"
                    .into(),
                inputs: vec![
                    // latest is the last: 2023-01-20
                    with_watermarks("a", vec![watermark(10, 10), watermark(21, 20)]),
                    // latest 2023-01-15: the minimum
                    with_watermarks("b", vec![watermark(16, 15)]),
                    // no watermark: skipped
                    with_watermarks("c", vec![]),
                ],
                next_offset: 0,
            };
            async {
                let (_, ran) = run_scenario(client, setup, engine, check, &scenario).await?;
                evaluate_watermark(&ran, utc(15))
            }
            .await
        }
        Check::EmptyInput => {
            let input = ScenarioInput {
                offset_interval: None,
                ..ScenarioInput::all_of("cities", three_cities())
            };
            let scenario = projection(vec![input], 0);
            async {
                let (_, ran) = run_scenario(client, setup, engine, check, &scenario).await?;
                evaluate_empty(&ran, &["offset", "city"])
            }
            .await
        }
        Check::ZeroRowOutputWritesFile => {
            let scenario = Scenario {
                query: format!("{PROJECTION} WHERE population < 0"),
                inputs: vec![ScenarioInput::all_of("cities", three_cities())],
                next_offset: 0,
            };
            async {
                let (_, ran) = run_scenario(client, setup, engine, check, &scenario).await?;
                evaluate_empty(
                    &ran,
                    &[
                        "offset",
                        "op",
                        "system_time",
                        "event_time",
                        "city",
                        "population",
                    ],
                )
            }
            .await
        }
        Check::Idempotency => {
            let scenario = projection(vec![ScenarioInput::all_of("cities", three_cities())], 5);
            async {
                let prepared = prepare(setup, engine, check, &scenario)?;
                let first = execute(client, setup, &prepared).await?;
                let second = execute(client, setup, &prepared).await?;
                if first.success != second.success {
                    return Err(format!(
                        "results differ: {:?} then {:?}",
                        first.success, second.success
                    ));
                }
                let sorted = |ran: &Ran| ran.output.as_ref().map(sorted_by_offset).transpose();
                if sorted(&first)? != sorted(&second)? {
                    return Err("the output differs between two runs of the same request".into());
                }
                Ok("the same request twice gave the same result and output".into())
            }
            .await
        }
        Check::SystemColumnInQueryIsInvalid => {
            let scenario = Scenario {
                query: "SELECT offset, op, event_time, city, population FROM cities".into(),
                inputs: vec![ScenarioInput::all_of("cities", three_cities())],
                next_offset: 0,
            };
            async {
                let prepared = prepare(setup, engine, check, &scenario)?;
                match run::<ExecuteTransform>(client, &prepared.request).await {
                    Err(ClientError::InvalidQuery { message, .. }) => Ok(format!(
                        "InvalidQuery: {}",
                        message.lines().next().unwrap_or_default()
                    )),
                    Ok(success) => Err(format!(
                        "a query outputting `offset` succeeded: {success:?}"
                    )),
                    Err(other) => Err(format!("expected InvalidQuery, got: {other}")),
                }
            }
            .await
        }
        Check::TerminalMessageRules => {
            let scenario = projection(vec![ScenarioInput::all_of("cities", three_cities())], 0);
            async {
                let prepared = prepare(setup, engine, check, &scenario)?;
                let transform = run::<ExecuteTransform>(client, &prepared.request).await;
                let transform = stream_obeyed_rules(&transform)?;
                let raw =
                    prepare_raw(setup, engine, check, &three_cities(), "SELECT * FROM input")?;
                let raw = run::<ExecuteRawQuery>(client, &raw.request).await;
                let raw = stream_obeyed_rules(&raw)?;
                Ok(format!(
                    "ExecuteTransform ended with one {transform}, ExecuteRawQuery with one {raw}"
                ))
            }
            .await
        }
        Check::InvalidQueryForBadSql => {
            let scenario = Scenario {
                query: BAD_SQL.into(),
                inputs: vec![ScenarioInput::all_of("cities", three_cities())],
                next_offset: 0,
            };
            async {
                let prepared = prepare(setup, engine, check, &scenario)?;
                let transform = run::<ExecuteTransform>(client, &prepared.request)
                    .await
                    .map(|s| format!("{s:?}"));
                let raw = prepare_raw(setup, engine, check, &three_cities(), BAD_SQL)?;
                let raw = run::<ExecuteRawQuery>(client, &raw.request)
                    .await
                    .map(|s| format!("{s:?}"));
                let mut seen = Vec::new();
                for (operation, outcome) in [("ExecuteTransform", transform), ("ExecuteRawQuery", raw)] {
                    match outcome {
                        Err(ClientError::InvalidQuery { message, .. }) => {
                            seen.push(format!("{operation}: InvalidQuery: {}", first_line(&message)));
                        }
                        Ok(success) => {
                            return Err(format!("{operation} of {BAD_SQL:?} succeeded: {success}"));
                        }
                        Err(other) => {
                            return Err(format!(
                                "{operation} of {BAD_SQL:?} with real input files: expected InvalidQuery, got: {other}"
                            ));
                        }
                    }
                }
                Ok(seen.join("; "))
            }
            .await
        }
        Check::OperationTypeCarriedWhenNotSelected => {
            let table = cities(&[
                (APPEND, 1, "A", 1000),
                (APPEND, 1, "B", 2000),
                (OperationType::Retract, 1, "A", 1000),
                (OperationType::CorrectFrom, 1, "B", 2000),
                (OperationType::CorrectTo, 1, "B", 2500),
            ]);
            let scenario = Scenario {
                query: "SELECT event_time, city, population FROM cities".into(),
                inputs: vec![ScenarioInput::all_of("cities", table)],
                next_offset: 0,
            };
            async {
                let (prepared, ran) = run_scenario(client, setup, engine, check, &scenario).await?;
                let expected = [
                    (APPEND, "A", 1000),
                    (APPEND, "B", 2000),
                    (OperationType::Retract, "A", 1000),
                    (OperationType::CorrectFrom, "B", 2000),
                    (OperationType::CorrectTo, "B", 2500),
                ];
                evaluate_rows(&prepared.request, &ran, &expected)
                    .map(|_| {
                        "a query not selecting `op` kept each record's op (retraction and correction pair carried)"
                            .into()
                    })
                    .map_err(|reason| {
                        if reason.starts_with("op column") {
                            format!(
                                "{reason}: the query does not select `op`, and ODF's changelog rule carries each input record's op through a map/filter query (writing Append for a retraction turns it into a new record)"
                            )
                        } else {
                            reason
                        }
                    })
            }
            .await
        }
        Check::RawQueryOutputTypes => {
            let input = three_cities();
            async {
                let prepared = prepare_raw(setup, engine, check, &input, &raw_types_query())?;
                let (success, output) = execute_raw(client, setup, &prepared).await?;
                evaluate_raw_types(&input, &success, &output)
            }
            .await
        }
        other => Err(format!("{other} is not a data check")),
    };
    verdict(check, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(next_offset: u64) -> TransformRequest {
        TransformRequest {
            dataset_id: DatasetId::from_key([0; 32]),
            dataset_alias: "out".into(),
            system_time: request_system_time(),
            vocab: DatasetVocabulary::default(),
            transform: Transform::Sql(TransformSql::new("test", PROJECTION)),
            query_inputs: Vec::new(),
            next_offset,
            prev_checkpoint_path: None,
            new_checkpoint_path: "/cp".into(),
            new_data_path: "/data".into(),
        }
    }

    /// What a correct engine outputs for `records` at `next_offset`.
    fn correct_output(records: &[Record], next_offset: u64) -> Table {
        let mut table = cities(records);
        let system_time = Value::TimestampMillis(request_system_time().timestamp_millis());
        for (i, row) in table.rows.iter_mut().enumerate() {
            row[0] = Value::Int(next_offset as i64 + i as i64);
            row[2] = system_time.clone();
        }
        table
    }

    fn ran(output: Table, interval: Option<OffsetInterval>) -> Ran {
        Ran {
            success: TransformSuccess {
                new_offset_interval: interval,
                new_watermark: None,
            },
            output: Some(output),
        }
    }

    const ABC: [Record; 3] = [
        (APPEND, 1, "A", 1000),
        (APPEND, 2, "B", 2000),
        (APPEND, 3, "C", 3000),
    ];
    const EXPECTED: [(OperationType, &str, i64); 3] = [
        (APPEND, "A", 1000),
        (APPEND, "B", 2000),
        (APPEND, "C", 3000),
    ];

    #[test]
    fn correct_output_passes_the_row_evaluation() {
        let output = correct_output(&ABC, 10);
        let ran = ran(output, OffsetInterval::new(10, 12));
        assert!(evaluate_rows(&request(10), &ran, &EXPECTED).is_ok());
        assert!(evaluate_event_times(&cities(&ABC), &ran).is_ok());
    }

    #[test]
    fn offsets_not_starting_at_next_offset_fail() {
        let ran = ran(correct_output(&ABC, 0), OffsetInterval::new(10, 12));
        let reason = evaluate_rows(&request(10), &ran, &EXPECTED).unwrap_err();
        assert!(reason.contains("next_offset 10"), "{reason}");
    }

    #[test]
    fn input_system_time_leaking_through_fails() {
        let mut output = correct_output(&ABC, 10);
        output.rows[1][2] = Value::TimestampMillis(0);
        let reason = evaluate_rows(
            &request(10),
            &ran(output, OffsetInterval::new(10, 12)),
            &EXPECTED,
        )
        .unwrap_err();
        assert!(reason.contains("system_time"), "{reason}");
    }

    #[test]
    fn wrong_interval_fails() {
        let ran = ran(correct_output(&ABC, 10), OffsetInterval::new(10, 13));
        let reason = evaluate_rows(&request(10), &ran, &EXPECTED).unwrap_err();
        assert!(reason.contains("new_offset_interval"), "{reason}");
    }

    #[test]
    fn reordered_correction_pair_fails() {
        let records = [
            (OperationType::CorrectFrom, 1, "B", 2000),
            (OperationType::CorrectTo, 1, "B", 2500),
        ];
        let mut output = correct_output(&records, 0);
        output.rows.swap(0, 1);
        output.rows[0][0] = Value::Int(0);
        output.rows[1][0] = Value::Int(1);
        let expected = [
            (OperationType::CorrectFrom, "B", 2000),
            (OperationType::CorrectTo, "B", 2500),
        ];
        let reason = evaluate_rows(
            &request(0),
            &ran(output, OffsetInterval::new(0, 1)),
            &expected,
        )
        .unwrap_err();
        assert!(reason.contains("op column"), "{reason}");
    }

    #[test]
    fn changed_event_time_fails() {
        let mut output = correct_output(&ABC, 0);
        output.rows[0][3] = Value::TimestampMillis(0);
        let reason = evaluate_event_times(&cities(&ABC), &ran(output, None)).unwrap_err();
        assert!(reason.contains("event_time"), "{reason}");
    }

    #[test]
    fn zero_rows_need_a_file_and_no_interval() {
        let empty = three_cities().schema_only();
        assert!(evaluate_empty(&ran(empty.clone(), None), &["city"]).is_ok());
        let with_interval = evaluate_empty(&ran(empty, OffsetInterval::new(0, 0)), &["city"]);
        assert!(with_interval.unwrap_err().contains("new_offset_interval"));
        let no_file = Ran {
            success: TransformSuccess::default(),
            output: None,
        };
        assert!(
            evaluate_empty(&no_file, &["city"])
                .unwrap_err()
                .contains("no output file")
        );
    }

    fn raw_output(computed: ColumnType) -> Table {
        let mut output = three_cities();
        output.columns.push(Column {
            name: COMPUTED_TIMESTAMP.into(),
            data_type: computed,
            nullable: false,
        });
        for row in &mut output.rows {
            row.push(Value::TimestampMillis(1_672_531_200_000));
        }
        output
    }

    #[test]
    fn raw_query_types_of_odf_engines_pass() {
        let success = RawQuerySuccess { num_records: 3 };
        let output = raw_output(ColumnType::TimestampMillisUtc);
        assert!(evaluate_raw_types(&three_cities(), &success, &output).is_ok());
    }

    #[test]
    fn a_naive_nanosecond_timestamp_in_raw_query_output_fails_with_its_type() {
        let success = RawQuerySuccess { num_records: 3 };
        let output = raw_output(ColumnType::Other("Timestamp(Nanosecond, None)".into()));
        let reason = evaluate_raw_types(&three_cities(), &success, &output).unwrap_err();
        assert!(
            reason.contains("`computed_time` is Timestamp(Nanosecond, None), ODF engines write Timestamp(ms, \"UTC\")"),
            "{reason}"
        );
    }

    #[test]
    fn raw_query_num_records_must_count_the_output() {
        let success = RawQuerySuccess { num_records: 0 };
        let output = raw_output(ColumnType::TimestampMillisUtc);
        let reason = evaluate_raw_types(&three_cities(), &success, &output).unwrap_err();
        assert!(reason.contains("num_records 0"), "{reason}");
    }

    #[test]
    fn watermark_must_be_the_minimum_of_latest() {
        let mut ran = ran(Table::default(), None);
        ran.success.new_watermark = Some(utc(15));
        assert!(evaluate_watermark(&ran, utc(15)).is_ok());
        ran.success.new_watermark = Some(utc(20));
        assert!(evaluate_watermark(&ran, utc(15)).is_err());
        ran.success.new_watermark = None;
        assert!(evaluate_watermark(&ran, utc(15)).is_err());
    }
}
