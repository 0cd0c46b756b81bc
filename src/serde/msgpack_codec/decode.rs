//! Bounded decoding into `Value`.
//!
//! Zero-copy: strings longer than [`INLINE`] bytes, binaries and raw
//! extension payloads become slices of one shared buffer (the caller's
//! [`Bytes`], or one copy of the caller's `&[u8]`), shorter strings are held inline, and each list or map is one
//! allocation sized from its declared count.

use bytes::Bytes;

use super::{DecodeLimits, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::serde::value::{Ext, ExtPayload, SharedVec, Value};
use crate::serde::Str;

/// Strings up to this many bytes are copied into the value (no allocation,
/// no reference count: `Str` holds them inline); longer ones are slices of
/// the input. Measured in `docs/performance.md`, *Zero-copy decode*.
const INLINE: usize = 24;

/// Decodes one msgpack value that must span all of `bytes`.
///
/// Bounded: a declared length is checked against the remaining input before
/// anything is allocated, so memory use stays proportional to the input; nesting
/// deeper than [`MAX_DEPTH`] is refused.
///
/// Long strings, binaries and raw extension payloads of the result share one
/// copy of `bytes` (inputs of more than 256 bytes; shorter ones copy each
/// such string on its own): [`decode_bytes`] shares the caller's buffer
/// instead, without that copy.
///
/// # Errors
/// [`Error::Serde`] for truncated or malformed input, trailing bytes, invalid
/// UTF-8 in a string, the reserved byte `0xc1`, or nesting deeper than the
/// limit.
pub fn decode(bytes: &[u8]) -> Result<Value> {
    decode_with(bytes, DecodeLimits::default())
}

/// [`decode`] with explicit limits.
///
/// # Errors
/// As [`decode`].
pub fn decode_with(bytes: &[u8], limits: DecodeLimits) -> Result<Value> {
    if bytes.len() <= COPY_BELOW {
        return run(bytes, Source::Copy, limits);
    }
    decode_bytes_with(&Bytes::copy_from_slice(bytes), limits)
}

/// [`decode`] of a shared buffer: long strings, binaries and raw extension
/// payloads of the result are slices of `bytes` (which they keep alive), so
/// nothing is copied. Savers decode their rows with it.
///
/// ```
/// use bytes::Bytes;
/// use checkpointer::serde::msgpack;
/// let row = Bytes::from(msgpack::encode(&"a string longer than twenty-four bytes".into())?);
/// let v = msgpack::decode_bytes(&row)?;
/// assert_eq!(v.as_str(), Some("a string longer than twenty-four bytes"));
/// assert_eq!(v.as_str().unwrap().as_ptr(), row[2..].as_ptr()); // a slice of `row` (after `d9 26`)
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// # Errors
/// As [`decode`].
pub fn decode_bytes(bytes: &Bytes) -> Result<Value> {
    decode_bytes_with(bytes, DecodeLimits::default())
}

/// [`decode_bytes`] with explicit limits.
///
/// # Errors
/// As [`decode`].
pub fn decode_bytes_with(bytes: &Bytes, limits: DecodeLimits) -> Result<Value> {
    run(bytes, Source::Shared(bytes), limits)
}

fn run<'a>(bytes: &'a [u8], source: Source<'a>, limits: DecodeLimits) -> Result<Value> {
    let mut d = Decoder::new(bytes, source, limits);
    let value = d.value(0).map_err(Fail::into_error)?;
    all_read(bytes.len(), d.pos)?;
    Ok(value)
}

/// `Ok` when the value read ends at `pos` where the input (`len` bytes)
/// ends; otherwise the error of trailing bytes.
pub(super) fn all_read(len: usize, pos: usize) -> Result<()> {
    if pos != len {
        return Err(Error::serde(format!(
            "msgpack: {} trailing bytes after the value at offset {pos}",
            len - pos
        )));
    }
    Ok(())
}

/// Whether an extension payload nests more than `max_depth` levels, as the
/// decoder counts them (it refuses such a payload even where it would keep
/// the bytes raw).
pub(crate) fn payload_too_deep(raw: &[u8], max_depth: usize) -> bool {
    let mut scan = Scanner::new(raw, max_depth);
    matches!(scan.value(0), Err(Fail::TooDeep(_)))
}

