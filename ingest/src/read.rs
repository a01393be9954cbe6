//! Reading fetched files into records, a batch at a time: CSV, NDJSON, Parquet, with an optional DDL schema.
//!
//! Every value of a text file is read as written and parsed into its column's type here, so that a value
//! that does not parse is refused with its line and column instead of becoming NULL; every batch carries
//! the line (or Parquet row) of each of its records for the checks that follow ([`crate::check`]).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{BadData, IngestError, Place, Places, Unit};
use crate::schema::{self, type_name};
use weir_dataset::data::{DataError, utc_millis};
use weir_odf::ReadStep;

/// Records per batch.
const BATCH_ROWS: usize = 8192;

/// What a reader reads: a file, opened and read as it goes (nothing of it is held), or bytes already in
/// memory (small inputs and tests).
#[derive(Debug, Clone)]
pub enum Source {
    /// A local file.
    File(PathBuf),
    /// Bytes in memory.
    Memory(Bytes),
}

impl From<Bytes> for Source {
    fn from(bytes: Bytes) -> Self {
        Self::Memory(bytes)
    }
}

impl From<PathBuf> for Source {
    fn from(path: PathBuf) -> Self {
        Self::File(path)
    }
}

impl Source {
    /// Its size in bytes, when it can be known.
    pub fn size(&self) -> Option<u64> {
        match self {
            Self::File(p) => std::fs::metadata(p).ok().map(|m| m.len()),
            Self::Memory(b) => Some(b.len() as u64),
        }
    }

    /// A reader from its start, adding what it reads to `counter`.
    fn open(&self, file: &str, counter: Arc<AtomicU64>) -> Result<Box<dyn Read + Send>, BadData> {
        let inner: Box<dyn Read + Send> = match self {
            Self::File(p) => Box::new(std::fs::File::open(p).map_err(|e| BadData::Unreadable {
                file: file.to_string(),
                message: e.to_string(),
            })?),
            Self::Memory(b) => Box::new(std::io::Cursor::new(b.clone())),
        };
        Ok(Box::new(Counting { inner, counter }))
    }
}

/// A reader that counts the bytes it hands out, for progress.
struct Counting {
    inner: Box<dyn Read + Send>,
    counter: Arc<AtomicU64>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Inferred schemas look at this many records.
const INFER_RECORDS: usize = 1000;

/// Parses ODF's DDL column list (`["id BIGINT", "name STRING", "at TIMESTAMP"]`): see [`super::ddl`].
///
/// ```
/// use weir_ingest::read::parse_ddl;
/// let s = parse_ddl(&["id BIGINT".into(), "name STRING".into()]).unwrap();
/// assert_eq!(s.field(0).name(), "id");
/// ```
pub fn parse_ddl(columns: &[String]) -> Result<SchemaRef, DataError> {
    super::ddl::parse_ddl(columns)
}

/// A batch of records and the line or row each came from.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The records.
    pub batch: RecordBatch,
    /// Where each came from.
    pub places: Places,
}

/// The batches of one file, in order; every batch has `schema`.
pub struct Batches {
    /// The schema of every batch.
    pub schema: SchemaRef,
    /// The records the file holds, when its format says so up front (Parquet).
    pub total_rows: Option<u64>,
    bytes_read: Arc<AtomicU64>,
    iter: Box<dyn Iterator<Item = Result<Placed, IngestError>> + Send>,
}

impl Batches {
    /// Bytes of a text file read so far (a Parquet file reports its records instead: [`Batches::total_rows`]).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }

    /// Reads on a thread of its own, at most `depth` batches ahead of the caller, so that decoding the next
    /// batches overlaps with what the caller does with this one. Errors and the end arrive in order; the
    /// thread stops when the batches are dropped.
    pub fn read_ahead(self, depth: usize) -> Self {
        let (queue, ahead) = std::sync::mpsc::sync_channel(depth.max(1));
        let mut iter = self.iter;
        let started = std::thread::Builder::new()
            .name("weir-read".into())
            .spawn(move || {
                for item in iter.by_ref() {
                    let stop = item.is_err();
                    if queue.send(item).is_err() || stop {
                        break;
                    }
                }
            });
        let iter: Box<dyn Iterator<Item = Result<Placed, IngestError>> + Send> = match started {
            Ok(thread) => Box::new(ReadAhead {
                ahead,
                thread: Some(thread),
            }),
            Err(e) => Box::new(std::iter::once(Err(IngestError::Data(DataError::Column {
                message: format!("could not start a reading thread: {e}"),
            })))),
        };
        Self { iter, ..self }
    }

