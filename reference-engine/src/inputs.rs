//! Opening input Parquet files as tables the query sees under their query aliases.
//!
//! Each input becomes a scan of its files (any file name: ODF slices are named by hash), filtered to the
//! records inside the input's offset interval, registered as a view under the query alias exactly as
//! spelled (identifiers are case-sensitive). Input files are declared sorted by offset, which ODF data
//! files always are: this lets DataFusion keep offset order without sorting.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Column, ScalarValue, TableReference};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::{TableProvider, ViewTable, provider_as_source};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, lit};

use crate::error::EngineError;
use crate::exchange;
use crate::request::{DatasetVocabulary, OffsetInterval};

/// Prefix of the internal table names of input scans.
pub(crate) const INPUT_SCAN_PREFIX: &str = "__weir_input_";

/// What to open for one input.
#[derive(Debug, Clone)]
pub(crate) struct InputSource {
    /// Name the query uses.
    pub query_alias: String,
    /// The input's system column names.
    pub vocab: DatasetVocabulary,
    /// Parquet files to read (data files, or the schema file when there is no new data): local paths or
    /// `s3://` object URLs.
    pub files: Vec<String>,
    /// Keep only records with an offset inside this interval; `None` keeps everything.
    pub offset_interval: Option<OffsetInterval>,
}

impl InputSource {
    /// The source of a transform input: its data files when it has new data, its schema file otherwise.
    pub(crate) fn for_transform(
        input: &crate::request::TransformRequestInput,
    ) -> Result<Self, EngineError> {
        let has_data = input.offset_interval.is_some() && !input.data_paths.is_empty();
        if let Some(interval) = input.offset_interval
            && interval.start > interval.end
        {
            return Err(EngineError::MalformedRequest {
                reason: format!(
                    "input `{}` has the empty offset interval [{}, {}]",
                    input.query_alias, interval.start, interval.end
                ),
            });
        }
        Ok(Self {
            query_alias: input.query_alias.clone(),
            vocab: input.vocab.clone(),
            files: if has_data {
                input.data_paths.clone()
            } else {
                vec![input.schema_file.clone()]
            },
            offset_interval: if has_data {
                input.offset_interval
            } else {
                None
            },
        })
    }

    /// The source of an input that only contributes its schema.
    pub(crate) fn schema_only(
        query_alias: &str,
        vocab: &DatasetVocabulary,
        schema_file: &str,
    ) -> Self {
        Self {
            query_alias: query_alias.to_owned(),
            vocab: vocab.clone(),
            files: vec![schema_file.to_owned()],
            offset_interval: None,
        }
    }
}

/// An input as registered in the session.
#[derive(Debug, Clone)]
pub(crate) struct RegisteredInput {
    /// Position in the request.
    pub index: usize,
    /// Name the query uses.
    pub query_alias: String,
    /// The input's system column names.
    pub vocab: DatasetVocabulary,
    /// Internal name of the scan (`__weir_input_<index>`).
    pub scan_name: String,
    /// Whether the input has an operation type column (old data may not).
    pub has_operation_type: bool,
    /// The primary key, when the transform declares this input a temporal table.
    pub temporal: Option<Vec<String>>,
    /// Whether this input is the side of a stream-to-stream interval join whose records add columns to
    /// the other side's (the right side once bound, see `interval::query`).
    pub interval_joined: bool,
}

impl RegisteredInput {
    /// The scan's offset column.
    pub(crate) fn offset_column(&self) -> Column {
        Column::new(
            Some(TableReference::bare(self.scan_name.clone())),
            self.vocab.offset_column.clone(),
        )
    }

    /// The scan's event time column.
    pub(crate) fn event_time_column(&self) -> Column {
        Column::new(
            Some(TableReference::bare(self.scan_name.clone())),
            self.vocab.event_time_column.clone(),
        )
    }