/// Checks that `bytes` is one msgpack value [`decode_with`] would accept
/// with these limits (well-formed, valid UTF-8 strings, nothing trailing,
/// nesting within the limit), without building it: no allocation, a fraction
/// of a decode's time. A saver storing bytes it was handed as they are checks
/// them with it.
///
/// ```
/// use checkpointer::serde::msgpack::{self, DecodeLimits};
/// assert!(msgpack::validate(&[0x91, 0x01], DecodeLimits::default()).is_ok());
/// assert!(msgpack::validate(&[0x92, 0x01], DecodeLimits::default()).is_err()); // truncated
/// assert!(msgpack::validate(&[0x91, 0x91, 0x01], DecodeLimits { max_depth: 1 }).is_err());
/// ```
///
/// # Errors
/// As [`decode`].
pub fn validate(bytes: &[u8], limits: DecodeLimits) -> Result<()> {
    let mut scan = Scanner::new(bytes, limits.max_depth);
    scan.value(0).map_err(Fail::into_error)?;
    all_read(bytes.len(), scan.pos)
}

/// `n` bytes declared at `pos` where `remaining` are left (kept out of
/// line: the read paths stay small enough to inline).
#[cold]
#[inline(never)]
fn truncated(n: usize, pos: usize, remaining: usize) -> Fail {
    Fail::Malformed(format!(
        "truncated: {n} bytes declared at offset {pos} but {remaining} remain"
    ))
}

/// A container of `n` items declared at `pos` where fewer bytes remain.
#[cold]
#[inline(never)]
fn no_room(n: usize, what: &str, items: &str, pos: usize, remaining: usize) -> Fail {
    Fail::Malformed(format!(
        "truncated: {what} of {n} {items} at offset {pos} but {remaining} bytes remain"
    ))
}

/// Walks msgpack as [`Decoder`] reads it, checking what it checks in the
/// same order (so the first failure is the same), building nothing.
/// Recursion is bounded by `max_depth` (at most [`MAX_DEPTH`]), as the
/// decoder's.
pub(super) struct Scanner<'a> {
    buf: &'a [u8],
    pub(super) pos: usize,
    max_depth: usize,
    /// Whether every header read so far, outside extension payloads, took
    /// the canonical (Python) form, as [`Decoder::note`] judges it: then
    /// decoding the bytes and encoding the value gives them back unchanged
    /// (an extension payload comes back as it was either way).
    pub(super) canonical: bool,
    /// One more than the deepest level at which a list, map or extension
    /// was met (0: none).
    pub(super) deepest: usize,
}

impl<'a> Scanner<'a> {
    pub(super) fn new(buf: &'a [u8], max_depth: usize) -> Self {
        Scanner {
            buf,
            pos: 0,
            max_depth: max_depth.min(MAX_DEPTH),
            canonical: true,
            deepest: 0,
        }
    }

    /// An `N`-byte length or unsigned integer that Python writes in this
    /// width only from `min` on.
    fn sized<const N: usize>(&mut self, min: usize) -> DResult<usize> {
        let n = self.uint::<N>()?;
        self.canonical &= n >= min;
        Ok(n)
    }