    /// Numbers its records' places in `unit` (an engine's output rows, say), keeping their numbers.
    pub fn placed_as(self, unit: Unit) -> Self {
        Self {
            iter: Box::new(self.iter.map(move |r| {
                r.map(|mut p| {
                    p.places.unit = unit;
                    p
                })
            })),
            ..self
        }
    }
}

/// The receiving end of [`Batches::read_ahead`].
struct ReadAhead {
    ahead: std::sync::mpsc::Receiver<Result<Placed, IngestError>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Iterator for ReadAhead {
    type Item = Result<Placed, IngestError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.ahead.recv() {
            Ok(item) => Some(item),
            // The reader hung up: at the end, or because it panicked.
            Err(_) => match self.thread.take().map(std::thread::JoinHandle::join) {
                Some(Err(_)) => Some(Err(IngestError::Data(DataError::Panicked {
                    context: "reading a source file".into(),
                }))),
                _ => None,
            },
        }
    }
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl Iterator for Batches {
    type Item = Result<Placed, IngestError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.iter.next()
    }
}

/// Reads `source` as the read step says, a batch at a time; `file` names it in messages.
///
/// `event_time` names the event time column when the records go to the dataset as read (no preprocess
/// query): in a CSV or NDJSON file its values are then parsed as `TIMESTAMP`s (RFC 3339 / ISO 8601)
/// whatever type inference found, unless the DDL schema gives it a type of its own.
pub fn read_batches(
    step: &ReadStep,
    source: &Source,
    file: &str,
    event_time: Option<&str>,
) -> Result<Batches, IngestError> {
    match step {
        ReadStep::Csv(step) => csv(
            source,
            file,
            step.schema.as_deref().unwrap_or_default(),
            &CsvOptions::of(step)?,
            event_time,
        ),
        ReadStep::NdJson(step) => ndjson(
            source,
            file,
            step.schema.as_deref().unwrap_or_default(),
            event_time,
        ),
        ReadStep::Parquet(step) => {
            parquet(source, file, step.schema.as_deref().unwrap_or_default())
        }
        // Refused when the manifest is loaded (manifest/support.rs); a chain written elsewhere may hold one.
        ReadStep::Json(_) => unsupported(file, "Json"),
        ReadStep::GeoJson(_) => unsupported(file, "GeoJson"),
        ReadStep::NdGeoJson(_) => unsupported(file, "NdGeoJson"),
        ReadStep::EsriShapefile(_) => unsupported(file, "EsriShapefile"),
    }
}

/// A read step Weir does not carry out: manifests with one are refused when loaded (`manifest/support.rs`),
/// but a chain written by another ODF implementation may hold one.
fn unsupported(file: &str, kind: &str) -> Result<Batches, IngestError> {
    Err(IngestError::Data(DataError::Column {
        message: format!("reading {file}: Weir does not support ReadStep kind {kind}"),
    }))
}

/// Reads a whole file into one batch (small inputs and tests).
pub fn read(step: &ReadStep, source: &Source, file: &str) -> Result<RecordBatch, IngestError> {
    let batches = read_batches(step, source, file, None)?;
    let schema = batches.schema.clone();
    let all = batches
        .map(|b| b.map(|p| p.batch))
        .collect::<Result<Vec<_>, _>>()?;
    concat_batches(&schema, &all).map_err(schema::arrow("reading records"))
}

/// How a CSV file is read: kamu's options, with kamu's defaults (no header, no inference: without a read
/// schema every column is a string, separator `,`, quote `"`, escape `\`, an empty value is null).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// Field separator.
    pub delimiter: u8,
    /// Quote character.
    pub quote: u8,
    /// Escape character inside quotes; `None` with `escape: ""`.
    pub escape: Option<u8>,
    /// Whether the first line names the columns.
    pub header: bool,
    /// The text of a null value, besides the empty value.
    pub null_value: Option<String>,
    /// Whether, without a read schema, column types are inferred from the data (else they are strings).
    pub infer_schema: bool,
}

