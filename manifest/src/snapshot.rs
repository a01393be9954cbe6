//! A dataset manifest in ODF's `DatasetSnapshot` form, read with errors that name the file, line and field.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::support::{self, Unsupported};
use super::yaml::{Located, Position};
use weir_odf::{
    AddPushSource, DatasetKind, MergeStrategy, MetadataEvent, SetPollingSource, SetTransform,
    SetVocab,
};

/// A manifest that cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ManifestError {
    /// The file cannot be read.
    #[error("{file}: cannot read: {message}")]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        message: String,
    },
    /// The YAML is malformed.
    #[error("{file}:{line}:{column}: invalid YAML: {message}")]
    Syntax {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// Several errors, each on a line of its own (every error of a manifest, or of a workspace, found in one
    /// reading).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Several(Vec<ManifestError>),
    /// A field is missing or wrong.
    #[error("{file}:{line}:{column}: field `{field}`: {message}")]
    Field {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field path, e.g. `content.metadata[0].merge.primaryKey`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl ManifestError {
    /// The field path, for field errors.
    pub fn field(&self) -> Option<&str> {
        match self {
            ManifestError::Field { field, .. } => Some(field),
            ManifestError::Several(all) => all.first().and_then(ManifestError::field),
            _ => None,
        }
    }

    /// The line, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ManifestError::Syntax { line, .. } | ManifestError::Field { line, .. } => Some(*line),
            ManifestError::Several(all) => all.first().and_then(ManifestError::line),
            ManifestError::Read { .. } => None,
        }
    }

    /// Every single error this holds, in order.
    pub fn all(&self) -> Vec<&ManifestError> {
        match self {
            ManifestError::Several(all) => all.iter().flat_map(ManifestError::all).collect(),
            one => vec![one],
        }
    }

    /// One error for several: `None` for none, the error itself for one.
    pub fn from_all(mut errors: Vec<ManifestError>) -> Option<ManifestError> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(ManifestError::Several(errors)),
        }
    }
}

/// A dataset as its manifest declares it.
#[derive(Debug, Clone)]
pub struct DatasetManifest {
    /// The file it was read from.
    pub file: PathBuf,
    /// The dataset name.
    pub name: String,
    /// Root or derivative.
    pub kind: DatasetKind,
    /// A root's source.
    pub polling_source: Option<SetPollingSource>,
    /// A root's push sources (`AddPushSource`), which `weir ingest` feeds.
    pub push_sources: Vec<AddPushSource>,
    /// A derivative's transform.
    pub transform: Option<SetTransform>,
    /// Column names, if not the defaults.
    pub vocab: Option<SetVocab>,
    /// Description, licence and attachments (`SetInfo`, `SetLicense`, `SetAttachments`), carried into the
    /// chain as they are.
    pub info: Vec<MetadataEvent>,
    /// Index of each event in `content.metadata`, for error positions.
    pub transform_index: Option<usize>,
    /// Index of the `SetPollingSource` in `content.metadata`.
    pub polling_source_index: Option<usize>,
    /// Index of the `SetVocab` in `content.metadata`.
    pub vocab_index: Option<usize>,
    located: Located,
}

