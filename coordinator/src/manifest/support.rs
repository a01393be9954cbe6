//! The part of ODF's source and transform vocabulary Weir carries out. A manifest that asks for anything
//! else is refused at load (with the field that asked), and a chain written elsewhere that uses it is
//! refused when pulled, never silently ignored.
//!
//! Supported: fetch `Url { url }` and `FilesGlob { path }` (files in name order); read `Csv { schema,
//! separator, header }`, `NdJson { schema }`, `Parquet { schema }`; merge `Append`, `Ledger`, `Snapshot`;
//! `preprocess` and transforms `Sql { engine, query | queries }`. Not supported: `prepare` steps, fetch
//! `Container`, `Mqtt`, `EthereumLogs`, `eventTime`, `cache`, `headers`, `order: ByEventTime`; read
//! `GeoJson`, `EsriShapefile`, `Json`, `NdGeoJson` and the CSV / JSON options beyond those above; merge
//! `ChangelogStream`, `UpsertStream`; `temporalTables` in a `preprocess` (a transform may declare them: a
//! temporal table join, see the reference engine's README); and a user-given `version` of a transform, since
//! Weir records the engine that ran a step there (see the crate README).

use odf::{FetchStep, MergeStrategy, ReadStep, SetPollingSource, SourceOrdering, TransformSql};

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

/// Checks that Weir can carry out a polling source.
pub fn check_polling_source(src: &SetPollingSource) -> Result<(), Unsupported> {
    option("", "prepare", &src.prepare).map_err(|mut e| {
        e.field = "prepare".into();
        e
    })?;
    match &src.fetch {
        FetchStep::Url(u) => {
            option("fetch", "eventTime", &u.event_time)?;
            option("fetch", "cache", &u.cache)?;
            option("fetch", "headers", &u.headers)?;
        }
        FetchStep::FilesGlob(g) => {
            option("fetch", "eventTime", &g.event_time)?;
            option("fetch", "cache", &g.cache)?;
            if matches!(g.order, Some(SourceOrdering::ByEventTime)) {
                return Err(unsupported(
                    "fetch.order",
                    "`ByEventTime` is not supported by Weir (files are ingested in name order)",
                ));
            }
        }
        other => return Err(kind("fetch", fetch_kind(other))),
    }
    match &src.read {
        ReadStep::Csv(c) => {
            for (name, v) in [
                ("encoding", &c.encoding),
                ("quote", &c.quote),
                ("escape", &c.escape),
                ("nullValue", &c.null_value),
                ("dateFormat", &c.date_format),
                ("timestampFormat", &c.timestamp_format),
            ] {
                option("read", name, v)?;
            }
            option("read", "inferSchema", &c.infer_schema)?;
        }
        ReadStep::NdJson(j) => {
            for (name, v) in [
                ("dateFormat", &j.date_format),
                ("encoding", &j.encoding),
                ("timestampFormat", &j.timestamp_format),
            ] {
                option("read", name, v)?;
            }
        }
        ReadStep::Parquet(_) => {}
        other => return Err(kind("read", read_kind(other))),
    }
    match &src.merge {
        MergeStrategy::Append | MergeStrategy::Ledger(_) | MergeStrategy::Snapshot(_) => {}
        other => return Err(kind("merge", merge_kind(other))),
    }
    if let Some(p) = &src.preprocess {
        option("preprocess", "temporalTables", &p.sql().temporal_tables)?;
        check_sql("preprocess", p.sql())?;
    }
    Ok(())
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