    /// The scan's operation type column, or an Append literal when the input has none.
    pub(crate) fn operation_type_expr(&self) -> Expr {
        if self.has_operation_type {
            Expr::Column(Column::new(
                Some(TableReference::bare(self.scan_name.clone())),
                self.vocab.operation_type_column.clone(),
            ))
        } else {
            lit(0i32)
        }
    }
}

/// Registers every input under its query alias.
pub(crate) async fn register_inputs(
    ctx: &SessionContext,
    sources: &[InputSource],
) -> Result<Vec<RegisteredInput>, EngineError> {
    let mut registered = Vec::with_capacity(sources.len());
    for (index, source) in sources.iter().enumerate() {
        if registered
            .iter()
            .any(|r: &RegisteredInput| r.query_alias == source.query_alias)
        {
            return Err(EngineError::DuplicateAlias {
                alias: source.query_alias.clone(),
            });
        }
        registered.push(register_input(ctx, index, source).await?);
    }
    Ok(registered)
}

async fn register_input(
    ctx: &SessionContext,
    index: usize,
    source: &InputSource,
) -> Result<RegisteredInput, EngineError> {
    let alias = &source.query_alias;
    let offset = &source.vocab.offset_column;
    let table = open_parquet(ctx, alias, &source.files, Some(offset)).await?;
    let schema = table.schema();
    let offset_type = match schema.field_with_name(offset) {
        Ok(field) => field.data_type().clone(),
        Err(_) => {
            return Err(EngineError::InputSchema {
                alias: alias.clone(),
                reason: format!("it has no offset column `{offset}`"),
            });
        }
    };
    let has_operation_type = schema
        .field_with_name(&source.vocab.operation_type_column)
        .is_ok();
    let scan_name = format!("{INPUT_SCAN_PREFIX}{index}");
    let input = RegisteredInput {
        index,
        query_alias: alias.clone(),
        vocab: source.vocab.clone(),
        scan_name: scan_name.clone(),
        has_operation_type,
        temporal: None,
        interval_joined: false,
    };
    let mut builder = LogicalPlanBuilder::scan(
        TableReference::bare(scan_name),
        provider_as_source(table),
        None,
    )
    .map_err(|e| input_read(alias, &source.files, e))?;
    if let Some(interval) = source.offset_interval {
        let column = Expr::Column(input.offset_column());
        let start = offset_literal(alias, interval.start, &offset_type)?;
        let end = offset_literal(alias, interval.end, &offset_type)?;
        builder = builder
            .filter(column.between(start, end))
            .map_err(|e| input_read(alias, &source.files, e))?;
    }
    let plan = builder
        .build()
        .map_err(|e| input_read(alias, &source.files, e))?;
    ctx.register_table(
        TableReference::bare(alias.clone()),
        Arc::new(ViewTable::new(plan, None)),
    )
    .map_err(|e| input_read(alias, &source.files, e))?;
    tracing::debug!(alias = %alias, files = source.files.len(), interval = ?source.offset_interval, "input registered");
    Ok(input)
}