impl DatasetManifest {
    /// Reads and checks a manifest file.
    pub fn load(file: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(file).map_err(|e| ManifestError::Read {
            file: file.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::parse(file, &text)
    }

    /// Parses manifest text; `file` is used in errors.
    ///
    /// ```
    /// use weir_manifest::snapshot::DatasetManifest;
    /// let text = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: trips\n  kind: Root\n  metadata:\n    - kind: SetPollingSource\n      fetch: {kind: FilesGlob, path: 'data/*.csv'}\n      read: {kind: Csv, header: true}\n      merge: {kind: Legder, primaryKey: [id]}\n";
    /// let err = DatasetManifest::parse("trips.yaml".as_ref(), text).unwrap_err();
    /// assert_eq!(err.line(), Some(10));
    /// assert_eq!(err.field(), Some("content.metadata[0].merge.kind"));
    /// ```
    pub fn parse(file: &Path, text: &str) -> Result<Self, ManifestError> {
        let located = Located::parse(text).map_err(|e| ManifestError::Syntax {
            file: file.to_path_buf(),
            line: e.position.line,
            column: e.position.column,
            message: e.message,
        })?;
        let ctx = Ctx {
            file,
            located: &located,
        };
        let root = &located.value;
        match root.get("kind").and_then(Value::as_str) {
            Some("DatasetSnapshot") => {}
            Some(other) => {
                return Err(ctx.err(
                    "kind",
                    format!("expected `DatasetSnapshot`, found `{other}`"),
                ));
            }
            None => return Err(ctx.err("kind", "missing `kind: DatasetSnapshot`")),
        }
        match root.get("version") {
            Some(v) if v.as_u64() == Some(1) => {}
            Some(v) => {
                return Err(ctx.err("version", format!("only version 1 is supported, found {v}")));
            }
            None => return Err(ctx.err("version", "missing `version: 1`")),
        }
        let content = root
            .get("content")
            .ok_or_else(|| ctx.err("content", "missing"))?;
        if let Some(obj) = content.as_object() {
            for key in obj.keys() {
                if !["name", "kind", "metadata"].contains(&key.as_str()) {
                    return Err(ctx.err(
                        &format!("content.{key}"),
                        "unknown field (expected name, kind, metadata)",
                    ));
                }
            }
        }
        let name: String = ctx.typed("content.name", content.get("name"))?;
        if !is_dataset_name(&name) {
            return Err(ctx.err(
                "content.name",
                format!(
                    "`{name}` is not a dataset name: parts separated by single dots, each of letters, digits, `-` and `_`, starting and ending with a letter or digit (e.g. `readings.hot-days`)"
                ),
            ));
        }
        let kind: DatasetKind = ctx.typed("content.kind", content.get("kind"))?;
        let events = match content.get("metadata") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(ctx.err("content.metadata", "expected a list of events")),
        };
        let mut m = DatasetManifest {
            file: file.to_path_buf(),
            name,
            kind,
            polling_source: None,
            push_sources: Vec::new(),
            transform: None,
            vocab: None,
            info: Vec::new(),
            transform_index: None,
            polling_source_index: None,
            vocab_index: None,
            located: located.clone(),
        };
        let mut errors: Vec<ManifestError> = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let mut step = || -> Result<(), ManifestError> {
                let base = format!("content.metadata[{i}]");
                let mut body = event.clone();
                let event_kind = match body.as_object_mut().and_then(|o| o.remove("kind")) {
                    // kamu reads kinds in PascalCase and camelCase (`setAttachments`).
                    Some(Value::String(k)) => event_kind_name(&k),
                    _ => return Err(ctx.err(&format!("{base}.kind"), "every event needs a `kind`")),
                };
                let dup = |what: &str| ctx.err(&base, format!("{what} is declared twice"));
                match event_kind.as_str() {
                    "SetPollingSource" => {
                        if m.polling_source.is_some() {
                            return Err(dup("SetPollingSource"));
                        }
                        normalize_source(&ctx, &base, &mut body)?;
                        let src: SetPollingSource = ctx.typed(&base, Some(&body))?;
                        support::check_polling_source(&src).map_err(|all| {
                            ManifestError::from_all(
                                all.into_iter().map(|e| ctx.unsupported(&base, e)).collect(),
                            )
                            .unwrap_or_else(|| ctx.err(&base, "not supported by Weir"))
                        })?;
                        let primary_key = match &src.merge {
                            MergeStrategy::Ledger(l) => Some(&l.primary_key),
                            MergeStrategy::Snapshot(s) => Some(&s.primary_key),
                            _ => None,
                        };
                        match primary_key {
                            Some(primary_key) if primary_key.is_empty() => {
                                return Err(ctx.err(
                                    &format!("{base}.merge.primaryKey"),
                                    "needs at least one column",
                                ));
                            }
                            _ => {}
                        }
                        if let Some(t) = &src.preprocess {
                            check_sql(&ctx, &format!("{base}.preprocess"), t.sql())?;
                        }
                        m.polling_source = Some(src);
                        m.polling_source_index = Some(i);
                    }
                    "SetTransform" => {
                        if m.transform.is_some() {
                            return Err(dup("SetTransform"));
                        }
                        let t: SetTransform = ctx.typed(&base, Some(&body))?;
                        if t.inputs.is_empty() {
                            return Err(ctx.err(
                                &format!("{base}.inputs"),
                                "a transform needs at least one input",
                            ));
                        }
                        support::check_sql("transform", t.transform.sql())
                            .map_err(|e| ctx.unsupported(&base, e))?;
                        for (k, input) in t.inputs.iter().enumerate() {
                            if let Some((account, _)) = input.dataset_ref.split_once('/') {
                                return Err(ctx.err(
                                &format!("{base}.inputs[{k}].datasetRef"),
                                format!(
                                    "`{}` names a dataset of the account `{account}`; a Weir workspace has no accounts: name the input dataset by its name in this workspace (and its table by `alias`)",
                                    input.dataset_ref
                                ),
                            ));
                            }
                            if input.dataset_ref.parse::<weir_odf::DatasetId>().is_ok() {
                                return Err(ctx.err(
                                &format!("{base}.inputs[{k}].datasetRef"),
                                "name the input dataset by its name in this workspace; Weir records its id in the chain",
                            ));
                            }
                        }
                        check_sql(&ctx, &format!("{base}.transform"), t.transform.sql())?;
                        for (k, table) in t
                            .transform
                            .sql()
                            .temporal_tables
                            .iter()
                            .flatten()
                            .enumerate()
                        {
                            let field = format!("{base}.transform.temporalTables[{k}]");
                            if !t.inputs.iter().any(|i| i.query_alias() == table.name) {
                                return Err(ctx.err(
                                &format!("{field}.name"),
                                format!(
                                    "`{}` is not an input of this transform (inputs are named by their alias, or their dataset name without one)",
                                    table.name
                                ),
                            ));
                            }
                            if table.primary_key.is_empty() {
                                return Err(ctx.err(
                                    &format!("{field}.primaryKey"),
                                    "a temporal table needs its primary key (at least one column)",
                                ));
                            }
                        }
                        m.transform = Some(t);
                        m.transform_index = Some(i);
                    }
                    "SetVocab" => {
                        if m.vocab.is_some() {
                            return Err(dup("SetVocab"));
                        }
                        m.vocab = Some(ctx.typed(&base, Some(&body))?);
                        m.vocab_index = Some(i);
                    }
                    "SetInfo" | "SetLicense" | "SetAttachments" => {
                        if m.info.iter().any(|e| e.name() == event_kind) {
                            return Err(dup(&event_kind));
                        }
                        let mut tagged = body.clone();
                        if let Some(o) = tagged.as_object_mut() {
                            o.insert("kind".into(), Value::String(event_kind.clone()));
                        }
                        m.info.push(ctx.typed(&base, Some(&tagged))?);
                    }
                    "AddPushSource" => {
                        normalize_source(&ctx, &base, &mut body)?;
                        let src = push_source(&ctx, &base, &body, &m)?;
                        m.push_sources.push(src);
                    }
                    "DisablePushSource" | "DisablePollingSource" => {
                        return Err(ctx.err(
                        &format!("{base}.kind"),
                        format!("`{event_kind}` is not supported by Weir (it does not disable sources): remove the event; a changed source is declared again as it now is"),
                    ));
                    }
                    other => {
                        return Err(ctx.err(
                        &format!("{base}.kind"),
                        format!("unsupported event `{other}` (expected SetPollingSource, AddPushSource, SetTransform, SetVocab, SetInfo, SetLicense or SetAttachments)"),
                    ));
                    }
                }
                Ok(())
            };
            if let Err(e) = step() {
                errors.push(e);
            }
        }
        if let Some(i) = m.polling_source_index {
            errors.extend(columns_against_read_schema(&ctx, &m, i));
        }
        if let Some(e) = ManifestError::from_all(errors) {
            return Err(e);
        }
        match m.kind {
            DatasetKind::Root if m.polling_source.is_none() && m.push_sources.is_empty() => {
                return Err(ctx.err(
                    "content.metadata",
                    "a Root dataset needs a SetPollingSource or an AddPushSource event",
                ));
            }
            DatasetKind::Root if m.polling_source.is_some() && !m.push_sources.is_empty() => {
                return Err(ctx.err(
                    "content.metadata",
                    "a Root dataset takes a SetPollingSource or push sources (AddPushSource), not both: Weir pulls one and `weir ingest` feeds the other, into the same records",
                ));
            }
            DatasetKind::Root if m.transform.is_some() => {
                return Err(ctx.err(
                    "content.kind",
                    "a Root dataset cannot have a SetTransform (use kind: Derivative)",
                ));
            }
            DatasetKind::Derivative if m.transform.is_none() => {
                return Err(ctx.err(
                    "content.metadata",
                    "a Derivative dataset needs a SetTransform event",
                ));
            }
            DatasetKind::Derivative if !m.push_sources.is_empty() => {
                return Err(ctx.err(
                    "content.kind",
                    "a Derivative dataset cannot have an AddPushSource (use kind: Root)",
                ));
            }
            DatasetKind::Derivative if m.polling_source.is_some() => {
                return Err(ctx.err(
                    "content.kind",
                    "a Derivative dataset cannot have a SetPollingSource (use kind: Root)",
                ));
            }
            _ => {}
        }
        Ok(m)
    }

