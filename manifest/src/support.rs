//! The part of ODF's source and transform vocabulary Weir carries out. A manifest that asks for anything
//! else is refused at load (with the field that asked and what to write instead), and a chain written
//! elsewhere that uses it is refused when pulled, never silently ignored.
//!
//! Supported: fetch `Url { url, headers }` (file paths, `http(s)://`, `s3://`) and `FilesGlob { path, order:
//! ByName }` (files in name order), with `eventTime` `FromSystemTime`, `FromMetadata` (a Url) or `FromPath` (a
//! FilesGlob); `prepare` steps `Decompress`
//! (`Gzip`, `Zip` with `subPath`) and `Pipe`; read `Csv` with every option kamu reads (`schema` as an ODF
//! schema or DDL, `ddlSchema`, `separator`, `header`, `inferSchema`, `nullValue`, `quote`, `escape`,
//! `encoding: utf8`, `dateFormat` / `timestampFormat: rfc3339`), `NdJson`, `Parquet`; merge `Append`,
//! `Ledger`, `Snapshot`; `preprocess` and transforms `Sql { engine, query | queries }`; push sources (`AddPushSource`) with those
//! read, preprocess and merge steps. Not supported: fetch
//! `Container`, `Mqtt`, `EthereumLogs`, `cache`, `order:
//! ByEventTime`; read `GeoJson`, `EsriShapefile`, `Json`, `NdGeoJson`; merge `ChangelogStream`,
//! `UpsertStream`; `temporalTables` in a `preprocess` (a transform may declare them: a temporal table join,
//! see the reference engine's README); and a user-given `version` of a transform, since Weir records the
//! engine that ran a step there (see the crate README).

use weir_odf::{
    AddPushSource, CompressionFormat, EventTimeSource, FetchStep, MergeStrategy, PrepStep,
    ReadStep, SetPollingSource, SourceOrdering, TransformSql,
};

/// Something a manifest or chain asks for that Weir does not do: the field path (below the event) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The field, relative to the event (`fetch.kind`, `read.quote`, ...).
    pub field: String,
    /// What is not supported.
    pub message: String,
}

fn unsupported(field: &str, message: impl Into<String>) -> Unsupported {
    Unsupported {
        field: field.to_owned(),
        message: message.into(),
    }
}

fn kind(field: &str, kind: &str) -> Unsupported {
    unsupported(
        &format!("{field}.kind"),
        format!("`{kind}` is not supported by Weir"),
    )
}

fn option<T>(field: &str, name: &str, value: &Option<T>) -> Result<(), Unsupported> {
    match value {
        Some(_) => Err(unsupported(
            &format!("{field}.{name}"),
            format!("`{name}` is not supported by Weir"),
        )),
        None => Ok(()),
    }
}

/// The kind name of a fetch step.
pub fn fetch_kind(f: &FetchStep) -> &'static str {
    f.kind_name()
}

/// The kind name of a read step.
pub fn read_kind(r: &ReadStep) -> &'static str {
    r.kind_name()
}

/// The kind name of a merge strategy.
pub fn merge_kind(m: &MergeStrategy) -> &'static str {
    m.kind_name()
}