impl CsvOptions {
    /// The options a read step gives. Its `encoding` must be UTF-8 and its date and timestamp formats
    /// `rfc3339` (what kamu reads too); `weir validate` refuses others.
    pub fn of(step: &weir_odf::ReadStepCsv) -> Result<Self, DataError> {
        let one_byte = |name: &str, v: Option<&str>, default: Option<u8>| match v {
            None => Ok(default),
            Some("") => Ok(None),
            Some(s) if s.len() == 1 => Ok(Some(s.as_bytes()[0])),
            Some(s) => Err(DataError::Column {
                message: format!("CSV {name} {s:?} is not one ASCII character"),
            }),
        };
        let delimiter =
            one_byte("separator", step.separator.as_deref(), Some(b','))?.unwrap_or(b',');
        let null_value = step.null_value.clone().filter(|v| !v.is_empty());
        Ok(Self {
            delimiter,
            quote: one_byte("quote", step.quote.as_deref(), Some(b'"'))?.ok_or_else(|| {
                DataError::Column {
                    message: "CSV quote \"\" (no quoting) is not supported, as in kamu".into(),
                }
            })?,
            escape: one_byte("escape", step.escape.as_deref(), Some(b'\\'))?,
            header: step.header.unwrap_or(false),
            null_value,
            infer_schema: step.infer_schema.unwrap_or(false),
        })
    }

    fn format(&self) -> arrow::csv::reader::Format {
        let mut f = arrow::csv::reader::Format::default()
            .with_header(self.header)
            .with_delimiter(self.delimiter)
            .with_quote(self.quote);
        if let Some(e) = self.escape {
            f = f.with_escape(e);
        }
        f
    }

    fn null_regex(&self) -> Result<Option<regex::Regex>, DataError> {
        self.null_value
            .as_ref()
            .map(|v| {
                regex::Regex::new(&format!("^(?:{})?$", regex::escape(v))).map_err(|e| {
                    DataError::Column {
                        message: format!("CSV nullValue {v:?}: {e}"),
                    }
                })
            })
            .transpose()
    }
}

fn csv(
    source: &Source,
    file: &str,
    ddl: &[String],
    options: &CsvOptions,
    event_time: Option<&str>,
) -> Result<Batches, IngestError> {
    let header = options.header;
    let format = options.format();
    let bytes_read = Arc::new(AtomicU64::new(0));
    // Schema inference reads the file's start again; only the pass that reads records counts.
    let uncounted = || source.open(file, Arc::new(AtomicU64::new(0)));
    if header {
        let (names, _) = format
            .infer_schema(uncounted()?, Some(0))
            .map_err(|e| csv_error(file, e))?;
        unique_names(&names, file)?;
    }
    let target = if !ddl.is_empty() {
        event_time_parsed(&parse_ddl(ddl)?, event_time, false)
    } else if options.infer_schema {
        let (inferred, _) = format
            .infer_schema(uncounted()?, Some(INFER_RECORDS))
            .map_err(|e| csv_error(file, e))?;
        event_time_parsed(&no_null_types(&inferred), event_time, true)
    } else {
        // kamu's default: every column a string (the event time is still parsed as a time).
        let (columns, _) = format
            .infer_schema(uncounted()?, Some(1))
            .map_err(|e| csv_error(file, e))?;
        event_time_parsed(&as_strings(&columns, |_| true), event_time, false)
    };
    let strings = as_strings(&target, |_| true);
    let mut builder = arrow::csv::ReaderBuilder::new(strings)
        .with_format(format)
        .with_batch_size(BATCH_ROWS);
    if let Some(null) = options.null_regex()? {
        builder = builder.with_null_regex(null);
    }
    let reader = builder
        .build(source.open(file, bytes_read.clone())?)
        .map_err(|e| csv_error(file, e))?;
    let file = file.to_string();
    let schema = target.clone();
    let mut next_line = if header { 2 } else { 1 };
    let iter = reader.map(move |read| {
        let strings = read.map_err(|e| csv_error(&file, e))?;
        let places = Places::run(Unit::Line, next_line, strings.num_rows());
        next_line += strings.num_rows() as u64;
        let batch = parse_columns(&strings, &target, &places, &file)?;
        Ok(Placed { batch, places })
    });
    Ok(Batches {
        schema,
        total_rows: None,
        bytes_read,
        iter: Box::new(iter),
    })
}