    /// An error about this manifest's transform query, positioned at its `query` (or `queries`).
    pub fn transform_query_error(&self, message: impl Into<String>) -> ManifestError {
        let base = format!(
            "content.metadata[{}].transform",
            self.transform_index.unwrap_or(0)
        );
        let field = [format!("{base}.query"), format!("{base}.queries")]
            .into_iter()
            .find(|f| self.located.position_of(f).is_some())
            .unwrap_or(base);
        self.field_error(&field, message)
    }

    /// An error about a field of this manifest, positioned at that field.
    pub fn field_error(&self, field: &str, message: impl Into<String>) -> ManifestError {
        Ctx {
            file: &self.file,
            located: &self.located,
        }
        .err(field, message)
    }
}

/// A root read as it is (no `preprocess`) with a read schema: its primary key and event-time column must be
/// columns of that schema.
fn columns_against_read_schema(
    ctx: &Ctx<'_>,
    m: &DatasetManifest,
    index: usize,
) -> Vec<ManifestError> {
    let Some(src) = &m.polling_source else {
        return Vec::new();
    };
    if src.preprocess.is_some() {
        return Vec::new();
    }
    let ddl = match &src.read {
        weir_odf::ReadStep::Csv(c) => c.schema.as_ref(),
        weir_odf::ReadStep::NdJson(j) => j.schema.as_ref(),
        weir_odf::ReadStep::Parquet(p) => p.schema.as_ref(),
        _ => None,
    };
    let Some(Ok(schema)) = ddl.map(|d| weir_ingest::ddl::parse_ddl(d)) else {
        return Vec::new();
    };
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let listed = names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let base = format!("content.metadata[{index}]");
    let mut errors = Vec::new();
    let key = match &src.merge {
        MergeStrategy::Ledger(l) => Some(&l.primary_key),
        MergeStrategy::Snapshot(s) => Some(&s.primary_key),
        _ => None,
    };
    for (k, column) in key.into_iter().flatten().enumerate() {
        if !names.contains(&column.as_str()) {
            errors.push(ctx.err(
                &format!("{base}.merge.primaryKey[{k}]"),
                format!("`{column}` is not a column of the read schema ({listed})"),
            ));
        }
    }
    if let weir_odf::MergeStrategy::Snapshot(s) = &src.merge {
        for (k, column) in s.compare_columns.iter().flatten().enumerate() {
            if !names.contains(&column.as_str()) {
                errors.push(ctx.err(
                    &format!("{base}.merge.compareColumns[{k}]"),
                    format!("`{column}` is not a column of the read schema ({listed})"),
                ));
            }
        }
    }
    let vocab = m.vocab.as_ref();
    let event_time = vocab
        .and_then(|v| v.event_time_column.clone())
        .unwrap_or_else(|| "event_time".to_string());
    let declared = vocab.is_some_and(|v| v.event_time_column.is_some());
    if !names.contains(&event_time.as_str()) && declared {
        let at = m
            .vocab_index
            .map(|v| format!("content.metadata[{v}].eventTimeColumn"))
            .unwrap_or_else(|| base.clone());
        errors.push(ctx.err(
            &at,
            format!("`{event_time}` is not a column of the read schema ({listed}); name one of them, or add the column in a `preprocess` query"),
        ));
    }
    errors
}

