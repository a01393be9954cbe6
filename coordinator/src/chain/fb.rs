//! A small, bounds-checked FlatBuffers reader and the writer helpers the chain codec uses.
//!
//! Reading never trusts the bytes: every offset and length is checked against the buffer, so a corrupt or
//! hostile block decodes to an error and never panics. Writing goes through the `flatbuffers` builder.

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};
use flatbuffers::{FlatBufferBuilder, Push, PushAlignment, WIPOffset};

/// Why bytes are not a well-formed FlatBuffers table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FbError {
    /// An offset or length points outside the buffer.
    #[error("offset {at} is out of bounds of a {len}-byte buffer")]
    OutOfBounds {
        /// The byte position that was read.
        at: usize,
        /// The buffer length.
        len: usize,
    },
    /// A required field is absent.
    #[error("required field `{field}` is missing in `{table}`")]
    MissingField {
        /// Table name.
        table: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// A union tag is not one this reader knows.
    #[error("unknown union tag {tag} in `{union}`")]
    UnknownUnionTag {
        /// The union name.
        union: &'static str,
        /// The tag found.
        tag: u8,
    },
    /// A string is not UTF-8.
    #[error("string at {at} is not UTF-8")]
    NotUtf8 {
        /// The position of the string.
        at: usize,
    },
    /// A timestamp struct holds an impossible date or time.
    #[error(
        "invalid timestamp: year {year}, ordinal {ordinal}, seconds {seconds}, nanoseconds {nanoseconds}"
    )]
    InvalidTimestamp {
        /// Year.
        year: i32,
        /// Day of the year.
        ordinal: u16,
        /// Seconds from midnight.
        seconds: u32,
        /// Nanoseconds.
        nanoseconds: u32,
    },
}

/// A table inside a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    buf: &'a [u8],
    pos: usize,
    vtable: usize,
    vtable_len: usize,
}

fn read_bytes<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], FbError> {
    at.checked_add(N)
        .and_then(|end| buf.get(at..end))
        .and_then(|s| s.try_into().ok())
        .ok_or(FbError::OutOfBounds { at, len: buf.len() })
}

fn read_u16(buf: &[u8], at: usize) -> Result<u16, FbError> {
    read_bytes::<2>(buf, at).map(u16::from_le_bytes)
}

fn read_u32(buf: &[u8], at: usize) -> Result<u32, FbError> {
    read_bytes::<4>(buf, at).map(u32::from_le_bytes)
}

fn follow(buf: &[u8], at: usize) -> Result<usize, FbError> {
    let off = read_u32(buf, at)? as usize;
    at.checked_add(off)
        .filter(|p| *p < buf.len())
        .ok_or(FbError::OutOfBounds { at, len: buf.len() })
}

impl<'a> Table<'a> {
    /// The root table of a buffer.
    pub fn root(buf: &'a [u8]) -> Result<Self, FbError> {
        let pos = follow(buf, 0)?;
        Self::at(buf, pos)
    }

    fn at(buf: &'a [u8], pos: usize) -> Result<Self, FbError> {
        let soff = i32::from_le_bytes(read_bytes::<4>(buf, pos)?);
        let vtable = pos as i64 - soff as i64;
        let vtable = usize::try_from(vtable).map_err(|_| FbError::OutOfBounds {
            at: pos,
            len: buf.len(),
        })?;
        let vtable_len = read_u16(buf, vtable)? as usize;
        if vtable_len < 4 || vtable.checked_add(vtable_len).is_none_or(|e| e > buf.len()) {
            return Err(FbError::OutOfBounds {
                at: vtable,
                len: buf.len(),
            });
        }
        Ok(Self {
            buf,
            pos,
            vtable,
            vtable_len,
        })
    }

    /// The absolute position of field `slot` (0-based), if present.
    fn field(&self, slot: usize) -> Result<Option<usize>, FbError> {
        let entry = 4 + 2 * slot;
        if entry + 2 > self.vtable_len {
            return Ok(None);
        }
        let off = read_u16(self.buf, self.vtable + entry)? as usize;
        Ok((off != 0).then_some(self.pos + off))
    }

