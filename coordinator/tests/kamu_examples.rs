//! kamu's `covid` and `currency_conversion` example pipelines, as manifests shaped like kamu's
//! (`tests/fixtures/kamu/`), run with only their source locations changed: the https sources are served by
//! a local test server (its certificate authority made by the test) with generated data shaped like the
//! originals, and kamu's engine name `flink` is mapped to Weir's engine in `weir.yaml`. covid's daily
//! counts run on RisingWave in kamu; `weir validate` refuses that one dataset with what would serve it.
//! covid's union ends with an ORDER BY, which orders each transaction's output as kamu's engine does: it
//! runs as written.
use crate::common;
use crate::support_http;

use std::io::Write as _;
use std::path::Path;

use common::*;
use support_http::{Route, Server};

/// The host the fixtures name; the tests serve it from 127.0.0.1.
const ORIGIN: &str = "https://datasets.example.org";

/// A copy of a fixture workspace with its source URLs pointed at `server`.
fn fixture(name: &str, server: &Server) -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kamu")
        .join(name);
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("datasets")).unwrap();
    for entry in std::fs::read_dir(from.join("datasets")).unwrap() {
        let entry = entry.unwrap();
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let text = text.replace(ORIGIN, &server.url(""));
        std::fs::write(ws.path().join("datasets").join(entry.file_name()), text).unwrap();
    }
    ws
}

fn run(ws: &Path, server: &Server, args: &[&str]) -> (Option<i32>, String, String) {
    let out = weir(ws)
        .env("WEIR_CA_CERTIFICATES", server.ca_pem.as_ref().unwrap())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn succeeds(ws: &Path, server: &Server, args: &[&str]) -> String {
    let (code, out, err) = run(ws, server, args);
    assert_eq!(
        code,
        Some(0),
        "weir {args:?}\nstdout:\n{out}\nstderr:\n{err}"
    );
    out
}

fn records(ws: &Path, dataset: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&ok(
        ws,
        &["--format", "json", "tail", dataset, "-n", "100000"],
    ))
    .unwrap();
    v["records"].as_array().cloned().unwrap()
}

/// A small deterministic generator (no data of kamu's is used).
struct Gen(u64);

impl Gen {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.next(from.len())]
    }

    /// A date in March to May 2020.
    fn date(&mut self) -> String {
        let day = self.next(90);
        let (month, d) = match day {
            0..=30 => (3, day + 1),
            31..=60 => (4, day - 30),
            _ => (5, day - 60),
        };
        format!("2020-{month:02}-{:02}", d.min(30))
    }
}