/// Types the `fetch`, `read` and `merge` steps of a source on their own, so that a wrong value inside one
/// is reported at its own field (`read.header`): inside a `kind`-tagged union serde loses the path.
fn pretype_steps(ctx: &Ctx<'_>, base: &str, body: &Value) -> Result<(), ManifestError> {
    fn typed_as<T: DeserializeOwned>(
        ctx: &Ctx<'_>,
        field: &str,
        v: &Value,
    ) -> Result<(), ManifestError> {
        let mut inner = v.clone();
        if let Some(o) = inner.as_object_mut() {
            o.remove("kind");
        }
        ctx.typed::<T>(field, Some(&inner)).map(drop)
    }
    let kind_of = |step: &str| {
        body.get(step)
            .and_then(|v| v.get("kind"))
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
    };
    let at = |step: &str| format!("{base}.{step}");
    let Some(get) = body.as_object() else {
        return Ok(());
    };
    if let Some(v) = get.get("fetch") {
        match kind_of("fetch").as_deref() {
            Some("url") => typed_as::<weir_odf::FetchStepUrl>(ctx, &at("fetch"), v)?,
            Some("filesglob") => typed_as::<weir_odf::FetchStepFilesGlob>(ctx, &at("fetch"), v)?,
            _ => {}
        }
    }
    if let Some(v) = get.get("read") {
        match kind_of("read").as_deref() {
            Some("csv") => typed_as::<weir_odf::ReadStepCsv>(ctx, &at("read"), v)?,
            Some("ndjson") => typed_as::<weir_odf::ReadStepNdJson>(ctx, &at("read"), v)?,
            Some("parquet") => typed_as::<weir_odf::ReadStepParquet>(ctx, &at("read"), v)?,
            _ => {}
        }
    }
    if let Some(v) = get.get("merge") {
        match kind_of("merge").as_deref() {
            Some("ledger") => typed_as::<weir_odf::MergeStrategyLedger>(ctx, &at("merge"), v)?,
            Some("snapshot") => typed_as::<weir_odf::MergeStrategySnapshot>(ctx, &at("merge"), v)?,
            _ => {}
        }
    }
    Ok(())
}