    /// An `N`-byte signed integer that Python writes in this width only
    /// below `max`.
    fn signed<const N: usize>(&mut self, max: i64) -> DResult<()> {
        let shift = 64 - 8 * N as u32;
        let i = ((self.uint::<N>()? as u64) << shift) as i64 >> shift;
        self.canonical &= i < max;
        Ok(())
    }

    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        match self.buf.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(truncated(n, self.pos, self.buf.len() - self.pos)),
        }
    }

    fn uint<const N: usize>(&mut self) -> DResult<usize> {
        let mut be = [0u8; 8];
        be[8 - N..].copy_from_slice(self.take(N)?);
        Ok(u64::from_be_bytes(be) as usize)
    }

    fn str(&mut self, n: usize) -> DResult<()> {
        let at = self.pos;
        let bytes = self.take(n)?;
        utf8(bytes).map(drop).map_err(|e| invalid_utf8(at, &e))
    }

    pub(super) fn value(&mut self, depth: usize) -> DResult<()> {
        let at = self.pos;
        let marker = self.take(1)?[0];
        match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => Ok(()),
            0xa0..=0xbf => self.str(usize::from(marker & 0x1f)),
            0x80..=0x8f => self.items(usize::from(marker & 0x0f), 2, depth),
            0x90..=0x9f => self.items(usize::from(marker & 0x0f), 1, depth),
            // arrays (0xdc, 0xdd) of single values, maps (0xde, 0xdf) of pairs
            0xdc | 0xde => {
                let n = self.sized::<2>(16)?;
                self.items(n, usize::from(marker == 0xde) + 1, depth)
            }
            0xdd | 0xdf => {
                let n = self.sized::<4>(0x1_0000)?;
                self.items(n, usize::from(marker == 0xdf) + 1, depth)
            }
            0xd9 => {
                let n = self.sized::<1>(32)?;
                self.str(n)
            }
            0xda => {
                let n = self.sized::<2>(0x100)?;
                self.str(n)
            }
            0xdb => {
                let n = self.sized::<4>(0x1_0000)?;
                self.str(n)
            }
            0xc4..=0xc6 => {
                let n = match marker {
                    0xc4 => self.uint::<1>()?,
                    0xc5 => self.sized::<2>(0x100)?,
                    _ => self.sized::<4>(0x1_0000)?,
                };
                self.take(n).map(drop)
            }
            0xcc => self.sized::<1>(0x80).map(drop),
            0xcd => self.sized::<2>(0x100).map(drop),
            0xce => self.sized::<4>(0x1_0000).map(drop),
            0xcf => {
                let u = u64::from_be_bytes(self.take(8)?.try_into().unwrap_or_default());
                self.canonical &= u >= 0x1_0000_0000;
                Ok(())
            }
            0xd0 => self.signed::<1>(-32),
            0xd1 => self.signed::<2>(i8::MIN.into()),
            0xd2 => self.signed::<4>(i16::MIN.into()),
            0xd3 => self.signed::<8>(i32::MIN.into()),
            0xca => self.take(4).map(drop),
            0xcb => self.take(8).map(drop),
            0xd4..=0xd8 => self.ext(1 << (marker - 0xd4), depth),
            0xc7 => {
                let n = self.uint::<1>()?;
                self.canonical &= !matches!(n, 1 | 2 | 4 | 8 | 16);
                self.ext(n, depth)
            }
            0xc8 => {
                let n = self.sized::<2>(0x100)?;
                self.ext(n, depth)
            }
            0xc9 => {
                let n = self.sized::<4>(0x1_0000)?;
                self.ext(n, depth)
            }
            _ => Err(Fail::Malformed(format!("reserved byte {marker:#04x} at offset {at}"))),
        }
    }

    /// The entry count of the map at the position, its header read and the
    /// count checked as [`items`](Self::items) checks it at `depth`;
    /// `None`, nothing read, when the value there is not a map.
    pub(super) fn map_header(&mut self, depth: usize) -> DResult<Option<usize>> {
        let n = match self.buf.get(self.pos) {
            Some(&marker @ 0x80..=0x8f) => {
                self.pos += 1;
                usize::from(marker & 0x0f)
            }
            Some(0xde) => {
                self.pos += 1;
                self.sized::<2>(16)?
            }
            Some(0xdf) => {
                self.pos += 1;
                self.sized::<4>(0x1_0000)?
            }
            _ => return Ok(None),
        };
        self.room(n, 2, depth)?;
        Ok(Some(n))
    }

    /// `n` entries of `per` values each (a map's entries are pairs).
    fn items(&mut self, n: usize, per: usize, depth: usize) -> DResult<()> {
        self.room(n, per, depth)?;
        for _ in 0..n * per {
            self.value(depth + 1)?;
        }
        Ok(())
    }

    /// The checks before `n` entries of `per` values at `depth`.
    fn room(&mut self, n: usize, per: usize, depth: usize) -> DResult<()> {
        self.deepest = self.deepest.max(depth + 1);
        if depth >= self.max_depth {
            return Err(Fail::TooDeep(self.max_depth));
        }
        let remaining = self.buf.len() - self.pos;
        if n > remaining / per {
            let (what, items) = if per == 2 {
                ("map", "entries")
            } else {
                ("array", "elements")
            };
            return Err(no_room(n, what, items, self.pos, remaining));
        }
        Ok(())
    }

    /// An extension of `n` bytes: LangGraph's codes (0–7) carry msgpack,
    /// which only fails the whole for nesting too deep (the decoder keeps
    /// any other payload raw).
    fn ext(&mut self, n: usize, depth: usize) -> DResult<()> {
        self.deepest = self.deepest.max(depth + 1);
        if depth >= self.max_depth {
            return Err(Fail::TooDeep(self.max_depth));
        }
        let code = self.take(1)?[0] as i8;
        let data = self.take(n)?;
        if (0..=7).contains(&code) {
            let mut inner = Scanner {
                buf: data,
                pos: 0,
                max_depth: self.max_depth,
                canonical: true,
                deepest: 0,
            };
            let inner_result = inner.value(depth + 1);
            self.deepest = self.deepest.max(inner.deepest);
            if let Err(Fail::TooDeep(limit)) = inner_result {
                return Err(Fail::TooDeep(limit));
            }
        }
        Ok(())
    }
}