    /// A `ubyte` field.
    pub fn u8(&self, slot: usize) -> Result<Option<u8>, FbError> {
        self.field(slot)?
            .map(|at| read_bytes::<1>(self.buf, at).map(|b| b[0]))
            .transpose()
    }

    /// An `int32` field.
    pub fn i32(&self, slot: usize) -> Result<Option<i32>, FbError> {
        self.field(slot)?
            .map(|at| read_bytes::<4>(self.buf, at).map(i32::from_le_bytes))
            .transpose()
    }

    /// A `uint64` field.
    pub fn u64(&self, slot: usize) -> Result<Option<u64>, FbError> {
        self.field(slot)?
            .map(|at| read_bytes::<8>(self.buf, at).map(u64::from_le_bytes))
            .transpose()
    }

    /// An `int64` field.
    pub fn i64(&self, slot: usize) -> Result<Option<i64>, FbError> {
        self.field(slot)?
            .map(|at| read_bytes::<8>(self.buf, at).map(i64::from_le_bytes))
            .transpose()
    }

    /// A `bool` field.
    pub fn bool(&self, slot: usize) -> Result<Option<bool>, FbError> {
        Ok(self.u8(slot)?.map(|b| b != 0))
    }

    /// A `[ubyte]` field.
    pub fn bytes(&self, slot: usize) -> Result<Option<&'a [u8]>, FbError> {
        let Some(at) = self.field(slot)? else {
            return Ok(None);
        };
        let start = follow(self.buf, at)?;
        let len = read_u32(self.buf, start)? as usize;
        let data = start + 4;
        data.checked_add(len)
            .and_then(|end| self.buf.get(data..end))
            .map(Some)
            .ok_or(FbError::OutOfBounds {
                at: data,
                len: self.buf.len(),
            })
    }

    /// A `string` field.
    pub fn str(&self, slot: usize) -> Result<Option<&'a str>, FbError> {
        let Some(at) = self.field(slot)? else {
            return Ok(None);
        };
        let bytes = self.bytes(slot)?.unwrap_or_default();
        std::str::from_utf8(bytes)
            .map(Some)
            .map_err(|_| FbError::NotUtf8 { at })
    }

    /// A sub-table field.
    pub fn table(&self, slot: usize) -> Result<Option<Table<'a>>, FbError> {
        let Some(at) = self.field(slot)? else {
            return Ok(None);
        };
        Table::at(self.buf, follow(self.buf, at)?).map(Some)
    }

    /// A `[Table]` field.
    pub fn tables(&self, slot: usize) -> Result<Vec<Table<'a>>, FbError> {
        let Some(at) = self.field(slot)? else {
            return Ok(Vec::new());
        };
        let start = follow(self.buf, at)?;
        let len = read_u32(self.buf, start)? as usize;
        (0..len)
            .map(|i| {
                let elem = start + 4 + 4 * i;
                Table::at(self.buf, follow(self.buf, elem)?)
            })
            .collect()
    }

    /// A `[string]` field.
    pub fn strings(&self, slot: usize) -> Result<Vec<String>, FbError> {
        let Some(at) = self.field(slot)? else {
            return Ok(Vec::new());
        };
        let start = follow(self.buf, at)?;
        let len = read_u32(self.buf, start)? as usize;
        (0..len)
            .map(|i| {
                let s = follow(self.buf, start + 4 + 4 * i)?;
                let n = read_u32(self.buf, s)? as usize;
                let bytes = (s + 4)
                    .checked_add(n)
                    .and_then(|end| self.buf.get(s + 4..end))
                    .ok_or(FbError::OutOfBounds {
                        at: s,
                        len: self.buf.len(),
                    })?;
                std::str::from_utf8(bytes)
                    .map(str::to_string)
                    .map_err(|_| FbError::NotUtf8 { at: s })
            })
            .collect()
    }

    /// A union: the tag in `slot` and the table in `slot + 1`.
    pub fn union(&self, slot: usize) -> Result<Option<(u8, Table<'a>)>, FbError> {
        match (self.u8(slot)?, self.table(slot + 1)?) {
            (Some(tag), Some(t)) if tag != 0 => Ok(Some((tag, t))),
            _ => Ok(None),
        }
    }

    /// An inline `Timestamp` struct field.
    pub fn timestamp(&self, slot: usize) -> Result<Option<DateTime<Utc>>, FbError> {
        let Some(at) = self.field(slot)? else {
            return Ok(None);
        };
        let raw = read_bytes::<16>(self.buf, at)?;
        let year = i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let ordinal = u16::from_le_bytes([raw[4], raw[5]]);
        let seconds = u32::from_le_bytes([raw[8], raw[9], raw[10], raw[11]]);
        let nanoseconds = u32::from_le_bytes([raw[12], raw[13], raw[14], raw[15]]);
        let invalid = FbError::InvalidTimestamp {
            year,
            ordinal,
            seconds,
            nanoseconds,
        };
        let date = NaiveDate::from_yo_opt(year, u32::from(ordinal)).ok_or(invalid.clone())?;
        let time = chrono::NaiveTime::from_num_seconds_from_midnight_opt(seconds, nanoseconds)
            .ok_or(invalid)?;
        Ok(Some(date.and_time(time).and_utc()))
    }
}