/// The event kinds a manifest may name, as ODF spells them.
const EVENT_KINDS: [&str; 10] = [
    "SetPollingSource",
    "SetTransform",
    "SetVocab",
    "SetInfo",
    "SetLicense",
    "SetAttachments",
    "AddPushSource",
    "DisablePushSource",
    "DisablePollingSource",
    "SetDataSchema",
];

/// An event kind as ODF spells it, for the camelCase form kamu also reads (`setAttachments`); anything
/// else as written.
fn event_kind_name(kind: &str) -> String {
    EVENT_KINDS
        .iter()
        .find(|k| {
            let mut c = k.chars();
            c.next()
                .is_some_and(|first| first.to_lowercase().chain(c).collect::<String>() == kind)
        })
        .map_or_else(|| kind.to_string(), |k| (*k).to_string())
}

/// A source's steps as kamu writes them, brought to the form Weir types (an ODF `read.schema` as its DDL
/// list), then typed one by one so that a wrong value is reported at its own field.
fn normalize_source(ctx: &Ctx<'_>, base: &str, body: &mut Value) -> Result<(), ManifestError> {
    if let Some(read) = body.get_mut("read") {
        let schema_errors = super::read_schema::normalize_read(read);
        if !schema_errors.is_empty() {
            return Err(ManifestError::from_all(
                schema_errors
                    .into_iter()
                    .map(|e| ctx.err(&format!("{base}.read.{}", e.field), e.message))
                    .collect(),
            )
            .unwrap_or_else(|| ctx.err(base, "invalid read schema")));
        }
    }
    pretype_steps(ctx, base, body)
}

