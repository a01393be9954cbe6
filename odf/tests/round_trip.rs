//! Random blocks of every event: decode(encode(b)) == b, and encoding what was decoded gives the same bytes.

use chrono::{DateTime, NaiveDate, Utc};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;
use weir_odf::*;

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _./:-]{0,12}"
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    vec(text(), 0..4)
}

fn multihash() -> impl Strategy<Value = Multihash> {
    (any::<bool>(), any::<[u8; 32]>()).prop_map(|(logical, digest)| {
        let codec = if logical {
            Multicodec::Arrow0_Sha3_256
        } else {
            Multicodec::Sha3_256
        };
        Multihash::new(codec, digest).expect("a hash codec")
    })
}

fn dataset_id() -> impl Strategy<Value = DatasetId> {
    any::<[u8; 32]>().prop_map(DatasetId::from_key)
}

fn time() -> impl Strategy<Value = DateTime<Utc>> {
    (
        -9999i32..9999,
        1u32..=366,
        0u32..86_400,
        0u32..1_000_000_000,
    )
        .prop_map(|(y, o, s, n)| {
            let date = NaiveDate::from_yo_opt(y, o)
                .or_else(|| NaiveDate::from_yo_opt(y, 365))
                .expect("day 365 exists");
            date.and_time(
                chrono::NaiveTime::from_num_seconds_from_midnight_opt(s, n).expect("a time of day"),
            )
            .and_utc()
        })
}