/// Where the slices of the input come from.
#[derive(Clone, Copy)]
enum Source<'b> {
    /// The caller's buffer.
    Shared(&'b Bytes),
    /// A short input, not worth sharing: each long string and binary is
    /// copied on its own.
    Copy,
}

/// Inputs of up to this many bytes are decoded with a copy of each long
/// string and binary ([`Source::Copy`]); longer ones are copied once into a
/// shared buffer that the result slices.
const COPY_BELOW: usize = 256;

/// `bytes` as a string, checked once. ASCII (nearly every string LangGraph
/// stores: keys, roles, ids, most message text) is checked by [`ascii`], a
/// fraction of the instructions `str::from_utf8` spends per byte
/// (callgrind, `docs/performance.md`, *Zero-copy decode*); anything else
/// goes through `str::from_utf8`.
#[inline]
fn utf8(bytes: &[u8]) -> std::result::Result<&str, std::str::Utf8Error> {
    if ascii(bytes) {
        // SAFETY: ASCII bytes are valid UTF-8.
        #[allow(unsafe_code)]
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes)
}

/// Whether every byte is below 0x80: the bytes ORed together eight at a
/// time, the last eight overlapping (no early exit and no byte-by-byte
/// tail, which `<[u8]>::is_ascii` spends most of its time on for strings
/// of this length).
#[inline]
fn ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap_or_default());
    match bytes.len() {
        0 => true,
        1..4 => bytes.iter().fold(0, |acc, &b| acc | b) < 0x80,
        4..8 => {
            let n = bytes.len();
            let half = |b: &[u8]| u32::from_ne_bytes(b.try_into().unwrap_or_default());
            (half(&bytes[..4]) | half(&bytes[n - 4..])) & 0x8080_8080 == 0
        }
        n => {
            let all = bytes
                .chunks_exact(8)
                .fold(word(&bytes[n - 8..]), |acc, w| acc | word(w));
            all & HIGH == 0
        }
    }
}

/// The error for a string that is not UTF-8 (out of line, like `truncated`).
#[cold]
#[inline(never)]
fn invalid_utf8(at: usize, e: &std::str::Utf8Error) -> Fail {
    Fail::Malformed(format!("invalid UTF-8 in string at offset {at}: {e}"))
}

pub(super) enum Fail {
    /// Nesting over the limit: never hidden by the raw-ext fallback.
    TooDeep(usize),
    Malformed(String),
}

impl Fail {
    pub(super) fn into_error(self) -> Error {
        match self {
            Fail::TooDeep(limit) => Error::serde(format!("msgpack: nesting deeper than the limit of {limit}")),
            Fail::Malformed(reason) => Error::serde(format!("msgpack: {reason}")),
        }
    }
}

pub(super) type DResult<T> = std::result::Result<T, Fail>;

struct Decoder<'a> {
    /// The bytes this decoder reads: the input, or an extension payload in it.
    buf: &'a [u8],
    /// Where `buf` starts in the input.
    base: usize,
    pos: usize,
    source: Source<'a>,
    max_depth: usize,
    /// Whether everything read so far used the canonical (Python) form.
    canonical: bool,
}