fn ndjson(
    source: &Source,
    file: &str,
    ddl: &[String],
    event_time: Option<&str>,
) -> Result<Batches, IngestError> {
    let bytes_read = Arc::new(AtomicU64::new(0));
    let target = if ddl.is_empty() {
        let (inferred, _) = arrow::json::reader::infer_json_schema(
            BufReader::new(source.open(file, Arc::new(AtomicU64::new(0)))?),
            Some(INFER_RECORDS),
        )
        .map_err(|e| BadData::Unreadable {
            file: file.to_string(),
            message: json_text(&e).1,
        })?;
        event_time_parsed(&no_null_types(&inferred), event_time, true)
    } else {
        event_time_parsed(&parse_ddl(ddl)?, event_time, false)
    };
    // Scalars are read as written (numbers and booleans as their text) and parsed here; nested values
    // as they are.
    let read_schema = as_strings(&target, |t| !t.is_nested());
    let mut lines = NdJsonLines {
        reader: BufReader::with_capacity(1 << 20, source.open(file, bytes_read.clone())?),
        buf: Vec::new(),
        line: 0,
        file: file.to_string(),
        read_schema,
    };
    let file = file.to_string();
    let schema = target.clone();
    let iter = std::iter::from_fn(move || lines.next_batch().transpose()).map(move |read| {
        let (strings, places) = read?;
        let batch = parse_columns(&strings, &target, &places, &file)?;
        Ok(Placed { batch, places })
    });
    Ok(Batches {
        schema,
        total_rows: None,
        bytes_read,
        iter: Box::new(iter),
    })
}

/// Newline-delimited JSON, one object per non-blank line, decoded a batch of lines at a time.
struct NdJsonLines {
    reader: BufReader<Box<dyn Read + Send>>,
    buf: Vec<u8>,
    line: u64,
    file: String,
    read_schema: SchemaRef,
}

impl NdJsonLines {
    fn decoder(&self) -> Result<arrow::json::reader::Decoder, IngestError> {
        arrow::json::ReaderBuilder::new(self.read_schema.clone())
            .with_batch_size(BATCH_ROWS + 1)
            .with_coerce_primitive(true)
            // A key that is not a column is refused, not dropped.
            .with_strict_mode(true)
            .build_decoder()
            .map_err(schema::arrow("reading NDJSON"))
    }

    /// The next non-blank line and its number, moving past it.
    fn next_line(&mut self) -> Result<Option<(u64, Bytes)>, IngestError> {
        loop {
            self.buf.clear();
            let n =
                self.reader
                    .read_until(b'\n', &mut self.buf)
                    .map_err(|e| BadData::Unreadable {
                        file: self.file.clone(),
                        message: e.to_string(),
                    })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.buf.last() == Some(&b'\n') {
                self.buf.pop();
            }
            if !self.buf.trim_ascii().is_empty() {
                return Ok(Some((self.line, Bytes::copy_from_slice(&self.buf))));
            }
        }
    }

    fn malformed(&self, line: u64, e: &ArrowError) -> BadData {
        let (column, message) = json_text(e);
        BadData::Malformed {
            file: self.file.clone(),
            place: Place::Line(line),
            column,
            message,
        }
    }

    fn next_batch(&mut self) -> Result<Option<(RecordBatch, Places)>, IngestError> {
        let mut decoder = self.decoder()?;
        let mut lines = Vec::new();
        let mut numbers = Vec::new();
        while numbers.len() < BATCH_ROWS {
            let Some((number, line)) = self.next_line()? else {
                break;
            };
            let before = decoder.len();
            let mut rest = &line[..];
            while !rest.is_empty() {
                let n = decoder
                    .decode(rest)
                    .map_err(|e| self.malformed(number, &e))?;
                if n == 0 {
                    break;
                }
                rest = &rest[n..];
            }
            if decoder.has_partial_record() || decoder.len() != before + 1 {
                return Err(BadData::Malformed {
                    file: self.file.clone(),
                    place: Place::Line(number),
                    column: None,
                    message: "the line does not hold exactly one JSON object".into(),
                }
                .into());
            }
            numbers.push(number);
            lines.push(line);
        }
        if numbers.is_empty() {
            return Ok(None);
        }
        match decoder.flush() {
            Ok(Some(batch)) => Ok(Some((
                batch,
                Places {
                    unit: Unit::Line,
                    numbers,
                },
            ))),
            Ok(None) => Ok(None),
            Err(e) => {
                // The decoder does not say which record failed: decode the lines one by one to find it.
                for (number, line) in numbers.iter().zip(&lines) {
                    let mut one = self.decoder()?;
                    if let Err(e) = one.decode(line).and_then(|_| one.flush()) {
                        return Err(self.malformed(*number, &e).into());
                    }
                }
                Err(BadData::Unreadable {
                    file: self.file.clone(),
                    message: json_text(&e).1,
                }
                .into())
            }
        }
    }
}