/// ODF's `Timestamp` struct: year, ordinal day, seconds from midnight, nanoseconds (16 bytes, align 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FbTimestamp([u8; 16]);

impl FbTimestamp {
    /// Encodes a UTC time.
    pub fn new(t: DateTime<Utc>) -> Self {
        let mut raw = [0u8; 16];
        raw[0..4].copy_from_slice(&t.year().to_le_bytes());
        raw[4..6].copy_from_slice(&(t.ordinal() as u16).to_le_bytes());
        raw[8..12].copy_from_slice(&t.num_seconds_from_midnight().to_le_bytes());
        raw[12..16].copy_from_slice(&t.nanosecond().to_le_bytes());
        Self(raw)
    }
}

impl Push for FbTimestamp {
    type Output = FbTimestamp;

    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst[..16].copy_from_slice(&self.0);
    }

    fn size() -> usize {
        16
    }

    fn alignment() -> PushAlignment {
        PushAlignment::new(4)
    }
}

/// Creates a `[ubyte]` vector.
pub fn bytes<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    data: &[u8],
) -> WIPOffset<flatbuffers::Vector<'b, u8>> {
    fbb.create_vector(data)
}

/// Creates a `[string]` vector.
pub fn strings<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    items: &[String],
) -> WIPOffset<flatbuffers::Vector<'b, flatbuffers::ForwardsUOffset<&'b str>>> {
    let offsets: Vec<_> = items.iter().map(|s| fbb.create_string(s)).collect();
    fbb.create_vector(&offsets)
}

/// Field slot number to the vtable offset the builder wants.
pub const fn slot(n: u16) -> flatbuffers::VOffsetT {
    4 + 2 * n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_buffers_are_errors_not_panics() {
        for len in 0..8 {
            let buf = vec![0xffu8; len];
            assert!(Table::root(&buf).is_err());
        }
    }

    #[test]
    fn timestamp_round_trips_through_a_table() {
        let t = DateTime::parse_from_rfc3339("2023-03-01T12:34:56.789Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut fbb = FlatBufferBuilder::new();
        let name = fbb.create_string("x");
        let start = fbb.start_table();
        fbb.push_slot_always(slot(0), FbTimestamp::new(t));
        fbb.push_slot_always(slot(1), name);
        let root = fbb.end_table(start);
        fbb.finish_minimal(root);
        let table = Table::root(fbb.finished_data()).unwrap();
        assert_eq!(table.timestamp(0).unwrap(), Some(t));
        assert_eq!(table.str(1).unwrap(), Some("x"));
        assert_eq!(table.str(2).unwrap(), None);
    }
}