/// An `AddPushSource` event at `base`: its read, preprocess and merge are those of a polling source, its
/// name unique in the manifest.
fn push_source(
    ctx: &Ctx<'_>,
    base: &str,
    body: &Value,
    m: &DatasetManifest,
) -> Result<AddPushSource, ManifestError> {
    let src: AddPushSource = ctx.typed(base, Some(body))?;
    if src.source_name.trim().is_empty() {
        return Err(ctx.err(
            &format!("{base}.sourceName"),
            "needs a name (e.g. `default`)",
        ));
    }
    if m.push_sources
        .iter()
        .any(|p| p.source_name == src.source_name)
    {
        return Err(ctx.err(
            &format!("{base}.sourceName"),
            format!("push source `{}` is declared twice", src.source_name),
        ));
    }
    support::check_push_source(&src).map_err(|all| {
        ManifestError::from_all(all.into_iter().map(|e| ctx.unsupported(base, e)).collect())
            .unwrap_or_else(|| ctx.err(base, "not supported by Weir"))
    })?;
    let primary_key = match &src.merge {
        MergeStrategy::Ledger(l) => Some(&l.primary_key),
        MergeStrategy::Snapshot(s) => Some(&s.primary_key),
        _ => None,
    };
    if primary_key.is_some_and(Vec::is_empty) {
        return Err(ctx.err(
            &format!("{base}.merge.primaryKey"),
            "needs at least one column",
        ));
    }
    if let Some(t) = &src.preprocess {
        check_sql(ctx, &format!("{base}.preprocess"), t.sql())?;
    }
    Ok(src)
}

fn check_sql(ctx: &Ctx<'_>, base: &str, sql: &weir_odf::TransformSql) -> Result<(), ManifestError> {
    if sql.engine.trim().is_empty() {
        return Err(ctx.err(&format!("{base}.engine"), "needs an engine name"));
    }
    let n = sql.clone().normalize();
    let queries = n.queries.unwrap_or_default();
    if queries.is_empty() || queries.iter().any(|q| q.query.trim().is_empty()) {
        return Err(ctx.err(base, "needs a non-empty `query` or `queries`"));
    }
    if queries.last().is_some_and(|q| q.alias.is_some()) {
        return Err(ctx.err(
            &format!("{base}.queries"),
            "the last query is the output and must have no alias",
        ));
    }
    Ok(())
}

struct Ctx<'a> {
    file: &'a Path,
    located: &'a Located,
}

impl Ctx<'_> {
    /// An unsupported field below the event at `base`.
    fn unsupported(&self, base: &str, e: Unsupported) -> ManifestError {
        let field = if e.field.is_empty() {
            base.to_owned()
        } else {
            format!("{base}.{}", e.field)
        };
        // The position of the field itself when the manifest has it, else of its parent.
        if self.located.position_of(&field).is_some() {
            self.err(&field, e.message)
        } else {
            let parent = field.rsplit_once('.').map_or(base, |(p, _)| p);
            let mut err = self.err(parent, e.message);
            if let ManifestError::Field { field: f, .. } = &mut err {
                *f = field;
            }
            err
        }
    }

    fn err(&self, field: &str, message: impl Into<String>) -> ManifestError {
        let Position { line, column } = self
            .located
            .position_of(field)
            .unwrap_or(Position { line: 1, column: 1 });
        ManifestError::Field {
            file: self.file.to_path_buf(),
            line,
            column,
            field: field.to_string(),
            message: message.into(),
        }
    }

    fn typed<T: DeserializeOwned>(
        &self,
        base: &str,
        v: Option<&Value>,
    ) -> Result<T, ManifestError> {
        let v = v.cloned().unwrap_or(Value::Null);
        serde_path_to_error::deserialize(v).map_err(|e| {
            let inner = e.path().to_string();
            let mut field = if inner == "." || inner.is_empty() {
                base.to_string()
            } else {
                format!("{base}.{inner}")
            };
            let message = e.into_inner().to_string();
            // Inside ODF's `kind`-tagged unions serde loses the path; an unknown field still names itself.
            if let Some(name) = message
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
                && !field.ends_with(&format!(".{name}"))
            {
                field = format!("{field}.{name}");
            }
            self.err(&field, message)
        })
    }
}