fn parquet(source: &Source, file: &str, ddl: &[String]) -> Result<Batches, IngestError> {
    let unreadable = |message: String| BadData::Unreadable {
        file: file.to_string(),
        message,
    };
    // The footer gives the schema and, up front, the number of records.
    fn open<R: parquet::file::reader::ChunkReader + 'static>(
        r: R,
    ) -> Result<
        (
            SchemaRef,
            i64,
            parquet::arrow::arrow_reader::ParquetRecordBatchReader,
        ),
        String,
    > {
        let b = ParquetRecordBatchReaderBuilder::try_new(r)
            .map_err(|e| e.to_string())?
            .with_batch_size(BATCH_ROWS);
        let schema = b.schema().clone();
        let rows = b.metadata().file_metadata().num_rows();
        Ok((schema, rows, b.build().map_err(|e| e.to_string())?))
    }
    let (found, total_rows, reader) = match source {
        Source::File(p) => open(std::fs::File::open(p).map_err(|e| unreadable(e.to_string()))?),
        Source::Memory(bytes) => open(bytes.clone()),
    }
    .map_err(unreadable)?;
    unique_names(&found, file)?;
    let target = if ddl.is_empty() {
        found.clone()
    } else {
        let target = parse_ddl(ddl)?;
        read_schema_columns(&found, &target, file)?;
        target
    };
    let file = file.to_string();
    let schema = target.clone();
    let mut next_row = 1;
    let iter = reader.map(move |read| {
        let batch = read.map_err(|e| BadData::Unreadable {
            file: file.clone(),
            message: e.to_string(),
        })?;
        let places = Places::run(Unit::Row, next_row, batch.num_rows());
        next_row += batch.num_rows() as u64;
        let batch = if batch.schema() == target {
            batch
        } else {
            parse_columns(&batch, &target, &places, &file)?
        };
        Ok(Placed { batch, places })
    });
    Ok(Batches {
        schema,
        total_rows: u64::try_from(total_rows).ok(),
        bytes_read: Arc::new(AtomicU64::new(0)),
        iter: Box::new(iter),
    })
}