/// Opens Parquet files of any name as one table, declared sorted by `sorted_by` when given. A file is a
/// local path or an `s3://` object URL (read in place through a store registered for its bucket).
pub(crate) async fn open_parquet(
    ctx: &SessionContext,
    alias: &str,
    files: &[String],
    sorted_by: Option<&str>,
) -> Result<Arc<ListingTable>, EngineError> {
    let Some(first) = files.first() else {
        return Err(EngineError::MalformedRequest {
            reason: format!("input `{alias}` has no files"),
        });
    };
    let mut urls = Vec::with_capacity(files.len());
    for file in files {
        let footer_error = |reason| EngineError::InputRead {
            alias: alias.to_owned(),
            path: PathBuf::from(file),
            source: Box::new(datafusion::error::DataFusionError::Execution(reason)),
        };
        let url = match exchange::object_url(file)? {
            Some(object) => {
                exchange::register_store(ctx, &object)?;
                exchange::check_parquet_footer(&object)
                    .await
                    .map_err(footer_error)?;
                ListingTableUrl::parse(&object.url)
                    .map_err(|e| input_read(alias, std::slice::from_ref(file), e))?
            }
            None => {
                let path = Path::new(file);
                if !path.is_file() {
                    return Err(EngineError::InputFileMissing {
                        alias: alias.to_owned(),
                        path: path.to_path_buf(),
                    });
                }
                check_parquet_footer(path).map_err(footer_error)?;
                let absolute = std::path::absolute(path).map_err(|e| EngineError::InputRead {
                    alias: alias.to_owned(),
                    path: path.to_path_buf(),
                    source: Box::new(e.into()),
                })?;
                ListingTableUrl::parse(absolute.to_string_lossy())
                    .map_err(|e| input_read(alias, std::slice::from_ref(file), e))?
            }
        };
        urls.push(url);
    }
    // Strings as Utf8, as the session reads them: outputs carry classic types, and reading a view
    // only to cast it back costs a copy of every string.
    let format = ParquetFormat::default().with_force_view_types(false);
    let mut options = ListingOptions::new(Arc::new(format)).with_file_extension("");
    if let Some(column) = sorted_by {
        options = options.with_file_sort_order(vec![vec![
            Expr::Column(Column::new_unqualified(column)).sort(true, false),
        ]]);
    }
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .infer_schema(&ctx.state())
        .await
        .map_err(|e| EngineError::InputRead {
            alias: alias.to_owned(),
            path: PathBuf::from(first),
            source: Box::new(e),
        })?;
    let table = ListingTable::try_new(config).map_err(|e| input_read(alias, files, e))?;
    Ok(Arc::new(table))
}

/// Checks the Parquet magic bytes and footer length before any Parquet reader sees the file (a
/// footer claiming more metadata than the file holds is rejected here, not deep inside a reader).
fn check_parquet_footer(path: &Path) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    const MAGIC: &[u8; 4] = b"PAR1";
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let length = file.metadata().map_err(|e| e.to_string())?.len();
    if length < 12 {
        return Err(format!(
            "the file is {length} bytes long, too short for Parquet"
        ));
    }
    let mut head = [0u8; 4];
    file.read_exact(&mut head).map_err(|e| e.to_string())?;
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::End(-8)).map_err(|e| e.to_string())?;
    file.read_exact(&mut tail).map_err(|e| e.to_string())?;
    if &head != MAGIC || &tail[4..] != MAGIC {
        return Err("the file does not start and end with the Parquet magic bytes".to_owned());
    }
    let metadata_length = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if metadata_length + 12 > length {
        return Err(format!(
            "the footer claims {metadata_length} bytes of metadata in a file of {length} bytes"
        ));
    }
    Ok(())
}

fn input_read(
    alias: &str,
    files: &[String],
    error: datafusion::error::DataFusionError,
) -> EngineError {
    EngineError::InputRead {
        alias: alias.to_owned(),
        path: files.first().map(PathBuf::from).unwrap_or_default(),
        source: Box::new(error),
    }
}

/// An offset as a literal of the offset column's own type (uint64 per the spec, Int64 in practice).
fn offset_literal(alias: &str, offset: u64, data_type: &DataType) -> Result<Expr, EngineError> {
    let value = ScalarValue::UInt64(Some(offset));
    let value = match data_type {
        DataType::UInt64 => value,
        DataType::Int64 => ScalarValue::Int64(Some(i64::try_from(offset).map_err(|_| {
            EngineError::MalformedRequest {
                reason: format!(
                    "offset {offset} of input `{alias}` does not fit the Int64 offset column"
                ),
            }
        })?)),
        other => value.cast_to(other).map_err(|_| EngineError::InputSchema {
            alias: alias.to_owned(),
            reason: format!("its offset column has type {other}, not an integer"),
        })?,
    };
    Ok(lit(value))
}