/// ODF's dataset names (as kamu reads them): dot-separated parts, each starting and ending with a letter or
/// digit, with `-` or `_` allowed inside. So no leading `-` (it would read as a command-line option), no
/// empty part (`a..b`), nothing that is not ASCII.
pub fn is_dataset_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            let bytes = part.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    first.is_ascii_alphanumeric()
                        && last.is_ascii_alphanumeric()
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
                }
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn dataset_names_follow_odf() {
        for good in ["readings", "readings.hot-days", "a_b.c1", "X"] {
            assert!(super::is_dataset_name(good), "{good}");
        }
        for bad in [
            "", "-zones", "a..b", ".a", "a.", "zones-", "a b", "a/b", "é",
        ] {
            assert!(!super::is_dataset_name(bad), "{bad}");
        }
    }

    use super::*;
    use weir_odf::{FetchStep, ReadStep};

    const ROOT: &str = "\
kind: DatasetSnapshot
version: 1
content:
  name: stations
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/stations-*.csv
      read:
        kind: Csv
        header: true
      merge:
        kind: Snapshot
        primaryKey: [station_id]
    - kind: SetVocab
      eventTimeColumn: observed_at
";

    fn parse(text: &str) -> Result<DatasetManifest, ManifestError> {
        DatasetManifest::parse(Path::new("datasets/x.yaml"), text)
    }

    #[test]
    fn a_root_manifest_reads_into_its_events() {
        let m = parse(ROOT).unwrap();
        assert_eq!(m.name, "stations");
        let src = m.polling_source.unwrap();
        assert_eq!(
            src.fetch,
            FetchStep::FilesGlob(weir_odf::FetchStepFilesGlob {
                path: "data/stations-*.csv".into(),
                event_time: None,
                cache: None,
                order: None,
            })
        );
        assert_eq!(
            src.read,
            ReadStep::Csv(weir_odf::ReadStepCsv {
                header: Some(true),
                ..Default::default()
            })
        );
        assert_eq!(
            src.merge,
            MergeStrategy::Snapshot(weir_odf::MergeStrategySnapshot {
                primary_key: vec!["station_id".into()],
                compare_columns: None,
            })
        );
        assert_eq!(
            m.vocab.unwrap().event_time_column.as_deref(),
            Some("observed_at")
        );
    }

    #[test]
    fn a_misspelt_field_points_at_its_line() {
        let err = parse(&ROOT.replace("primaryKey", "primaryKeys")).unwrap_err();
        assert_eq!(err.line(), Some(16), "{err}");
        assert!(
            err.to_string()
                .contains("datasets/x.yaml:16:9: field `content.metadata[0].merge.primaryKeys`"),
            "{err}"
        );
    }

    #[test]
    fn a_wrong_type_deep_in_an_event_names_the_field_path() {
        let err = parse(&ROOT.replace("header: true", "header: sometimes")).unwrap_err();
        assert_eq!(
            err.field(),
            Some("content.metadata[0].read.header"),
            "{err}"
        );
        assert_eq!(err.line(), Some(13));
    }

    #[test]
    fn an_empty_primary_key_is_rejected_at_the_primary_key() {
        let err = parse(&ROOT.replace("[station_id]", "[]")).unwrap_err();
        assert_eq!(err.field(), Some("content.metadata[0].merge.primaryKey"));
        assert_eq!(err.line(), Some(16));
    }

    #[test]
    fn a_derivative_needs_a_transform_with_sql() {
        let text = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: d\n  kind: Derivative\n  metadata:\n    - kind: SetTransform\n      inputs: [{datasetRef: stations}]\n      transform:\n        kind: Sql\n        engine: datafusion\n";
        let err = parse(text).unwrap_err();
        assert_eq!(err.field(), Some("content.metadata[0].transform"));
        assert_eq!(err.line(), Some(9));
    }

    #[test]
    fn wrong_document_kind_and_version_are_reported() {
        assert_eq!(
            parse(&ROOT.replace("DatasetSnapshot", "Dataset"))
                .unwrap_err()
                .field(),
            Some("kind")
        );
        assert_eq!(
            parse(&ROOT.replace("version: 1", "version: 2"))
                .unwrap_err()
                .line(),
            Some(2)
        );
    }

    #[test]
    fn what_weir_does_not_do_is_refused_at_its_field() {
        let merge = parse(&ROOT.replace("kind: Snapshot", "kind: UpsertStream")).unwrap_err();
        assert_eq!(
            merge.field(),
            Some("content.metadata[0].merge.kind"),
            "{merge}"
        );
        assert_eq!(merge.line(), Some(15), "{merge}");
        assert!(
            merge
                .to_string()
                .contains("`UpsertStream` is not supported by Weir"),
            "{merge}"
        );
        let encoding =
            parse(&ROOT.replace("header: true", "header: true\n        encoding: latin1"))
                .unwrap_err();
        assert_eq!(
            encoding.field(),
            Some("content.metadata[0].read.encoding"),
            "{encoding}"
        );
        assert_eq!(encoding.line(), Some(14), "{encoding}");
        let disable = parse(&ROOT.replace(
            "kind: SetVocab\n      eventTimeColumn: observed_at",
            "kind: DisablePushSource\n      sourceName: default",
        ))
        .unwrap_err();
        assert!(
            disable
                .to_string()
                .contains("`DisablePushSource` is not supported by Weir"),
            "{disable}"
        );
    }

    /// `stations` fed by push sources instead of its polling source.
    fn pushed(sources: &str) -> String {
        ROOT.replace(
            "    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/stations-*.csv
",
            sources,
        )
    }

    #[test]
    fn push_sources_are_read_and_checked_as_polling_sources_are() {
        let one = "    - kind: AddPushSource
      sourceName: default
";
        let m = parse(&pushed(one)).unwrap();
        assert!(m.polling_source.is_none());
        assert_eq!(m.push_sources.len(), 1);
        assert_eq!(m.push_sources[0].source_name, "default");
        // An option Weir does not carry out, at its field.
        let encoding =
            parse(&pushed(one).replace("header: true", "header: true\n        encoding: latin1"))
                .unwrap_err();
        assert_eq!(
            encoding.field(),
            Some("content.metadata[0].read.encoding"),
            "{encoding}"
        );
        // Two sources of one name.
        let twice =
            format!("{one}      read: {{ kind: NdJson }}\n      merge: {{ kind: Append }}\n{one}");
        let err = parse(&pushed(&twice)).unwrap_err();
        assert_eq!(err.field(), Some("content.metadata[1].sourceName"), "{err}");
        assert!(err.to_string().contains("declared twice"), "{err}");
    }

    #[test]
    fn a_transform_version_is_refused_since_weir_records_the_engine_there() {
        let text = "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: d\n  kind: Derivative\n  metadata:\n    - kind: SetTransform\n      inputs: [{datasetRef: stations}]\n      transform:\n        kind: Sql\n        engine: datafusion\n        version: '1.0'\n        query: select 1\n";
        let err = parse(text).unwrap_err();
        assert_eq!(
            err.field(),
            Some("content.metadata[0].transform.version"),
            "{err}"
        );
        assert_eq!(err.line(), Some(12), "{err}");
    }
}