fn extra() -> impl Strategy<Value = ExtraAttributes> {
    text().prop_map(|v| ExtraAttributes::from_json(format!(r#"{{"weir.dev/x":"{v}"}}"#)))
}

fn data_slice() -> impl Strategy<Value = DataSlice> {
    (
        multihash(),
        multihash(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(l, p, start, end, size)| DataSlice {
            logical_hash: l,
            physical_hash: p,
            offset_interval: OffsetInterval { start, end },
            size,
        })
}

fn checkpoint() -> impl Strategy<Value = Checkpoint> {
    (multihash(), any::<u64>()).prop_map(|(physical_hash, size)| Checkpoint {
        physical_hash,
        size,
    })
}

fn time_unit() -> impl Strategy<Value = TimeUnit> {
    prop_oneof![
        Just(TimeUnit::Second),
        Just(TimeUnit::Millisecond),
        Just(TimeUnit::Microsecond),
        Just(TimeUnit::Nanosecond)
    ]
}

fn data_type() -> impl Strategy<Value = DataType> {
    let leaf = prop_oneof![
        Just(DataType::Bool),
        Just(DataType::Date),
        Just(DataType::Float16),
        Just(DataType::Float32),
        Just(DataType::Float64),
        Just(DataType::Int8),
        Just(DataType::Int16),
        Just(DataType::Int32),
        Just(DataType::Int64),
        Just(DataType::UInt8),
        Just(DataType::UInt16),
        Just(DataType::UInt32),
        Just(DataType::UInt64),
        Just(DataType::Null),
        Just(DataType::String),
        of(any::<u64>()).prop_map(|fixed_length| DataType::Binary(DataTypeBinary { fixed_length })),
        (any::<u32>(), any::<i32>())
            .prop_map(|(precision, scale)| DataType::Decimal(DataTypeDecimal { precision, scale })),
        time_unit().prop_map(|unit| DataType::Duration(DataTypeDuration { unit })),
        time_unit().prop_map(|unit| DataType::Time(DataTypeTime { unit })),
        (time_unit(), of(text()))
            .prop_map(|(unit, timezone)| DataType::Timestamp(DataTypeTimestamp { unit, timezone })),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(DataType::optional),
            (inner.clone(), of(any::<u64>())).prop_map(|(t, fixed_length)| DataType::List(
                DataTypeList {
                    item_type: Box::new(t),
                    fixed_length
                }
            )),
            (inner.clone(), inner.clone(), of(any::<bool>())).prop_map(|(k, v, keys_sorted)| {
                DataType::Map(DataTypeMap {
                    key_type: Box::new(k),
                    value_type: Box::new(v),
                    keys_sorted,
                })
            }),
            vec((text(), inner, of(extra())), 0..3).prop_map(|fields| {
                DataType::Struct(DataTypeStruct {
                    fields: fields
                        .into_iter()
                        .map(|(name, data_type, extra)| DataField {
                            name,
                            data_type,
                            extra,
                        })
                        .collect(),
                })
            }),
        ]
    })
}

fn transform() -> impl Strategy<Value = Transform> {
    (
        text(),
        of(text()),
        of(text()),
        of(vec(
            (of(text()), text()).prop_map(|(alias, query)| SqlQueryStep { alias, query }),
            0..3,
        )),
        of(vec(
            (text(), texts()).prop_map(|(name, primary_key)| TemporalTable { name, primary_key }),
            0..2,
        )),
    )
        .prop_map(|(engine, version, query, queries, temporal_tables)| {
            Transform::Sql(TransformSql {
                engine,
                version,
                query,
                queries,
                temporal_tables,
            })
        })
}

fn event_time_source() -> impl Strategy<Value = EventTimeSource> {
    prop_oneof![
        Just(EventTimeSource::FromMetadata),
        Just(EventTimeSource::FromSystemTime),
        (text(), of(text())).prop_map(|(pattern, timestamp_format)| EventTimeSource::FromPath(
            EventTimeSourceFromPath {
                pattern,
                timestamp_format
            }
        )),
    ]
}

fn fetch_step() -> impl Strategy<Value = FetchStep> {
    prop_oneof![
        (
            text(),
            of(event_time_source()),
            of(Just(SourceCaching::Forever)),
            of(vec(
                (text(), text()).prop_map(|(name, value)| RequestHeader { name, value }),
                0..2
            ))
        )
            .prop_map(
                |(url, event_time, cache, headers)| FetchStep::Url(FetchStepUrl {
                    url,
                    event_time,
                    cache,
                    headers
                })
            ),
        (
            text(),
            of(event_time_source()),
            of(prop_oneof![
                Just(SourceOrdering::ByEventTime),
                Just(SourceOrdering::ByName)
            ])
        )
            .prop_map(|(path, event_time, order)| FetchStep::FilesGlob(
                FetchStepFilesGlob {
                    path,
                    event_time,
                    cache: None,
                    order
                }
            )),
        (
            text(),
            of(texts()),
            of(texts()),
            of(vec(
                (text(), of(text())).prop_map(|(name, value)| EnvVar { name, value }),
                0..2
            ))
        )
            .prop_map(|(image, command, args, env)| FetchStep::Container(
                FetchStepContainer {
                    image,
                    command,
                    args,
                    env
                }
            )),
        (
            text(),
            any::<i32>(),
            of(text()),
            of(text()),
            vec(
                (
                    text(),
                    of(prop_oneof![
                        Just(MqttQos::AtMostOnce),
                        Just(MqttQos::AtLeastOnce),
                        Just(MqttQos::ExactlyOnce)
                    ])
                )
                    .prop_map(|(path, qos)| MqttTopicSubscription { path, qos }),
                0..2
            )
        )
            .prop_map(|(host, port, username, password, topics)| FetchStep::Mqtt(
                FetchStepMqtt {
                    host,
                    port,
                    username,
                    password,
                    topics
                }
            )),
        (of(any::<u64>()), of(text()), of(text()), of(text())).prop_map(
            |(chain_id, node_url, filter, signature)| FetchStep::EthereumLogs(
                FetchStepEthereumLogs {
                    chain_id,
                    node_url,
                    filter,
                    signature
                }
            )
        ),
    ]
}

fn read_step() -> impl Strategy<Value = ReadStep> {
    prop_oneof![
        (
            of(texts()),
            of(text()),
            of(any::<bool>()),
            of(any::<bool>()),
            of(text())
        )
            .prop_map(|(schema, separator, header, infer_schema, null_value)| {
                ReadStep::Csv(ReadStepCsv {
                    schema,
                    separator,
                    header,
                    infer_schema,
                    null_value,
                    ..Default::default()
                })
            }),
        of(texts()).prop_map(|schema| ReadStep::GeoJson(ReadStepGeoJson { schema })),
        (of(texts()), of(text())).prop_map(|(schema, sub_path)| ReadStep::EsriShapefile(
            ReadStepEsriShapefile { schema, sub_path }
        )),
        of(texts()).prop_map(|schema| ReadStep::Parquet(ReadStepParquet { schema })),
        (of(text()), of(texts()), of(text())).prop_map(|(sub_path, schema, encoding)| {
            ReadStep::Json(ReadStepJson {
                sub_path,
                schema,
                encoding,
                ..Default::default()
            })
        }),
        (of(texts()), of(text())).prop_map(|(schema, date_format)| ReadStep::NdJson(
            ReadStepNdJson {
                schema,
                date_format,
                ..Default::default()
            }
        )),
        of(texts()).prop_map(|schema| ReadStep::NdGeoJson(ReadStepNdGeoJson { schema })),
    ]
}

fn merge_strategy() -> impl Strategy<Value = MergeStrategy> {
    prop_oneof![
        Just(MergeStrategy::Append),
        texts().prop_map(|primary_key| MergeStrategy::Ledger(MergeStrategyLedger { primary_key })),
        (texts(), of(texts())).prop_map(|(primary_key, compare_columns)| MergeStrategy::Snapshot(
            MergeStrategySnapshot {
                primary_key,
                compare_columns
            }
        )),
        texts().prop_map(|primary_key| MergeStrategy::ChangelogStream(
            MergeStrategyChangelogStream { primary_key }
        )),
        texts().prop_map(
            |primary_key| MergeStrategy::UpsertStream(MergeStrategyUpsertStream { primary_key })
        ),
    ]
}

fn prep_step() -> impl Strategy<Value = PrepStep> {
    prop_oneof![
        (
            prop_oneof![Just(CompressionFormat::Gzip), Just(CompressionFormat::Zip)],
            of(text())
        )
            .prop_map(
                |(format, sub_path)| PrepStep::Decompress(PrepStepDecompress { format, sub_path })
            ),
        texts().prop_map(|command| PrepStep::Pipe(PrepStepPipe { command })),
    ]
}

fn event() -> impl Strategy<Value = MetadataEvent> {
    prop_oneof![
        (
            of(multihash()),
            of(any::<u64>()),
            of(data_slice()),
            of(checkpoint()),
            of(time()),
            of((text(), text(), text())),
            of(extra())
        )
            .prop_map(
                |(
                    prev_checkpoint,
                    prev_offset,
                    new_data,
                    new_checkpoint,
                    new_watermark,
                    state,
                    extra,
                )| {
                    MetadataEvent::AddData(AddData {
                        prev_checkpoint,
                        prev_offset,
                        new_data,
                        new_checkpoint,
                        new_watermark,
                        new_source_state: state.map(|(source_name, kind, value)| SourceState {
                            source_name,
                            kind,
                            value,
                        }),
                        extra,
                    })
                }
            ),
        (
            vec(
                (
                    dataset_id(),
                    of(multihash()),
                    of(multihash()),
                    of(any::<u64>()),
                    of(any::<u64>())
                )
                    .prop_map(
                        |(dataset_id, prev_block_hash, new_block_hash, prev_offset, new_offset)| {
                            ExecuteTransformInput {
                                dataset_id,
                                prev_block_hash,
                                new_block_hash,
                                prev_offset,
                                new_offset,
                            }
                        }
                    ),
                0..3
            ),
            of(multihash()),
            of(any::<u64>()),
            of(data_slice()),
            of(checkpoint()),
            of(time())
        )
            .prop_map(
                |(
                    query_inputs,
                    prev_checkpoint,
                    prev_offset,
                    new_data,
                    new_checkpoint,
                    new_watermark,
                )| {
                    MetadataEvent::ExecuteTransform(ExecuteTransform {
                        query_inputs,
                        prev_checkpoint,
                        prev_offset,
                        new_data,
                        new_checkpoint,
                        new_watermark,
                    })
                }
            ),
        (dataset_id(), any::<bool>()).prop_map(|(dataset_id, derivative)| MetadataEvent::Seed(
            Seed {
                dataset_id,
                dataset_kind: if derivative {
                    DatasetKind::Derivative
                } else {
                    DatasetKind::Root
                },
            }
        )),
        (
            fetch_step(),
            of(vec(prep_step(), 0..3)),
            read_step(),
            of(transform()),
            merge_strategy()
        )
            .prop_map(|(fetch, prepare, read, preprocess, merge)| {
                MetadataEvent::SetPollingSource(SetPollingSource {
                    fetch,
                    prepare,
                    read,
                    preprocess,
                    merge,
                })
            }),
        (
            vec(
                (text(), of(text()))
                    .prop_map(|(dataset_ref, alias)| TransformInput { dataset_ref, alias }),
                0..3
            ),
            transform()
        )
            .prop_map(
                |(inputs, transform)| MetadataEvent::SetTransform(SetTransform {
                    inputs,
                    transform
                })
            ),
        (of(text()), of(text()), of(text()), of(text())).prop_map(|(a, b, c, d)| {
            MetadataEvent::SetVocab(SetVocab {
                offset_column: a,
                operation_type_column: b,
                system_time_column: c,
                event_time_column: d,
            })
        }),
        vec(
            (text(), text()).prop_map(|(path, content)| AttachmentEmbedded { path, content }),
            0..3
        )
        .prop_map(|items| MetadataEvent::SetAttachments(SetAttachments {
            attachments: Attachments::Embedded(AttachmentsEmbedded { items })
        })),
        (of(text()), of(texts())).prop_map(|(description, keywords)| MetadataEvent::SetInfo(
            SetInfo {
                description,
                keywords
            }
        )),
        (text(), text(), of(text()), text()).prop_map(
            |(short_name, name, spdx_id, website_url)| {
                MetadataEvent::SetLicense(SetLicense {
                    short_name,
                    name,
                    spdx_id,
                    website_url,
                })
            }
        ),
        (
            of(vec(any::<u8>(), 0..16)),
            of((vec((text(), data_type(), of(extra())), 0..4), of(extra())))
        )
            .prop_map(|(raw_arrow_schema, schema)| MetadataEvent::SetDataSchema(
                SetDataSchema {
                    raw_arrow_schema,
                    schema: schema.map(|(fields, extra)| DataSchema {
                        fields: fields
                            .into_iter()
                            .map(|(name, data_type, extra)| DataField {
                                name,
                                data_type,
                                extra
                            })
                            .collect(),
                        extra,
                    }),
                }
            )),
        (text(), read_step(), of(transform()), merge_strategy()).prop_map(
            |(source_name, read, preprocess, merge)| MetadataEvent::AddPushSource(AddPushSource {
                source_name,
                read,
                preprocess,
                merge
            })
        ),
        text().prop_map(
            |source_name| MetadataEvent::DisablePushSource(DisablePushSource { source_name })
        ),
        Just(MetadataEvent::DisablePollingSource(DisablePollingSource {})),
    ]
}

fn block() -> impl Strategy<Value = MetadataBlock> {
    (time(), of(multihash()), any::<u64>(), event()).prop_map(
        |(system_time, prev_block_hash, sequence_number, event)| MetadataBlock {
            system_time,
            prev_block_hash,
            sequence_number,
            event,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_blocks_decode_to_themselves_and_re_encode_to_the_same_bytes(b in block()) {
        let bytes = b.encode();
        let decoded = MetadataBlock::decode(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&decoded, &b);
        prop_assert_eq!(decoded.encode(), bytes);
    }
}
