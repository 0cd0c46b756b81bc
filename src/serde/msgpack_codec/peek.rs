//! msgpack looked at without decoding it: a map's entries located in one
//! checking pass, and what kind of value a checked slice holds.

use super::decode::{all_read, DResult, Fail, Scanner};
use super::{DecodeLimits, MAX_DEPTH};
use crate::error::Result;

/// A pair of a map: its key and its value, each one whole msgpack value
/// (a slice of the input).
pub(crate) type Pair<'a> = (&'a [u8], &'a [u8]);

/// One entry of the map [`map_entries`] reads.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
    /// The value's own entries when it is a map (one level down).
    pub(crate) inner: Option<Vec<Pair<'a>>>,
}

/// Checks `bytes` as [`validate`](super::validate) does (the same checks in
/// the same order, so the same error), and gives the entries of the map it
/// holds, each value that is a map with its entries too; `None` when it is
/// not a map. Nothing is decoded or copied.
///
/// # Errors
/// As [`validate`](super::validate).
pub(crate) fn map_entries(bytes: &[u8], limits: DecodeLimits) -> Result<Option<Vec<Entry<'_>>>> {
    let mut scan = Scanner::new(bytes, limits.max_depth);
    let entries = walk(&mut scan, bytes).map_err(Fail::into_error)?;
    all_read(bytes.len(), scan.pos)?;
    Ok(entries)
}

fn walk<'a>(scan: &mut Scanner<'a>, bytes: &'a [u8]) -> DResult<Option<Vec<Entry<'a>>>> {
    // a map's header and its items are checked as `value` checks them
    let Some(n) = scan.map_header(0)? else {
        scan.value(0)?;
        return Ok(None);
    };
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let key = next(scan, bytes, 1)?;
        let at = scan.pos;
        let inner = match scan.map_header(1)? {
            Some(m) => {
                let mut pairs = Vec::with_capacity(m);
                for _ in 0..m {
                    pairs.push((next(scan, bytes, 2)?, next(scan, bytes, 2)?));
                }
                Some(pairs)
            }
            None => {
                scan.value(1)?;
                None
            }
        };
        entries.push(Entry {
            key,
            value: &bytes[at..scan.pos],
            inner,
        });
    }
    Ok(Some(entries))
}

/// The value at the scanner's position (at `depth`), checked.
fn next<'a>(scan: &mut Scanner<'a>, bytes: &'a [u8], depth: usize) -> DResult<&'a [u8]> {
    let at = scan.pos;
    scan.value(depth)?;
    Ok(&bytes[at..scan.pos])
}

/// The kind of one checked msgpack value, as [`decode`](super::decode)
/// would make it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Peek {
    Nil,
    /// A string (read it with [`text`]).
    Str,
    /// An integer that fits `i64` (`Value::Int`).
    Int(i64),
    /// An integer above `i64::MAX` (`Value::UInt`).
    BigUint,
    /// `Value::Float` or `Value::F32`.
    Float,
    Map,
    Array,
    /// A boolean, binary or extension.
    Other,
}

/// What the checked value `v` is, from its header alone. A slice that is
/// not one checked value reads as [`Peek::Other`].
pub(crate) fn peek(v: &[u8]) -> Peek {
    let Some(&marker) = v.first() else {
        return Peek::Other;
    };
    let be = |n: usize| -> Option<u64> {
        let bytes = v.get(1..1 + n)?;
        Some(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    };
    let signed = |n: usize| be(n).map(|u| ((u << (64 - 8 * n)) as i64) >> (64 - 8 * n));
    let int = |i: Option<i64>| i.map_or(Peek::Other, Peek::Int);
    match marker {
        0x00..=0x7f => Peek::Int(i64::from(marker)),
        0xe0..=0xff => Peek::Int(i64::from(marker as i8)),
        0xc0 => Peek::Nil,
        0xa0..=0xbf | 0xd9..=0xdb => Peek::Str,
        0xcc => int(be(1).map(|u| u as i64)),
        0xcd => int(be(2).map(|u| u as i64)),
        0xce => int(be(4).map(|u| u as i64)),
        0xcf => match be(8) {
            Some(u) => i64::try_from(u).map_or(Peek::BigUint, Peek::Int),
            None => Peek::Other,
        },
        0xd0 => int(signed(1)),
        0xd1 => int(signed(2)),
        0xd2 => int(signed(4)),
        0xd3 => int(signed(8)),
        0xca | 0xcb => Peek::Float,
        0x80..=0x8f | 0xde | 0xdf => Peek::Map,
        0x90..=0x9f | 0xdc | 0xdd => Peek::Array,
        _ => Peek::Other,
    }
}

/// The string the checked value `v` is, if it is one.
pub(crate) fn text(v: &[u8]) -> Option<&str> {
    std::str::from_utf8(text_bytes(v)?).ok()
}

/// The bytes of the string the checked value `v` is, if it is one.
pub(crate) fn text_bytes(v: &[u8]) -> Option<&[u8]> {
    match header(v)? {
        (Payload::Str, n) => v.get(n..),
        _ => None,
    }
}

/// What a value with a length in its header holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Payload {
    Str,
    Bin,
    /// An extension: its code is the byte after the header.
    Ext,
}

/// What `v` starts with, when it is a string, binary or extension, and the
/// length of its header (marker and length; for an extension, the code
/// follows).
pub(crate) fn header(v: &[u8]) -> Option<(Payload, usize)> {
    Some(match *v.first()? {
        0xa0..=0xbf => (Payload::Str, 1),
        0xd9 => (Payload::Str, 2),
        0xda => (Payload::Str, 3),
        0xdb => (Payload::Str, 5),
        0xc4 => (Payload::Bin, 2),
        0xc5 => (Payload::Bin, 3),
        0xc6 => (Payload::Bin, 5),
        0xd4..=0xd8 => (Payload::Ext, 1),
        0xc7 => (Payload::Ext, 2),
        0xc8 => (Payload::Ext, 3),
        0xc9 => (Payload::Ext, 5),
        _ => return None,
    })
}

/// The pairs of the checked map `v` (none when it is not a map).
pub(crate) fn pairs(v: &[u8]) -> impl Iterator<Item = Pair<'_>> {
    let mut scan = Scanner::new(v, MAX_DEPTH);
    let n = scan.map_header(0).ok().flatten().unwrap_or(0);
    (0..n).map_while(move |_| Some((next(&mut scan, v, 1).ok()?, next(&mut scan, v, 1).ok()?)))
}

/// The elements of the checked array `v`; `None` when it is not an array.
pub(crate) fn elements(v: &[u8]) -> Option<impl Iterator<Item = &[u8]>> {
    let (n, header) = match *v.first()? {
        marker @ 0x90..=0x9f => (usize::from(marker & 0x0f), 1),
        0xdc => (usize::from(u16::from_be_bytes(v.get(1..3)?.try_into().ok()?)), 3),
        0xdd => (
            usize::try_from(u32::from_be_bytes(v.get(1..5)?.try_into().ok()?)).ok()?,
            5,
        ),
        _ => return None,
    };
    let mut scan = Scanner::new(v, MAX_DEPTH);
    scan.pos = header;
    Some((0..n).map_while(move |_| next(&mut scan, v, 1).ok()))
}
