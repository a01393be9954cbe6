//! The SQL functions kamu's DataFusion sessions offer beyond DataFusion's own, registered in the engine:
//! the JSON functions of `datafusion-functions-json` and its `->` / `->>` operators.
use crate::common;

use common::*;
use weir_reference_engine::arrow::array::Array;

#[tokio::test]
async fn json_functions_read_fields_of_json_text() {
    let fx = Fixture::new();
    let records = vec![
        record(
            0,
            APPEND,
            0,
            r#"{"name": "Vancouver", "pop": 662248, "area": 115.18, "capital": false, "tags": ["bc", "coast"]}"#,
            1,
        ),
        record(
            1,
            APPEND,
            1000,
            r#"{"name": "Victoria", "pop": 91867, "capital": true}"#,
            2,
        ),
        record(
            2,
            RETRACT,
            0,
            r#"{"name": "Vancouver", "pop": 662248, "area": 115.18, "capital": false, "tags": ["bc", "coast"]}"#,
            1,
        ),
    ];
    let slice = fx.slice(&records, SystemTypes::Compatible);
    let request = fx.request(
        "SELECT event_time, json_get_str(city, 'name') AS name, json_get_int(city, 'pop') AS pop, \
         json_get_float(city, 'area') AS area, json_get_bool(city, 'capital') AS capital, \
         json_length(city, 'tags') AS tags, json_contains(city, 'area') AS has_area, \
         city->>'name' AS name_op, json_get_str(city, 'tags', 1) AS second_tag \
         FROM foo WHERE json_get_int(city, 'pop') > 1000",
        vec![fx.input("foo", vec![slice], Some((0, 2)))],
        0,
    );
    transform_ok(&request).await;
    let out = read_parquet(&request.new_data_path);
    assert_eq!(
        strings(&out, "name"),
        ["Vancouver", "Victoria", "Vancouver"]
    );
    assert_eq!(
        strings(&out, "name_op"),
        ["Vancouver", "Victoria", "Vancouver"]
    );
    assert_eq!(ints(&out, "pop"), [662248, 91867, 662248]);
    assert_eq!(ints(&out, "op"), [APPEND, APPEND, RETRACT].map(i64::from));
    let area = out.column_by_name("area").unwrap();
    let area = area
        .as_any()
        .downcast_ref::<weir_reference_engine::arrow::array::Float64Array>()
        .unwrap();
    assert_eq!(area.value(0), 115.18);
    assert!(area.is_null(1), "Victoria has no area");
    let capital = out.column_by_name("capital").unwrap();
    let capital = capital
        .as_any()
        .downcast_ref::<weir_reference_engine::arrow::array::BooleanArray>()
        .unwrap();
    assert_eq!((capital.value(0), capital.value(1)), (false, true));
    let tags = out.column_by_name("tags").unwrap();
    assert!(tags.is_valid(0) && tags.is_null(1));
    assert_eq!(
        weir_reference_engine::arrow::compute::cast(
            tags,
            &weir_reference_engine::arrow::datatypes::DataType::Int64
        )
        .unwrap()
        .as_any()
        .downcast_ref::<weir_reference_engine::arrow::array::Int64Array>()
        .unwrap()
        .value(0),
        2
    );
    assert_eq!(strings(&out, "second_tag")[0], "coast");
}
