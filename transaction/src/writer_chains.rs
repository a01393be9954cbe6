//! Chains built by Weir's writer pass the chain's rules.

/// Chains built by Weir's writer (the transaction's own helpers: manifest events, SetDataSchema,
/// engine records, block linking) from random histories of a root and a derivative always keep the rules.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, TimestampMillisecondArray};
    use arrow::datatypes::{DataType as Arrow, Field, Schema};
    use proptest::prelude::*;

    use chrono::{DateTime, Utc};
    use weir_dataset::chain::append::{link_blocks, record_engine, schema_event};
    use weir_dataset::chain::store::Chain;
    use weir_dataset::chain::validate::check_input_against_chain;
    use weir_dataset::data;
    use weir_dataset::identity::EngineIdentity;
    use weir_odf::*;

    use crate::metadata_events;
    use weir_manifest::snapshot::DatasetManifest;

    const ROOT: &str = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: root\n  kind: Root\n  metadata:\n    - kind: SetPollingSource\n      fetch: {kind: FilesGlob, path: 'data/*.csv'}\n      read: {kind: Csv, header: true}\n      merge: {kind: Append}\n    - kind: SetInfo\n      description: test\n";
    const DERIV: &str = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: deriv\n  kind: Derivative\n  metadata:\n    - kind: SetTransform\n      inputs: [{datasetRef: root}]\n      transform: {kind: Sql, engine: datafusion, query: select * from root}\n";

    fn records(n: usize, first: u64, at: DateTime<Utc>, vocab: &DatasetVocabulary) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("event_time", data::utc_millis(), true),
            Field::new("v", Arrow::Int64, true),
        ]));
        let times: Vec<i64> = (0..n as i64).map(|k| at.timestamp_millis() + k).collect();
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(TimestampMillisecondArray::from(times).with_timezone("UTC")),
                Arc::new(Int64Array::from_iter_values(0..n as i64)),
            ],
        )
        .unwrap();
        data::with_system_columns(&b, &vec![0; n], first, at, vocab).unwrap()
    }

    fn slice(out: &RecordBatch, first: u64) -> DataSlice {
        DataSlice {
            logical_hash: data::logical_hash(std::slice::from_ref(out)).unwrap(),
            physical_hash: Multihash::sha3_256(&first.to_le_bytes()),
            offset_interval: OffsetInterval {
                start: first,
                end: first + out.num_rows() as u64 - 1,
            },
            size: 1,
        }
    }

    fn commit(chain: &mut Chain, events: Vec<MetadataEvent>, now: DateTime<Utc>) {
        let mut blocks = chain.blocks.clone();
        blocks.extend(link_blocks(&chain.summary, events, now));
        *chain = Chain::from_blocks("x", &blocks).unwrap_or_else(|e| panic!("{e}"));
    }

    /// One step of history: ingest `n` rows into the root, or run the derivative on engine `e`.
    #[derive(Debug, Clone)]
    enum Step {
        Ingest(usize),
        Transform { engine: usize, rows: usize },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0usize..4).prop_map(Step::Ingest),
            (0usize..2, 0usize..4).prop_map(|(engine, rows)| Step::Transform { engine, rows }),
        ]
    }

    proptest! {
        #[test]
        fn chains_weir_writes_pass_the_rules(steps in prop::collection::vec(step(), 1..24)) {
            let root_m = DatasetManifest::parse("root.yaml".as_ref(), ROOT).unwrap();
            let deriv_m = DatasetManifest::parse("deriv.yaml".as_ref(), DERIV).unwrap();
            let vocab = DatasetVocabulary::default();
            let engines = ["reference-engine@0.1.0", "reference-engine@0.2.0"].map(|r| EngineIdentity {
                name: "datafusion".into(),
                runtime: "embedded".into(),
                reference: r.into(),
            });
            let (mut root, mut deriv) = (Chain::default(), Chain::default());
            let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
            for (k, s) in steps.into_iter().enumerate() {
                let now = t0 + chrono::Duration::seconds(k as i64);
                match s {
                    Step::Ingest(n) => {
                        let mut events = metadata_events(&root, &root_m, now);
                        let first = root.summary.last_offset.map_or(0, |o| o + 1);
                        let new_data = if n == 0 {
                            None
                        } else {
                            let out = records(n, first, now, &vocab);
                            events.extend(schema_event(root.summary.schema.as_ref(), &out.schema()).unwrap());
                            Some(slice(&out, first))
                        };
                        events.push(MetadataEvent::AddData(AddData {
                            prev_offset: root.summary.last_offset,
                            new_watermark: new_data.as_ref().map(|_| now).or(root.summary.watermark),
                            new_data,
                            ..Default::default()
                        }));
                        commit(&mut root, events, now);
                    }
                    Step::Transform { engine, rows } => {
                        let Some(root_id) = root.summary.dataset_id else { continue };
                        let mut events = metadata_events(&deriv, &deriv_m, now);
                        if deriv.summary.transform.is_none() {
                            let sql = deriv_m.transform.as_ref().unwrap().transform.sql().clone().normalize();
                            events.push(MetadataEvent::SetTransform(SetTransform {
                                inputs: vec![TransformInput {
                                    dataset_ref: root_id.to_string(),
                                    alias: Some("root".into()),
                                }],
                                transform: Transform::Sql(sql),
                            }));
                        }
                        record_engine(&deriv.summary, &mut events, &engines[engine]);
                        let (prev_block, prev_offset) =
                            deriv.summary.consumed.get(&root_id).cloned().unwrap_or_default();
                        // The writer runs a step only when an input has something new.
                        let input = ExecuteTransformInput::advanced(
                            root_id,
                            prev_block,
                            prev_offset,
                            root.summary.head,
                            root.summary.last_offset,
                        );
                        if !input.has_new() {
                            continue;
                        }
                        let first = deriv.summary.last_offset.map_or(0, |o| o + 1);
                        let new_data = if rows == 0 {
                            None
                        } else {
                            let out = records(rows, first, now, &vocab);
                            events.extend(schema_event(deriv.summary.schema.as_ref(), &out.schema()).unwrap());
                            Some(slice(&out, first))
                        };
                        events.push(MetadataEvent::ExecuteTransform(ExecuteTransform {
                            query_inputs: vec![input],
                            prev_offset: deriv.summary.last_offset,
                            new_data,
                            new_watermark: root.summary.watermark,
                            ..Default::default()
                        }));
                        commit(&mut deriv, events, now);
                        let (_, last) = deriv.blocks.last().unwrap();
                        let MetadataEvent::ExecuteTransform(e) = &last.event else { unreachable!() };
                        check_input_against_chain(last.sequence_number, 0, &e.query_inputs[0], &root.blocks)
                            .unwrap();
                        prop_assert_eq!(
                            weir_dataset::identity::in_force(&deriv.blocks[..deriv.blocks.len() - 1]),
                            Some(engines[engine].clone())
                        );
                    }
                }
            }
            for (h, b) in root.blocks.iter().chain(&deriv.blocks) {
                prop_assert_eq!(MetadataBlock::hash(&b.encode()), *h);
                prop_assert_eq!(&MetadataBlock::decode(&b.encode()).unwrap(), b);
            }
        }
    }
}