/// A Parquet file read with a DDL schema must have exactly its columns, in types it can be read as.
fn read_schema_columns(found: &Schema, target: &Schema, file: &str) -> Result<(), BadData> {
    let missing: Vec<String> = target
        .fields()
        .iter()
        .filter(|f| found.field_with_name(f.name()).is_err())
        .map(|f| f.name().clone())
        .collect();
    let extra: Vec<String> = found
        .fields()
        .iter()
        .filter(|f| target.field_with_name(f.name()).is_err())
        .map(|f| f.name().clone())
        .collect();
    if !missing.is_empty() || !extra.is_empty() {
        return Err(BadData::NotTheReadSchema {
            file: file.to_string(),
            missing,
            extra,
        });
    }
    for t in target.fields() {
        let Ok(f) = found.field_with_name(t.name()) else {
            continue;
        };
        // A number is not a time: reading one as a TIMESTAMP or DATE would guess its unit.
        let time = |d: &DataType| d.is_temporal();
        let text =
            |d: &DataType| matches!(d, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        let readable = if time(t.data_type()) {
            time(f.data_type()) || text(f.data_type())
        } else {
            arrow::compute::can_cast_types(f.data_type(), t.data_type())
        };
        if !readable {
            return Err(BadData::TypeMismatch {
                file: file.to_string(),
                column: t.name().clone(),
                found: type_name(f.data_type()),
                expected: type_name(t.data_type()),
            });
        }
    }
    Ok(())
}

/// Columns whose type inference found nothing (every value empty) are read as strings.
fn no_null_types(s: &Schema) -> SchemaRef {
    let fields: Vec<Field> = s
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Null => Field::new(f.name(), DataType::Utf8, true),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The event time column of a text file is parsed as a TIMESTAMP (milliseconds, UTC) when its type was
/// inferred (inference may have picked seconds, or no time at all) or is STRING.
fn event_time_parsed(target: &SchemaRef, event_time: Option<&str>, inferred: bool) -> SchemaRef {
    let Some(et) = event_time else {
        return target.clone();
    };
    let fields: Vec<Field> = target
        .fields()
        .iter()
        .map(|f| {
            let t = f.data_type();
            let parse =
                f.name() == et && (inferred || matches!(t, DataType::Utf8 | DataType::LargeUtf8));
            if parse {
                Field::new(f.name(), utc_millis(), true)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// `target` with the columns `read_as_text` picks turned into strings.
fn as_strings(target: &Schema, read_as_text: impl Fn(&DataType) -> bool) -> SchemaRef {
    let fields: Vec<Field> = target
        .fields()
        .iter()
        .map(|f| {
            if read_as_text(f.data_type()) {
                Field::new(f.name(), DataType::Utf8, true)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Arc::new(Schema::new(fields))
}

fn unique_names(s: &Schema, file: &str) -> Result<(), BadData> {
    let mut seen = HashSet::new();
    for f in s.fields() {
        if !seen.insert(f.name().as_str()) {
            return Err(BadData::DuplicateColumn {
                file: file.to_string(),
                column: f.name().clone(),
            });
        }
    }
    Ok(())
}

/// Casts every column of `read` to its type in `target`; a value that does not convert is refused with its
/// place, never turned into NULL.
fn parse_columns(
    read: &RecordBatch,
    target: &SchemaRef,
    places: &Places,
    file: &str,
) -> Result<RecordBatch, IngestError> {
    let columns = read
        .columns()
        .iter()
        .zip(target.fields())
        .map(|(c, f)| checked_cast(c, f, places, file))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(target.clone(), columns).map_err(schema::arrow("reading records"))
}

fn checked_cast(
    c: &ArrayRef,
    f: &Field,
    places: &Places,
    file: &str,
) -> Result<ArrayRef, IngestError> {
    let out = if c.data_type() == f.data_type() {
        c.clone()
    } else {
        cast_refusing_nulls(c, f, places, file)?
    };
    // A column the read schema declares non-null (an ODF type without `Option`, DDL `NOT NULL`).
    if !f.is_nullable()
        && out.null_count() > 0
        && let Some(i) = (0..out.len()).find(|&i| out.is_null(i))
    {
        return Err(BadData::Malformed {
            file: file.to_string(),
            place: places.place(i),
            column: Some(f.name().clone()),
            message: "the value is empty (null), but the read schema declares the column non-null (in an ODF schema, a type without `kind: Option`)".into(),
        }
        .into());
    }
    Ok(out)
}

fn cast_refusing_nulls(
    c: &ArrayRef,
    f: &Field,
    places: &Places,
    file: &str,
) -> Result<ArrayRef, IngestError> {
    // The safe cast turns what does not convert into NULL: find the first such value.
    let out = cast(c, f.data_type()).map_err(schema::arrow(&format!("reading `{}`", f.name())))?;
    if out.null_count() > c.null_count()
        && let Some(i) = (0..c.len()).find(|&i| c.is_valid(i) && out.is_null(i))
    {
        let value = arrow::util::display::array_value_to_string(c, i).unwrap_or_default();
        return Err(BadData::NotA {
            file: file.to_string(),
            place: places.place(i),
            column: f.name().clone(),
            value: shortened(value),
            expected: type_name(f.data_type()),
        }
        .into());
    }
    Ok(out)
}

fn shortened(mut value: String) -> String {
    const MAX: usize = 60;
    if value.chars().count() > MAX {
        value = value.chars().take(MAX).collect::<String>() + "...";
    }
    value
}

/// A CSV reader error: a structural one carries its line (`incorrect number of fields for line 3, ...`).
fn csv_error(file: &str, e: ArrowError) -> IngestError {
    let text = match &e {
        ArrowError::CsvError(m) => m.clone(),
        other => other.to_string(),
    };
    let line = text.split_once("line ").and_then(|(_, rest)| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u64>().ok()
    });
    let fields = text
        .strip_prefix("incorrect number of fields for line ")
        .and_then(|rest| rest.split_once(", expected "))
        .and_then(|(_, rest)| rest.split_once(" got "))
        .map(|(expected, got)| format!("expected {expected} fields, found {got}"));
    match line {
        Some(n) => BadData::Malformed {
            file: file.to_string(),
            place: Place::Line(n),
            column: None,
            message: fields.unwrap_or(text),
        },
        None => BadData::Unreadable {
            file: file.to_string(),
            message: text,
        },
    }
    .into()
}

/// The column (when arrow names one) and the text of a JSON decoding error.
fn json_text(e: &ArrowError) -> (Option<String>, String) {
    let text = match e {
        ArrowError::JsonError(m) => m.clone(),
        other => other.to_string(),
    };
    if let Some(rest) = text.strip_prefix("whilst decoding field '")
        && let Some((column, message)) = rest.split_once("': ")
    {
        return (Some(column.to_string()), message.to_string());
    }
    if let Some(rest) = text.strip_prefix("column '")
        && let Some((column, _)) = rest.split_once("' missing from schema")
    {
        return (
            Some(column.to_string()),
            "not a column of the read schema".into(),
        );
    }
    (None, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_step(schema: &[&str]) -> ReadStep {
        ReadStep::Csv(weir_odf::ReadStepCsv {
            schema: Some(schema.iter().map(|s| s.to_string()).collect()),
            header: Some(true),
            ..Default::default()
        })
    }

    fn all(step: &ReadStep, text: &str, event_time: Option<&str>) -> Result<Vec<Placed>, String> {
        read_batches(
            step,
            &Source::from(Bytes::from(text.to_string())),
            "t",
            event_time,
        )
        .and_then(|b| b.collect::<Result<Vec<_>, _>>())
        .map_err(|e| e.to_string())
    }

    #[test]
    fn csv_without_a_schema_is_strings_unless_infer_schema_is_set() {
        let text = Bytes::from("id,name\n1,a\n2,b\n");
        let b = read(&csv_step(&[]), &text.clone().into(), "t.csv").unwrap();
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.schema().field(0).data_type(), &DataType::Utf8);
        let infer = ReadStep::Csv(weir_odf::ReadStepCsv {
            header: Some(true),
            infer_schema: Some(true),
            ..Default::default()
        });
        let b = read(&infer, &text.into(), "t.csv").unwrap();
        assert_eq!(b.schema().field(0).data_type(), &DataType::Int64);
    }

    #[test]
    fn csv_with_ddl_schema_parses_timestamps() {
        let step = ReadStep::Csv(weir_odf::ReadStepCsv {
            schema: Some(vec!["at TIMESTAMP".into(), "v DOUBLE".into()]),
            separator: Some(";".into()),
            header: Some(false),
            ..Default::default()
        });
        let b = read(
            &step,
            &Bytes::from("2024-01-01T00:00:00Z;1.5\n").into(),
            "t.csv",
        )
        .unwrap();
        assert_eq!(b.schema().field(0).data_type(), &utc_millis());
        assert_eq!(b.num_rows(), 1);
    }

    #[test]
    fn a_csv_value_that_does_not_parse_is_refused_with_its_line_and_column() {
        let err = all(
            &csv_step(&["id BIGINT", "population BIGINT"]),
            "id,population\n1,10\n2,\n3,12x\n",
            None,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "t line 4, column \"population\": \"12x\" is not a BIGINT"
        );
    }

    #[test]
    fn empty_csv_values_stay_null() {
        let b = all(&csv_step(&["id BIGINT", "v DOUBLE"]), "id,v\n1,\n", None).unwrap();
        assert_eq!(b[0].batch.column(1).null_count(), 1);
    }

    #[test]
    fn lines_are_counted_across_batches() {
        let mut text = String::from("id\n");
        for i in 0..BATCH_ROWS + 5 {
            text.push_str(&format!("{i}\n"));
        }
        text.push_str("x\n");
        let err = all(&csv_step(&["id BIGINT"]), &text, None).unwrap_err();
        assert!(
            err.starts_with(&format!("t line {}, ", BATCH_ROWS + 7)),
            "{err}"
        );
    }

    #[test]
    fn read_ahead_gives_the_same_batches_and_the_same_error_in_order() {
        let mut text = String::from("id\n");
        for i in 0..3 * BATCH_ROWS + 5 {
            text.push_str(&format!("{i}\n"));
        }
        let step = csv_step(&["id BIGINT"]);
        let source = Source::from(Bytes::from(text.clone()));
        let here: Vec<Placed> = read_batches(&step, &source, "t", None)
            .and_then(|b| b.collect::<Result<_, _>>())
            .unwrap();
        let ahead: Vec<Placed> = read_batches(&step, &source, "t", None)
            .map(|b| b.read_ahead(1))
            .and_then(|b| b.collect::<Result<_, _>>())
            .unwrap();
        assert_eq!(here.len(), 4);
        assert_eq!(
            here.iter().map(|p| p.batch.clone()).collect::<Vec<_>>(),
            ahead.iter().map(|p| p.batch.clone()).collect::<Vec<_>>()
        );

        // A bad value in the third batch: the batches before it, then its error, then nothing.
        text.push_str("x\n");
        let got: Vec<Result<Placed, IngestError>> =
            read_batches(&step, &Source::from(Bytes::from(text)), "t", None)
                .unwrap()
                .read_ahead(1)
                .collect();
        assert_eq!(got.len(), 4);
        assert!(got[..3].iter().all(Result::is_ok));
        let err = got[3].as_ref().err().map(ToString::to_string).unwrap();
        assert!(
            err.starts_with(&format!("t line {}, ", 3 * BATCH_ROWS + 7)),
            "{err}"
        );
    }

    #[test]
    fn a_csv_row_with_too_many_fields_is_refused_with_its_line() {
        let err = all(&csv_step(&["a BIGINT"]), "a\n1\n2,3\n", None).unwrap_err();
        assert_eq!(err, "t line 3: expected 1 fields, found 2");
    }

    #[test]
    fn a_duplicate_csv_header_is_refused() {
        let err = all(&csv_step(&[]), "a,b,a\n1,2,3\n", None).unwrap_err();
        assert_eq!(err, "t: column \"a\" appears twice");
    }

    #[test]
    fn an_inferred_csv_event_time_is_parsed_and_an_epoch_number_refused() {
        let ok = all(
            &csv_step(&[]),
            "t,v\n2024-01-01T00:00:00.250Z,1\n",
            Some("t"),
        )
        .unwrap();
        assert_eq!(ok[0].batch.schema().field(0).data_type(), &utc_millis());
        let err = all(&csv_step(&[]), "t,v\n1717200000,1\n", Some("t")).unwrap_err();
        assert_eq!(
            err,
            "t line 2, column \"t\": \"1717200000\" is not a TIMESTAMP"
        );
    }

    #[test]
    fn ndjson_is_inferred() {
        let step = ReadStep::NdJson(weir_odf::ReadStepNdJson::default());
        let b = read(
            &step,
            &Bytes::from("{\"a\": 1}\n{\"a\": 2}\n").into(),
            "t.json",
        )
        .unwrap();
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.schema().field(0).data_type(), &DataType::Int64);
    }

    #[test]
    fn ndjson_refusals_name_the_line_past_blank_lines() {
        let step = ReadStep::NdJson(weir_odf::ReadStepNdJson {
            schema: Some(vec!["id BIGINT".into()]),
            ..Default::default()
        });
        let err = all(&step, "{\"id\": 1}\n\n{\"id\": \"abc\"}\n", None).unwrap_err();
        assert_eq!(err, "t line 3, column \"id\": \"abc\" is not a BIGINT");
        let err = all(&step, "{\"id\": 1}\n{\"id\": 2, \"x\": 1}\n", None).unwrap_err();
        assert_eq!(
            err,
            "t line 2, column \"x\": not a column of the read schema"
        );
        let err = all(&step, "{\"id\": 1}\n{\"id\": 2\n", None).unwrap_err();
        assert!(err.starts_with("t line 2: "), "{err}");
    }

    #[test]
    fn an_ndjson_number_is_not_a_timestamp() {
        let step = ReadStep::NdJson(weir_odf::ReadStepNdJson {
            schema: Some(vec!["at TIMESTAMP".into()]),
            ..Default::default()
        });
        let err = all(&step, "{\"at\": 1717200000000}\n", None).unwrap_err();
        assert_eq!(
            err,
            "t line 1, column \"at\": \"1717200000000\" is not a TIMESTAMP"
        );
    }

    #[test]
    fn an_unknown_ddl_type_is_named() {
        let err = parse_ddl(&["x BLOB".into()]).unwrap_err().to_string();
        assert!(err.contains("BLOB"), "{err}");
    }
}