impl<'a> Decoder<'a> {
    fn new(buf: &'a [u8], source: Source<'a>, limits: DecodeLimits) -> Self {
        Decoder {
            buf,
            base: 0,
            pos: 0,
            source,
            max_depth: limits.max_depth.min(MAX_DEPTH),
            canonical: true,
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        match self.buf.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.truncated(n)),
        }
    }

    /// The error for `n` bytes declared where fewer remain (kept out of line:
    /// the read paths stay small enough to inline).
    #[cold]
    #[inline(never)]
    fn truncated(&self, n: usize) -> Fail {
        truncated(n, self.pos, self.buf.len() - self.pos)
    }

    #[inline]
    fn u8(&mut self) -> DResult<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.truncated(1)),
        }
    }

    /// A big-endian unsigned integer of `N` (1, 2, 4 or 8) bytes.
    #[inline]
    fn uint<const N: usize>(&mut self) -> DResult<u64> {
        let mut be = [0u8; 8];
        be[8 - N..].copy_from_slice(self.take(N)?);
        Ok(u64::from_be_bytes(be))
    }

    /// An `N`-byte unsigned integer that Python writes in this width only
    /// from `min` on (smaller ones take a shorter form).
    #[inline]
    fn sized<const N: usize>(&mut self, min: u64) -> DResult<u64> {
        let u = self.uint::<N>()?;
        self.note(u >= min);
        Ok(u)
    }

    /// An `N`-byte (1, 2 or 4) length, as [`sized`](Self::sized).
    #[inline]
    fn len<const N: usize>(&mut self, min: u64) -> DResult<usize> {
        Ok(self.sized::<N>(min)? as usize)
    }

    /// An `N`-byte signed integer that Python writes in this width only
    /// below `max` (larger ones take a shorter form).
    #[inline]
    fn signed<const N: usize>(&mut self, max: i64) -> DResult<i64> {
        let shift = 64 - 8 * N as u32;
        let i = ((self.uint::<N>()? << shift) as i64) >> shift;
        self.note(i < max);
        Ok(i)
    }

    /// A `str` or `bin` (`read`) whose length takes `N` bytes, as
    /// [`sized`](Self::sized).
    #[inline(always)]
    fn sized_data<const N: usize>(&mut self, min: u64, read: fn(&mut Self, usize) -> DResult<Value>) -> DResult<Value> {
        let n = self.len::<N>(min)?;
        read(self, n)
    }

    fn note(&mut self, canonical: bool) {
        self.canonical &= canonical;
    }

    /// Reads one value. Kept small, with containers and scalars in separate
    /// non-inlined functions, so that each nesting level costs little stack
    /// even in unoptimised builds.
    fn value(&mut self, depth: usize) -> DResult<Value> {
        let marker = self.u8()?;
        match marker {
            // The most common markers first, without a further call.
            0x00..=0x7f => Ok(Value::Int(i64::from(marker))),
            0xa0..=0xbf => self.str(usize::from(marker & 0x1f)),
            0x80..=0x8f => self.map(usize::from(marker & 0x0f), depth),
            0x90..=0x9f => self.array(usize::from(marker & 0x0f), depth),
            0xc7..=0xc9 | 0xd4..=0xd8 | 0xdc..=0xdf => self.container(marker, depth),
            _ => self.scalar(marker),
        }
    }

    #[inline(never)]
    fn container(&mut self, marker: u8, depth: usize) -> DResult<Value> {
        let n = match marker {
            0xc7 => {
                let n = self.len::<1>(0)?;
                self.note(!matches!(n, 1 | 2 | 4 | 8 | 16));
                n
            }
            0xc8 => self.len::<2>(0x100)?,
            0xdc | 0xde => self.len::<2>(16)?,
            0xc9 | 0xdd | 0xdf => self.len::<4>(0x1_0000)?,
            // fixext 1, 2, 4, 8, 16
            _ => 1 << (marker - 0xd4),
        };
        match marker {
            0xdc | 0xdd => self.array(n, depth),
            0xde | 0xdf => self.map(n, depth),
            _ => self.ext(n, depth),
        }
    }

    /// Everything but the fix forms and containers [`value`](Self::value)
    /// reads itself.
    #[inline(never)]
    fn scalar(&mut self, marker: u8) -> DResult<Value> {
        let at = self.pos - 1;
        Ok(match marker {
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => self.sized_data::<1>(0, Self::bin)?,
            0xc5 => self.sized_data::<2>(0x100, Self::bin)?,
            0xc6 => self.sized_data::<4>(0x1_0000, Self::bin)?,
            0xca => Value::F32(f32::from_bits(self.uint::<4>()? as u32)),
            0xcb => Value::Float(f64::from_bits(self.uint::<8>()?)),
            0xcc => Value::from(self.sized::<1>(0x80)?),
            0xcd => Value::from(self.sized::<2>(0x100)?),
            0xce => Value::from(self.sized::<4>(0x1_0000)?),
            0xcf => Value::from(self.sized::<8>(0x1_0000_0000)?),
            0xd0 => Value::Int(self.signed::<1>(-32)?),
            0xd1 => Value::Int(self.signed::<2>(i8::MIN.into())?),
            0xd2 => Value::Int(self.signed::<4>(i16::MIN.into())?),
            0xd3 => Value::Int(self.signed::<8>(i32::MIN.into())?),
            0xd9 => self.sized_data::<1>(32, Self::str)?,
            0xda => self.sized_data::<2>(0x100, Self::str)?,
            0xdb => self.sized_data::<4>(0x1_0000, Self::str)?,
            0xe0..=0xff => Value::Int(i64::from(marker as i8)),
            // 0xc1 is reserved.
            _ => return Err(Fail::Malformed(format!("reserved byte {marker:#04x} at offset {at}"))),
        })
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Refuses `n` items of at least `bytes` bytes each where fewer bytes
    /// remain, before memory is reserved for them.
    #[inline]
    fn room_for(&self, n: usize, bytes: usize, what: &str, items: &str) -> DResult<()> {
        if n > self.remaining() / bytes {
            return Err(self.no_room(n, what, items));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn no_room(&self, n: usize, what: &str, items: &str) -> Fail {
        no_room(n, what, items, self.pos, self.remaining())
    }

    fn enter(&self, depth: usize) -> DResult<usize> {
        if depth >= self.max_depth {
            return Err(Fail::TooDeep(self.max_depth));
        }
        Ok(depth + 1)
    }

    /// The `n` bytes at `at` of `buf`: a slice of the shared input or a copy.
    #[inline]
    fn slice(&mut self, at: usize, n: usize) -> Bytes {
        match self.source {
            Source::Shared(b) => {
                let start = self.base + at;
                b.slice(start..start + n)
            }
            Source::Copy => Bytes::copy_from_slice(&self.buf[at..at + n]),
        }
    }

    #[inline]
    fn str(&mut self, n: usize) -> DResult<Value> {
        let at = self.pos;
        let bytes = self.take(n)?;
        let text = match utf8(bytes) {
            Ok(text) => text,
            Err(e) => return Err(invalid_utf8(at, &e)),
        };
        if n <= INLINE {
            return Ok(Value::Str(text.into()));
        }
        Ok(match self.source {
            Source::Shared(b) => {
                let start = self.base + at;
                Value::Str(Str::shared(text, b.slice(start..start + n)))
            }
            Source::Copy => Value::Str(text.into()),
        })
    }

    #[inline(never)]
    fn bin(&mut self, n: usize) -> DResult<Value> {
        let at = self.pos;
        self.take(n)?;
        Ok(Value::Bin(self.slice(at, n)))
    }

    #[inline(never)]
    fn array(&mut self, n: usize, depth: usize) -> DResult<Value> {
        let depth = self.enter(depth)?;
        self.room_for(n, 1, "array", "elements")?;
        let mut items = SharedVec::with_capacity(n);
        for _ in 0..n {
            items.push_reserved(self.value(depth)?);
        }
        Ok(Value::Array(items))
    }

    #[inline(never)]
    fn map(&mut self, n: usize, depth: usize) -> DResult<Value> {
        let depth = self.enter(depth)?;
        self.room_for(n, 2, "map", "entries")?;
        let mut entries = SharedVec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth)?;
            let v = self.value(depth)?;
            entries.push_reserved((k, v));
        }
        Ok(Value::Map(entries))
    }

    #[inline(never)]
    fn ext(&mut self, n: usize, depth: usize) -> DResult<Value> {
        let depth = self.enter(depth)?;
        let code = self.u8()? as i8;
        let at = self.pos;
        let data = self.take(n)?;
        if !(0..=7).contains(&code) {
            return Ok(Value::Ext(Box::new(Ext {
                code,
                payload: ExtPayload::Raw(self.slice(at, n)),
            })));
        }
        let mut inner = Decoder {
            buf: data,
            base: self.base + at,
            pos: 0,
            source: self.source,
            max_depth: self.max_depth,
            canonical: true,
        };
        let payload = match inner.value(depth) {
            Ok(v) if inner.pos == data.len() && inner.canonical => ExtPayload::Decoded(Box::new(v)),
            Err(Fail::TooDeep(limit)) => return Err(Fail::TooDeep(limit)),
            _ => ExtPayload::Raw(self.slice(at, n)),
        };
        Ok(Value::Ext(Box::new(Ext { code, payload })))
    }
}