/// Checks that Weir can carry out a polling source; returns every field it cannot, each with what to do
/// instead.
pub fn check_polling_source(src: &SetPollingSource) -> Result<(), Vec<Unsupported>> {
    let mut errors = Vec::new();
    let mut check = |r: Result<(), Unsupported>| {
        if let Err(e) = r {
            errors.push(e);
        }
    };
    for (i, step) in src.prepare.iter().flatten().enumerate() {
        check(check_prep_step(&format!("prepare[{i}]"), step));
    }
    match &src.fetch {
        FetchStep::Url(u) => {
            check(check_event_time("fetch", u.event_time.as_ref(), false));
            check(option_with(
                "fetch",
                "cache",
                &u.cache,
                "`cache` is not supported by Weir (a URL is fetched on every pull, conditionally: an unchanged resource adds nothing); remove it",
            ));
            for (i, h) in u.headers.iter().flatten().enumerate() {
                if h.name.trim().is_empty() || h.name.contains([':', '\n', '\r']) {
                    check(Err(unsupported(
                        &format!("fetch.headers[{i}].name"),
                        format!("`{}` is not an HTTP header name", h.name),
                    )));
                }
            }
        }
        FetchStep::FilesGlob(g) => {
            check(check_event_time("fetch", g.event_time.as_ref(), true));
            check(option_with(
                "fetch",
                "cache",
                &g.cache,
                "`cache` is not supported by Weir (a FilesGlob ingests each new file once); remove it",
            ));
            if matches!(g.order, Some(SourceOrdering::ByEventTime)) {
                check(Err(unsupported(
                    "fetch.order",
                    "`ByEventTime` is not supported by Weir (files are ingested in name order); name the files so that they sort by time, and use `order: ByName` or leave `order` out",
                )));
            }
        }
        FetchStep::Container(_) => check(Err(unsupported(
            "fetch.kind",
            "`Container` is not supported by Weir (it runs no fetch containers); run the container yourself to write files and fetch them with `kind: FilesGlob`, or serve them and use `kind: Url`",
        ))),
        other => check(Err(unsupported(
            "fetch.kind",
            format!(
                "`{}` is not supported by Weir; write what it delivers to files and fetch them with `kind: FilesGlob`",
                fetch_kind(other)
            ),
        ))),
    }
    match &src.read {
        ReadStep::Csv(c) => {
            check(one_char("read", "separator", c.separator.as_deref(), false));
            check(one_char("read", "quote", c.quote.as_deref(), false));
            check(one_char("read", "escape", c.escape.as_deref(), true));
            check(encoding("read", c.encoding.as_deref()));
            check(time_format("read", "dateFormat", c.date_format.as_deref()));
            check(time_format(
                "read",
                "timestampFormat",
                c.timestamp_format.as_deref(),
            ));
            if c.infer_schema == Some(true) && c.schema.is_some() {
                check(Err(unsupported(
                    "read.inferSchema",
                    "`inferSchema: true` has no effect with a `schema`; remove one of them",
                )));
            }
        }
        ReadStep::NdJson(j) => {
            check(encoding("read", j.encoding.as_deref()));
            check(time_format("read", "dateFormat", j.date_format.as_deref()));
            check(time_format(
                "read",
                "timestampFormat",
                j.timestamp_format.as_deref(),
            ));
        }
        ReadStep::Parquet(_) => {}
        ReadStep::Json(_) => check(Err(unsupported(
            "read.kind",
            "`Json` is not supported by Weir; turn the array into one object per line (e.g. a `prepare` step `{kind: Pipe, command: [jq, -c, '.[]']}`, with `.result[]` for a `subPath: result`) and read it with `kind: NdJson`",
        ))),
        other => check(Err(unsupported(
            "read.kind",
            format!(
                "`{}` is not supported by Weir (it reads Csv, NdJson and Parquet); convert the data to one of them",
                read_kind(other)
            ),
        ))),
    }
    match &src.merge {
        MergeStrategy::Append | MergeStrategy::Ledger(_) | MergeStrategy::Snapshot(_) => {}
        other => check(Err(kind("merge", merge_kind(other)))),
    }
    if let Some(p) = &src.preprocess {
        check(option(
            "preprocess",
            "temporalTables",
            &p.sql().temporal_tables,
        ));
        check(check_sql("preprocess", p.sql()));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn option_with<T>(
    field: &str,
    name: &str,
    value: &Option<T>,
    message: &str,
) -> Result<(), Unsupported> {
    match value {
        Some(_) => Err(unsupported(&format!("{field}.{name}"), message)),
        None => Ok(()),
    }
}

fn check_prep_step(field: &str, step: &PrepStep) -> Result<(), Unsupported> {
    match step {
        PrepStep::Decompress(d) => match (&d.format, &d.sub_path) {
            (CompressionFormat::Gzip, Some(_)) => Err(unsupported(
                &format!("{field}.subPath"),
                "a gzip file holds one file: `subPath` is for `format: Zip`",
            )),
            _ => Ok(()),
        },
        PrepStep::Pipe(p) => match p.command.first() {
            Some(program) if !program.trim().is_empty() => Ok(()),
            _ => Err(unsupported(
                &format!("{field}.command"),
                "a Pipe needs a command: the program and its arguments, e.g. [sed, -e, '1,/OBSERVATIONS/d']",
            )),
        },
    }
}

fn check_event_time(
    field: &str,
    source: Option<&EventTimeSource>,
    glob: bool,
) -> Result<(), Unsupported> {
    match source {
        None | Some(EventTimeSource::FromSystemTime) => Ok(()),
        Some(EventTimeSource::FromMetadata) if !glob => Ok(()),
        Some(EventTimeSource::FromPath(p)) if glob => match regex::Regex::new(&p.pattern) {
            Ok(re) if re.captures_len() > 1 => Ok(()),
            Ok(_) => Err(unsupported(
                &format!("{field}.eventTime.pattern"),
                "the pattern needs a group (`(...)`) around the time in the file name",
            )),
            Err(e) => Err(unsupported(
                &format!("{field}.eventTime.pattern"),
                format!("not a regular expression: {e}"),
            )),
        },
        Some(EventTimeSource::FromMetadata) => Err(unsupported(
            &format!("{field}.eventTime"),
            "`FromMetadata` is for a `Url` source (as in kamu); for files use `FromPath` with a pattern on the file name",
        )),
        Some(EventTimeSource::FromPath(_)) => Err(unsupported(
            &format!("{field}.eventTime"),
            "`FromPath` is for a `FilesGlob` source (as in kamu); for a `Url` use `FromMetadata` (its Last-Modified)",
        )),
    }
}

fn one_char(
    field: &str,
    name: &str,
    value: Option<&str>,
    empty_ok: bool,
) -> Result<(), Unsupported> {
    match value {
        None => Ok(()),
        Some("") if empty_ok => Ok(()),
        Some(v) if v.len() == 1 => Ok(()),
        Some(v) => Err(unsupported(
            &format!("{field}.{name}"),
            format!(
                "`{name}` must be one ASCII character{}, found {v:?}",
                if empty_ok { " or empty" } else { "" }
            ),
        )),
    }
}

fn encoding(field: &str, value: Option<&str>) -> Result<(), Unsupported> {
    match value {
        None => Ok(()),
        Some(v) if v.eq_ignore_ascii_case("utf8") || v.eq_ignore_ascii_case("utf-8") => Ok(()),
        Some(v) => Err(unsupported(
            &format!("{field}.encoding"),
            format!(
                "encoding {v:?} is not supported (Weir, like kamu, reads `utf8`); convert the file, e.g. with a `prepare` step `{{kind: Pipe, command: [iconv, -f, {v}, -t, UTF-8]}}`"
            ),
        )),
    }
}

fn time_format(field: &str, name: &str, value: Option<&str>) -> Result<(), Unsupported> {
    match value {
        None => Ok(()),
        Some(v) if v.eq_ignore_ascii_case("rfc3339") => Ok(()),
        Some(v) => Err(unsupported(
            &format!("{field}.{name}"),
            format!(
                "`{name}: {v}` is not supported (Weir, like kamu, reads `rfc3339`); read the column as a string and parse it in a `preprocess` query, e.g. `to_timestamp(col, '%d/%m/%Y')`"
            ),
        )),
    }
}

/// Checks that Weir can carry out a push source: its read, preprocess and merge steps are checked as a
/// polling source's (a push source has no fetch or prepare step).
pub fn check_push_source(src: &AddPushSource) -> Result<(), Vec<Unsupported>> {
    check_polling_source(&SetPollingSource {
        fetch: FetchStep::FilesGlob(weir_odf::FetchStepFilesGlob {
            path: String::new(),
            event_time: None,
            cache: None,
            order: None,
        }),
        prepare: None,
        read: src.read.clone(),
        preprocess: src.preprocess.clone(),
        merge: src.merge.clone(),
    })
}

/// Checks that Weir can run a SQL transform as a manifest gives it (`field` is its path in the event).
pub fn check_sql(field: &str, sql: &TransformSql) -> Result<(), Unsupported> {
    if sql.version.is_some() {
        return Err(unsupported(
            &format!("{field}.version"),
            "`version` is not supported in a manifest: Weir records the engine that ran each step there; pin the engine in weir.yaml instead",
        ));
    }
    Ok(())
}
