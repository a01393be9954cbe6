//! Top-N over a stream (`row_number()` / `rank()` / `dense_rank()` with a rank bound): kamu's
//! `leaderboard` as written, exact changelogs as ranks change (corrections, retractions of input
//! records), deduplication, refusals, and the incremental property: random scores with random
//! retractions, split into random transactions, give as a changelog exactly DataFusion's batch result
//! of the same query over the live records.
use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use proptest::prelude::*;
use weir_reference_engine::arrow::array::{
    Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use weir_reference_engine::arrow::compute::cast;
use weir_reference_engine::arrow::datatypes::{DataType, Field, Schema};
use weir_reference_engine::datafusion::prelude::{ParquetReadOptions, SessionContext};
use weir_reference_engine::{DatasetVocabulary, TransformRequest, TransformRequestInput};

/// A player's score in a match.
#[derive(Debug, Clone, PartialEq)]
struct Score {
    offset: i64,
    op: i32,
    match_time_ms: i64,
    match_id: i64,
    player_id: String,
    score: i64,
}

fn score(offset: i64, op: i32, match_id: i64, player_id: &str, score: i64) -> Score {
    Score {
        offset,
        op,
        match_time_ms: match_id * 1000,
        match_id,
        player_id: player_id.to_owned(),
        score,
    }
}

fn scores_batch(scores: &[Score]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("op", DataType::Int32, false),
        Field::new("system_time", utc_ms(), false),
        Field::new("match_time", utc_ms(), false),
        Field::new("match_id", DataType::Int64, false),
        Field::new("player_id", DataType::Utf8, false),
        Field::new("score", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(
                scores.iter().map(|s| s.offset),
            )),
            Arc::new(Int32Array::from_iter_values(scores.iter().map(|s| s.op))),
            Arc::new(TimestampMillisecondArray::from_value(0, scores.len()).with_timezone("UTC")),
            Arc::new(
                TimestampMillisecondArray::from_iter_values(scores.iter().map(|s| s.match_time_ms))
                    .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_iter_values(
                scores.iter().map(|s| s.match_id),
            )),
            Arc::new(StringArray::from_iter_values(
                scores.iter().map(|s| s.player_id.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(scores.iter().map(|s| s.score))),
        ],
    )
    .unwrap()
}

fn write_scores(fx: &Fixture, name: &str, scores: &[Score]) -> PathBuf {
    let path = fx.path(name);
    write_batch(&path, &scores_batch(scores));
    path
}

fn match_time_vocab() -> DatasetVocabulary {
    DatasetVocabulary {
        event_time_column: "match_time".into(),
        ..DatasetVocabulary::default()
    }
}

/// The `player_scores` input over `scores` (none: only its schema).
fn scores_input(fx: &Fixture, name: &str, scores: &[Score]) -> TransformRequestInput {
    let schema = write_scores(fx, "scores-schema", &[]);
    let files = if scores.is_empty() {
        vec![]
    } else {
        vec![write_scores(fx, name, scores)]
    };
    let interval = scores
        .first()
        .map(|first| (first.offset as u64, scores.last().unwrap().offset as u64));
    let mut input = fx.input("player_scores", files, interval);
    input.vocab = match_time_vocab();
    input.schema_file = schema.display().to_string();
    input
}

fn request(
    fx: &Fixture,
    query: &str,
    input: TransformRequestInput,
    next_offset: u64,
    prev_checkpoint: Option<String>,
    name: &str,
) -> TransformRequest {
    let mut request = fx.request(query, vec![input], next_offset);
    request.vocab = match_time_vocab();
    request.prev_checkpoint_path = prev_checkpoint;
    request.new_checkpoint_path = fx.path(&format!("{name}/checkpoint")).display().to_string();
    request.new_data_path = fx.path(&format!("{name}/data")).display().to_string();
    request
}

/// kamu's `leaderboard` transform, as written (its engine is RisingWave).
const LEADERBOARD: &str = "select
  *
from (
  select
    row_number() over (partition by 1 order by score desc) as place,
    match_time,
    match_id,
    player_id,
    score
  from player_scores
)
where place <= 2
";

/// `op place player score` of each output record.
fn described(batch: &RecordBatch, place: Option<&str>) -> Vec<String> {
    let ops = ints(batch, "op");
    let players = strings(batch, "player_id");
    let scores = ints(batch, "score");
    let places = place.map(|p| ints(batch, p));
    (0..batch.num_rows())
        .map(|i| match &places {
            Some(places) => format!("{} #{} {} {}", ops[i], places[i], players[i], scores[i]),
            None => format!("{} {} {}", ops[i], players[i], scores[i]),
        })
        .collect()
}

/// Runs transactions of `scores` one after the other; returns each output.
async fn run(fx: &Fixture, query: &str, transactions: &[Vec<Score>]) -> Vec<RecordBatch> {
    let mut outputs = Vec::new();
    let mut checkpoint = None;
    let mut next_offset = 0;
    for (i, scores) in transactions.iter().enumerate() {
        let name = format!("t{i}");
        let request = request(
            fx,
            query,
            scores_input(fx, &format!("slice-{i}"), scores),
            next_offset,
            checkpoint.clone(),
            &name,
        );
        let outcome = transform_ok(&request).await;
        if let Some(interval) = outcome.new_offset_interval {
            assert_eq!(interval.start, next_offset);
            next_offset = interval.end + 1;
        }
        outputs.push(read_parquet(&request.new_data_path));
        checkpoint = Some(request.new_checkpoint_path.clone());
    }
    outputs
}

#[tokio::test]
async fn kamus_leaderboard_runs_as_written_correcting_places_as_scores_arrive_and_are_retracted() {
    let fx = Fixture::new();
    let outputs = run(
        &fx,
        LEADERBOARD,
        &[
            vec![
                score(0, APPEND, 1, "alice", 10),
                score(1, APPEND, 1, "bob", 20),
            ],
            // charlie takes the lead: every place changes.
            vec![
                score(2, APPEND, 2, "charlie", 30),
                score(3, APPEND, 2, "dave", 5),
            ],
            // Nothing in the top two changes.
            vec![score(4, APPEND, 3, "erin", 1)],
            // charlie's score is retracted: bob and alice move back up.
            vec![score(5, RETRACT, 2, "charlie", 30)],
            // A correction of alice's score keeps her second.
            vec![
                score(6, CORRECT_FROM, 1, "alice", 10),
                score(7, CORRECT_TO, 1, "alice", 15),
            ],
        ],
    )
    .await;
    let place = Some("place");
    assert_eq!(
        column_names(&outputs[0]),
        [
            "offset",
            "op",
            "system_time",
            "place",
            "match_time",
            "match_id",
            "player_id",
            "score"
        ]
    );
    assert_eq!(
        described(&outputs[0], place),
        ["0 #1 bob 20", "0 #2 alice 10"]
    );
    assert_eq!(
        described(&outputs[1], place),
        [
            "2 #1 bob 20",
            "3 #1 charlie 30",
            "2 #2 alice 10",
            "3 #2 bob 20"
        ]
    );
    assert_eq!(outputs[2].num_rows(), 0);
    assert_eq!(
        described(&outputs[3], place),
        [
            "2 #1 charlie 30",
            "3 #1 bob 20",
            "2 #2 bob 20",
            "3 #2 alice 10"
        ]
    );
    assert_eq!(
        described(&outputs[4], place),
        ["2 #2 alice 10", "3 #2 alice 15"]
    );
    // Offsets continue across transactions; the event time is the record's.
    assert_eq!(ints(&outputs[1], "offset"), [2, 3, 4, 5]);
    assert_eq!(ints(&outputs[1], "match_time")[1], 2000);
}

#[tokio::test]
async fn deduplication_keeps_each_players_latest_score_correcting_it_when_a_later_match_arrives() {
    let fx = Fixture::new();
    let query = "SELECT match_time, player_id, score FROM ( \
        SELECT match_time, player_id, score, \
               row_number() OVER (PARTITION BY player_id ORDER BY match_time DESC) AS rn \
        FROM player_scores WHERE score >= 0) AS latest \
      WHERE rn = 1";
    let outputs = run(
        &fx,
        query,
        &[
            vec![
                score(0, APPEND, 1, "alice", 10),
                score(1, APPEND, 1, "bob", 20),
                score(2, APPEND, 2, "alice", 12),
            ],
            vec![
                score(3, APPEND, 3, "bob", 25),
                // Filtered out below the ranking: changes nothing.
                score(4, APPEND, 4, "alice", -1),
            ],
            // alice's latest match is retracted: her previous one is the latest again.
            vec![score(5, RETRACT, 2, "alice", 12)],
            // bob's only remaining matches retracted: he leaves the result.
            vec![
                score(6, RETRACT, 3, "bob", 25),
                score(7, RETRACT, 1, "bob", 20),
            ],
        ],
    )
    .await;
    assert_eq!(described(&outputs[0], None), ["0 alice 12", "0 bob 20"]);
    assert_eq!(described(&outputs[1], None), ["2 bob 20", "3 bob 25"]);
    assert_eq!(described(&outputs[2], None), ["2 alice 12", "3 alice 10"]);
    assert_eq!(described(&outputs[3], None), ["1 bob 25"]);
}

#[tokio::test]
async fn ties_share_a_rank_with_rank_and_are_broken_by_input_order_with_row_number() {
    let fx = Fixture::new();
    let scores = vec![
        score(0, APPEND, 1, "alice", 10),
        score(1, APPEND, 2, "bob", 10),
        score(2, APPEND, 3, "carol", 5),
    ];
    let ranked = |function: &str| {
        format!(
            "SELECT place, match_time, player_id, score FROM ( \
               SELECT {function}() OVER (ORDER BY score DESC) AS place, * FROM player_scores) \
             WHERE place <= 2"
        )
    };
    let by_rank = run(&fx, &ranked("rank"), std::slice::from_ref(&scores)).await;
    assert_eq!(
        described(&by_rank[0], Some("place")),
        ["0 #1 alice 10", "0 #1 bob 10"]
    );
    let fx = Fixture::new();
    let by_dense = run(&fx, &ranked("dense_rank"), std::slice::from_ref(&scores)).await;
    assert_eq!(
        described(&by_dense[0], Some("place")),
        ["0 #1 alice 10", "0 #1 bob 10", "0 #2 carol 5"]
    );
    let fx = Fixture::new();
    let by_row = run(&fx, &ranked("row_number"), std::slice::from_ref(&scores)).await;
    assert_eq!(
        described(&by_row[0], Some("place")),
        ["0 #1 alice 10", "0 #2 bob 10"]
    );
}

#[tokio::test]
async fn window_functions_outside_the_top_n_form_are_refused_saying_why() {
    let fx = Fixture::new();
    for (query, expected) in [
        (
            "SELECT row_number() OVER (ORDER BY score DESC) AS place, match_time FROM player_scores",
            "needs a bound on the rank",
        ),
        (
            "SELECT * FROM (SELECT sum(score) OVER (PARTITION BY player_id ORDER BY match_time) AS total, \
             match_time FROM player_scores) WHERE total <= 2",
            "`sum` is not supported over a stream",
        ),
        (
            "SELECT * FROM (SELECT row_number() OVER (PARTITION BY player_id) AS place, match_time \
             FROM player_scores) WHERE place <= 2",
            "needs an ORDER BY",
        ),
        (
            "SELECT * FROM (SELECT row_number() OVER (ORDER BY score) AS place, match_time \
             FROM player_scores) WHERE place <= 0",
            "keeps no rank",
        ),
        (
            "SELECT * FROM (SELECT row_number() OVER (ORDER BY score) AS place, match_time \
             FROM player_scores) WHERE place <= 2 ORDER BY match_time",
            "ORDER BY at the top",
        ),
        (
            "SELECT max(place) AS place, max(match_time) AS match_time FROM (SELECT row_number() \
             OVER (ORDER BY score) AS place, match_time FROM player_scores) WHERE place <= 2",
            "over a window function is not supported",
        ),
    ] {
        let request = request(&fx, query, scores_input(&fx, "s", &[]), 0, None, "refused");
        let message = transform(&request).await.0.invalid_query();
        assert!(message.contains(expected), "{query}: {message}");
    }
}

#[tokio::test]
async fn a_top_n_checkpoint_is_kept_to_its_query_and_migrate_query_is_refused_naming_recompute() {
    let fx = Fixture::new();
    let first = request(
        &fx,
        LEADERBOARD,
        scores_input(&fx, "s0", &[score(0, APPEND, 1, "alice", 10)]),
        0,
        None,
        "t0",
    );
    transform_ok(&first).await;
    // The same query continues; another refuses the checkpoint.
    let other = LEADERBOARD.replace("place <= 2", "place <= 3");
    let second = request(
        &fx,
        &other,
        scores_input(&fx, "s1", &[]),
        1,
        Some(first.new_checkpoint_path.clone()),
        "t1",
    );
    let message = transform(&second).await.0.invalid_query();
    assert!(message.contains("MigrateQuery"), "{message}");
    // A stateless query refuses it too.
    let stateless = request(
        &fx,
        "SELECT match_time, score FROM player_scores",
        scores_input(&fx, "s1", &[]),
        1,
        Some(first.new_checkpoint_path.clone()),
        "t2",
    );
    let message = transform(&stateless).await.0.invalid_query();
    assert!(message.contains("top-N"), "{message}");

    for (prev, next, checkpoint) in [
        (
            LEADERBOARD,
            "SELECT match_time, score FROM player_scores",
            Some(first.new_checkpoint_path.clone()),
        ),
        (
            "SELECT match_time, score FROM player_scores",
            LEADERBOARD,
            None,
        ),
    ] {
        let request = weir_reference_engine::MigrateQueryRequest {
            dataset_id: weir_reference_engine::DatasetId::from_key([9; 32]),
            dataset_alias: "leaderboard".into(),
            system_time: system_time(),
            vocab: match_time_vocab(),
            prev_transform: sql(prev),
            next_transform: sql(next),
            query_inputs: vec![scores_input(&fx, "s", &[])],
            next_offset: 1,
            prev_checkpoint_path: checkpoint,
            new_checkpoint_path: fx.path("migrate/checkpoint").display().to_string(),
            new_data_path: fx.path("migrate/data").display().to_string(),
        };
        let message = terminal(
            weir_reference_engine::ReferenceEngine::new()
                .migrate_query(&request, &weir_reference_engine::NoProgress)
                .await,
        )
        .invalid_query();
        assert!(
            message.contains("top-N") && message.contains("weir pull --recompute"),
            "{message}"
        );
    }
}

/// Rows of `batch`'s columns `names` as text.
fn rows(batch: &RecordBatch, names: &[&str]) -> Vec<String> {
    let columns: Vec<_> = names
        .iter()
        .map(|n| cast(batch.column_by_name(n).unwrap(), &DataType::Utf8).unwrap())
        .collect();
    (0..batch.num_rows())
        .map(|i| {
            columns
                .iter()
                .map(|c| {
                    let c = c.as_any().downcast_ref::<StringArray>().unwrap();
                    if c.is_null(i) {
                        "∅".to_owned()
                    } else {
                        c.value(i).to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

/// The query over the live records (appends not retracted), in DataFusion.
async fn batch_result(fx: &Fixture, query: &str, live: &[Score], names: &[&str]) -> Vec<String> {
    let ctx = SessionContext::new();
    let path = write_scores(fx, "live.parquet", live);
    ctx.register_parquet(
        "player_scores",
        path.to_str().unwrap(),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    let batches = ctx.sql(query).await.unwrap().collect().await.unwrap();
    let mut out: Vec<String> = batches.iter().flat_map(|b| rows(b, names)).collect();
    out.sort();
    out
}

/// The changelogs applied in order: the multiset of rows they leave.
fn applied(outputs: &[RecordBatch], names: &[&str]) -> Result<Vec<String>, String> {
    let mut live: BTreeMap<String, usize> = BTreeMap::new();
    for output in outputs {
        let ops = ints(output, "op");
        for (row, op) in rows(output, names).into_iter().zip(ops) {
            match op as i32 {
                APPEND | CORRECT_TO => *live.entry(row).or_default() += 1,
                RETRACT | CORRECT_FROM => match live.get_mut(&row) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ => return Err(format!("{row} retracted but not in the result")),
                },
                other => return Err(format!("unknown op {other}")),
            }
        }
    }
    Ok(live
        .into_iter()
        .flat_map(|(row, n)| std::iter::repeat_n(row, n))
        .collect())
}

/// Random input: appends of scores and retractions of live ones (by index among the live).
fn changes(max: usize) -> impl Strategy<Value = Vec<(bool, u8, i64, usize)>> {
    prop::collection::vec(
        (prop::bool::weighted(0.25), 0u8..3, 0i64..6, 0usize..50),
        1..max,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn the_applied_changelog_equals_the_batch_ranking_of_the_live_records(
        raw in changes(24),
        cuts in prop::collection::vec(0usize..30, 0..5),
        function in 0usize..3,
        bound in 1i64..4,
        partitioned in any::<bool>(),
    ) {
        // Offsets follow the input; each append has its own match id, so a retraction names one record.
        let mut scores: Vec<Score> = Vec::new();
        let mut live: Vec<Score> = Vec::new();
        for (i, (retract, player, points, pick)) in raw.iter().enumerate() {
            let offset = scores.len() as i64;
            if *retract && !live.is_empty() {
                let gone = live.remove(pick % live.len());
                scores.push(Score { offset, op: RETRACT, ..gone });
            } else {
                let s = score(offset, APPEND, i as i64, &format!("p{player}"), *points);
                live.push(s.clone());
                scores.push(s);
            }
        }
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (scores.len() + 1)).collect();
        bounds.extend([0, scores.len()]);
        bounds.sort_unstable();
        let transactions: Vec<Vec<Score>> =
            bounds.windows(2).map(|w| scores[w[0]..w[1]].to_vec()).collect();

        let function = ["row_number", "rank", "dense_rank"][function];
        let partition = if partitioned { "PARTITION BY player_id" } else { "" };
        let query = |tie_break: &str| format!(
            "SELECT place, match_time, match_id, player_id, score FROM ( \
               SELECT {function}() OVER ({partition} ORDER BY score DESC{tie_break}) AS place, \
                      match_time, match_id, player_id, score \
               FROM player_scores WHERE score <> 3) AS ranked \
             WHERE place <= {bound}"
        );
        // The engine breaks row_number's ties by input order; the batch query says so.
        let batch_query = query(if function == "row_number" { ", \"offset\"" } else { "" });
        let names = ["place", "match_time", "match_id", "player_id", "score"];
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let fx = Fixture::new();
            let expected = batch_result(&fx, &batch_query, &live, &names).await;
            let outputs = run(&fx, &query(""), &transactions).await;
            // Each CorrectFrom is followed at once by its CorrectTo, and no CorrectTo stands alone.
            for output in &outputs {
                let ops = ints(output, "op");
                for (i, op) in ops.iter().enumerate() {
                    let next = ops.get(i + 1).copied();
                    let previous = i.checked_sub(1).map(|p| ops[p]);
                    if *op == i64::from(CORRECT_FROM) {
                        prop_assert_eq!(next, Some(i64::from(CORRECT_TO)));
                    }
                    if *op == i64::from(CORRECT_TO) {
                        prop_assert_eq!(previous, Some(i64::from(CORRECT_FROM)));
                    }
                }
            }
            let result = applied(&outputs, &names).map_err(TestCaseError::fail)?;
            prop_assert_eq!(result, expected);
            Ok::<(), TestCaseError>(())
        })?;
    }
}

#[tokio::test]
async fn validate_query_gives_a_top_ns_columns_and_derive_provenance_refuses_it() {
    let fx = Fixture::new();
    let input = scores_input(&fx, "s", &[]);
    let validate = weir_reference_engine::ValidateQueryRequest {
        dataset_id: weir_reference_engine::DatasetId::from_key([9; 32]),
        dataset_alias: "leaderboard".into(),
        vocab: match_time_vocab(),
        transform: sql(LEADERBOARD),
        query_inputs: vec![weir_reference_engine::ValidateQueryInput {
            dataset_id: input.dataset_id,
            dataset_alias: input.dataset_alias.clone(),
            query_alias: input.query_alias.clone(),
            vocab: input.vocab.clone(),
            schema_file: input.schema_file.clone(),
        }],
        output_schema_path: fx.path("validate/schema").display().to_string(),
    };
    let outcome = terminal(
        weir_reference_engine::ReferenceEngine::new()
            .validate_query(&validate)
            .await,
    )
    .success();
    let names: Vec<&str> = outcome
        .output_columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "offset",
            "op",
            "system_time",
            "place",
            "match_time",
            "match_id",
            "player_id",
            "score"
        ]
    );

    let provenance = weir_reference_engine::DeriveProvenanceRequest {
        dataset_id: weir_reference_engine::DatasetId::from_key([9; 32]),
        dataset_alias: "leaderboard".into(),
        system_time: system_time(),
        vocab: match_time_vocab(),
        transform: sql(LEADERBOARD),
        query_inputs: vec![scores_input(&fx, "p", &[score(0, APPEND, 1, "alice", 10)])],
        next_offset: 0,
        prev_checkpoint_path: None,
        output_offsets: vec![0],
    };
    let message = terminal(
        weir_reference_engine::ReferenceEngine::new()
            .derive_provenance(&provenance, &weir_reference_engine::NoProgress)
            .await,
    )
    .invalid_query();
    assert!(message.contains("top-N"), "{message}");
}