fn gz(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

/// Alberta's layout: an unnamed quoted id column, then quoted fields with spaces in their names.
fn alberta(rows: usize, g: &mut Gen) -> String {
    let mut s = String::from(
        "\"\",\"Date reported\",\"Alberta Health Services Zone\",\"Gender\",\"Age group\",\"Case status\",\"Case type\"\n",
    );
    for id in 1..=rows {
        let zone = g.pick(&["Calgary Zone", "Edmonton Zone", "North Zone", ""]);
        let gender = g.pick(&["Female", "Male", "Unknown"]);
        let age = g.pick(&[
            "1-4 years",
            "20-29 years",
            "50-59 years",
            "80+ years",
            "Unknown",
        ]);
        let status = g.pick(&["Recovered", "Died", "Active"]);
        s.push_str(&format!(
            "\"{id}\",\"{}\",\"{zone}\",\"{gender}\",\"{age}\",\"{status}\",\"Confirmed\"\n",
            g.date()
        ));
    }
    s
}

/// British Columbia's layout: plain dates, some empty age groups.
fn british_columbia(rows: usize, g: &mut Gen) -> String {
    let mut s = String::from("Reported_Date,HA,Sex,Age_Group,Classification_Reported\n");
    for _ in 0..rows {
        s.push_str(&format!(
            "{},{},{},{},{}\n",
            g.date(),
            g.pick(&["Fraser", "Vancouver Coastal", "Interior", "Northern"]),
            g.pick(&["F", "M", "U"]),
            g.pick(&["<10", "10-19", "40-49", "90+", ""]),
            g.pick(&["Lab-diagnosed", "Epi-linked"])
        ));
    }
    s
}

/// Ontario's layout (18 columns), some without a test date.
fn ontario(rows: usize, g: &mut Gen) -> String {
    let mut s = String::from(
        "Row_ID,Accurate_Episode_Date,Case_Reported_Date,Test_Reported_Date,Specimen_Date,Age_Group,Client_Gender,Case_AcquisitionInfo,Outcome1,Outbreak_Related,Reporting_PHU_ID,Reporting_PHU,Reporting_PHU_Address,Reporting_PHU_City,Reporting_PHU_Postal_Code,Reporting_PHU_Website,Reporting_PHU_Latitude,Reporting_PHU_Longitude\n",
    );
    for id in 1..=rows {
        let reported = g.date();
        let tested = if g.next(4) == 0 {
            String::new()
        } else {
            g.date()
        };
        let (city, lat, lon) = [
            ("Ottawa", "45.34", "-75.76"),
            ("Toronto", "43.66", "-79.38"),
            ("Hamilton", "43.26", "-79.87"),
        ][g.next(3)];
        s.push_str(&format!(
            "{id},{reported},{reported},{tested},{reported},{},{},CC,{},,{},{city} Public Health,1 Main Street,{city},K0K 0K0,www.example.org,{lat},{lon}\n",
            g.pick(&["<20", "20s", "50s", "80s", "90+"]),
            g.pick(&["FEMALE", "MALE", "GENDER DIVERSE"]),
            g.pick(&["Resolved", "Fatal", "Not Resolved"]),
            2200 + g.next(50),
        ));
    }
    s
}

/// Quebec's layout (13 columns, some coordinates and region ids missing).
fn quebec(rows: usize, g: &mut Gen) -> String {
    let mut s = String::from(
        "date_reported,objectid,row_id,health_region,age_group,gender,exposure,case_status,latitude,longitude,province,province_abbr,hr_uid\n",
    );
    for id in 1..=rows {
        let located = g.next(5) != 0;
        s.push_str(&format!(
            "{},{id},{},{},{},{},Not Reported,Confirmed,{},{},Quebec,QC,{}\n",
            g.date(),
            1000 + id,
            g.pick(&["Montreal", "Laval", "Capitale-Nationale"]),
            g.pick(&["<20", "20-29", "80+", "Not Reported"]),
            g.pick(&["Female", "Male"]),
            if located { "45.50" } else { "" },
            if located { "-73.57" } else { "" },
            if located { "2406" } else { "" },
        ));
    }
    s
}

#[test]
fn kamus_covid_pipeline_runs_with_only_its_source_locations_changed() {
    let server = Server::https();
    let mut g = Gen(7);
    let (ab, bc, on, qc) = (120, 150, 130, 110);
    server.route("/covid/alberta-cases.csv", Route::body(alberta(ab, &mut g)));
    server.route(
        "/covid/bc-case-details.csv",
        Route::body(british_columbia(bc, &mut g)),
    );
    server.route(
        "/covid/ontario-cases.csv.gz",
        Route::body(gz(&ontario(on, &mut g))),
    );
    server.route(
        "/covid/quebec-cases.csv.gz",
        Route::body(gz(&quebec(qc, &mut g))),
    );
    let ws = fixture("covid", &server);

    // The RisingWave step is the one thing Weir cannot serve: validate says so, with what would.
    let (code, _, err) = run(ws.path(), &server, &["validate"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("covid19.canada.daily-cases.yaml"), "{err}");
    assert!(err.contains("`risingwave`"), "{err}");
    assert_eq!(
        err.matches("field `").count(),
        1,
        "only that step is refused: {err}"
    );
    std::fs::remove_file(ws.path().join("datasets/covid19.canada.daily-cases.yaml")).unwrap();

    succeeds(ws.path(), &server, &["validate"]);
    // The union's closing ORDER BY orders each transaction's output (the reference engine's README):
    // the manifest runs as written.
    succeeds(ws.path(), &server, &["pull", "--all", "--quiet"]);
    for (dataset, n) in [
        ("covid19.alberta.case-details", ab),
        ("covid19.british-columbia.case-details", bc),
        ("covid19.ontario.case-details", on),
        ("covid19.quebec.case-details", qc),
        ("covid19.alberta.case-details.hm", ab),
        ("covid19.quebec.case-details.hm", qc),
    ] {
        assert_eq!(
            head_and_records(ws.path(), dataset).1,
            n as u64,
            "{dataset}"
        );
    }
    let canada = records(ws.path(), "covid19.canada.case-details");
    assert_eq!(canada.len(), ab + bc + on + qc);
    for province in ["AB", "BC", "ON", "QC"] {
        assert!(
            canada.iter().any(|r| r["province"] == province),
            "{province}"
        );
    }
    assert!(
        canada
            .iter()
            .all(|r| ["M", "F", "U"].contains(&r["gender"].as_str().unwrap_or("U")))
    );

    // Nothing changed at the sources: the next pull sends conditional requests and adds nothing.
    let before = list(ws.path());
    succeeds(ws.path(), &server, &["pull", "--all", "--quiet"]);
    assert_eq!(list(ws.path()), before);
}

/// The Bank of Canada valet layout: a preamble, then `OBSERVATIONS` and the CSV of daily rates.
fn rates(days: usize) -> String {
    let columns = [
        "FXAUDCAD", "FXBRLCAD", "FXCNYCAD", "FXEURCAD", "FXHKDCAD", "FXINRCAD", "FXIDRCAD",
        "FXJPYCAD", "FXMYRCAD", "FXMXNCAD", "FXNZDCAD", "FXNOKCAD", "FXPENCAD", "FXPLNCAD",
        "FXRUBCAD", "FXSARCAD", "FXSGDCAD", "FXZARCAD", "FXKRWCAD", "FXSEKCAD", "FXCHFCAD",
        "FXTWDCAD", "FXTHBCAD", "FXTRYCAD", "FXGBPCAD", "FXUSDCAD", "FXVNDCAD",
    ];
    let mut s = String::from(
        "\"TERMS AND CONDITIONS\"\n\"https://example.org/terms\"\n\n\"SERIES\"\n\"id\",\"label\",\"description\"\n\"FXUSDCAD\",\"USD/CAD\",\"US dollar to Canadian dollar daily exchange rate\"\n\n\"OBSERVATIONS\"\n\"date\"",
    );
    for c in columns {
        s.push_str(&format!(",\"{c}\""));
    }
    s.push('\n');
    for d in 0..days {
        let date =
            chrono::NaiveDate::from_ymd_opt(2017, 1, 3).unwrap() + chrono::Days::new(d as u64);
        s.push_str(&format!("\"{date}\""));
        for (i, _) in columns.iter().enumerate() {
            // USD/CAD moves by 1/10000 a day from 1.3000.
            let v = if i == 25 {
                1.3 + d as f64 / 10000.0
            } else {
                0.5 + i as f64 / 100.0
            };
            s.push_str(&format!(",\"{v:.4}\""));
        }
        s.push('\n');
    }
    s
}

#[test]
fn kamus_currency_conversion_runs_with_only_its_source_locations_changed() {
    let server = Server::https();
    server.route(
        "/valet/observations/group/FX_RATES_DAILY/csv?start_date=2017-01-03",
        Route::body(rates(120)),
    );
    let ws = fixture("currency_conversion", &server);
    std::fs::write(
        ws.path().join("weir.yaml"),
        "engines:\n  flink:\n    use: datafusion\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.path().join("data")).unwrap();
    std::fs::write(
        ws.path().join("data/transactions.csv"),
        "event_time,symbol,quantity,price,settlement,currency\n2017-01-03,SPY,1,225.24,-225.24,USD\n2017-02-01,SPY,1,227.62,-227.62,USD\n2017-03-01,SPY,1,239.78,-239.78,USD\n",
    )
    .unwrap();
    succeeds(ws.path(), &server, &["validate"]);
    succeeds(ws.path(), &server, &["pull", "--all", "--quiet"]);
    assert_eq!(
        head_and_records(ws.path(), "ca.bankofcanada.exchange-rates.daily").1,
        120
    );
    let cad = records(ws.path(), "my.trading.transactions.cad");
    assert_eq!(cad.len(), 3, "{cad:?}");
    // 2017-02-01 is day 29: USD/CAD 1.3029.
    let feb = cad
        .iter()
        .find(|r| {
            r["event_time"]
                .as_str()
                .unwrap_or("")
                .starts_with("2017-02-01")
        })
        .unwrap();
    let price_cad = feb["price_cad"].as_f64().unwrap();
    assert!((price_cad - 227.62 * 1.3029).abs() < 1e-6, "{feb}");
}
