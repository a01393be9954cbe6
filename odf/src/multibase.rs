//! Multibase base16 (prefix `f`, lower-case hex): the text form of multihashes and dataset ids.

use std::fmt::{self, Write};

/// The multibase prefix of base16 lower case.
pub(crate) const BASE16_PREFIX: char = 'f';

/// Writes `f` + lower-case hex of `bytes`.
pub(crate) fn write_base16(bytes: &[u8], out: &mut impl Write) -> fmt::Result {
    out.write_char(BASE16_PREFIX)?;
    for byte in bytes {
        write!(out, "{byte:02x}")?;
    }
    Ok(())
}

/// Why a text is not multibase base16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base16Error {
    /// The text does not start with `f`.
    NotBase16,
    /// The rest is not an even number of lower-case hex digits.
    NotHex,
}

/// Parses `f` + lower-case hex. Upper-case digits are rejected: the text form is canonical, so that it
/// prints back the same.
pub(crate) fn read_base16(text: &str) -> Result<Vec<u8>, Base16Error> {
    let hex = text
        .strip_prefix(BASE16_PREFIX)
        .ok_or(Base16Error::NotBase16)?;
    if hex.len() % 2 != 0 {
        return Err(Base16Error::NotHex);
    }
    hex.as_bytes()
        .chunks_exact(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

fn digit(c: u8) -> Result<u8, Base16Error> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(Base16Error::NotHex),
    }
}
