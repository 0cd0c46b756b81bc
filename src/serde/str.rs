//! [`Str`]: the string of [`Value::Str`](super::Value::Str).

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;

use std::hash::{Hash, Hasher};

use bytes::Bytes;
use compact_str::CompactString;

/// The string held by [`Value::Str`](super::Value::Str).
///
/// Strings of up to 24 bytes (keys, roles, ids, short texts: most strings in
/// a checkpoint) are stored inside the value itself. A longer string is
/// either its own heap string (built from a `String` or `&str`) or a slice
/// of a shared [`Bytes`] buffer: the msgpack decoder hands out long strings
/// as slices of the row it read, so decoding a message's content copies and
/// allocates nothing (the buffer lives as long as any slice of it). Reading
/// goes through `Deref<Target = str>`; build one from `&str`, `String` or
/// `Cow<str>` with `into()`, or from UTF-8 [`Bytes`] with `try_from`, and get
/// a `String` back with [`Str::into_string`] or `String::from`.
///
/// ```
/// use checkpointer::serde::Str;
/// use checkpointer::Value;
/// let v = Value::Str("assistant".into());
/// assert_eq!(v.as_str(), Some("assistant"));
/// let s: Str = String::from("a longer string that lives on the heap").into();
/// assert!(s.starts_with("a longer"));
/// assert_eq!(s, "a longer string that lives on the heap");
/// let shared = Str::try_from(bytes::Bytes::from_static(b"a slice of a shared buffer")).unwrap();
/// assert_eq!(shared, "a slice of a shared buffer");
/// ```
#[derive(Clone)]
pub struct Str(Repr);

#[derive(Clone)]
enum Repr {
    /// Inline up to 24 bytes, else its own heap string.
    Owned(CompactString),
    /// A slice of a shared buffer, valid UTF-8 (checked when it was made:
    /// see [`Str::shared`]; `Bytes` never changes the bytes it points to).
    Shared(Bytes),
}

impl Str {
    /// An empty string (no allocation).
    pub const fn new() -> Self {
        Str(Repr::Owned(CompactString::const_new("")))
    }

    /// The string slice.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Owned(s) => s.as_str(),
            Repr::Shared(b) => {
                // SAFETY: a `Shared` buffer was valid UTF-8 when it was made
                // (`Str::shared` and `TryFrom<Bytes>` check it) and `Bytes`
                // never changes the bytes it points to.
                #[allow(unsafe_code)]
                unsafe {
                    std::str::from_utf8_unchecked(b)
                }
            }
        }
    }

    /// The string as a `String` (reusing the heap buffer where there is an
    /// unshared one).
    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Owned(s) => s.into_string(),
            Repr::Shared(_) => self.as_str().to_owned(),
        }
    }

    /// The bytes of `text`, held as the slice `bytes` of a shared buffer.
    /// `text` is the same memory, already checked to be UTF-8 (by the
    /// decoder, on the row's bytes): checked here by address and length, so
    /// the string is never checked twice.
    ///
    /// # Panics
    /// When `bytes` is not the memory of `text`.
    #[inline]
    pub(crate) fn shared(text: &str, bytes: Bytes) -> Str {
        assert!(
            std::ptr::eq(text.as_ptr(), bytes.as_ptr()) && text.len() == bytes.len(),
            "Str::shared: the bytes are not the checked text"
        );
        Str(Repr::Shared(bytes))
    }

    /// Whether the string is a slice of a shared buffer (tests).
    #[cfg(test)]
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.0, Repr::Shared(_))
    }
}

impl TryFrom<Bytes> for Str {
    type Error = std::str::Utf8Error;

    /// Holds the buffer itself (no copy) when it is valid UTF-8.
    fn try_from(bytes: Bytes) -> Result<Self, Self::Error> {
        std::str::from_utf8(&bytes)?;
        Ok(Str(Repr::Shared(bytes)))
    }
}

impl Default for Str {
    fn default() -> Self {
        Str::new()
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Str {}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Str {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// As `str`'s hash, so that `Borrow<str>` lookups work.
impl Hash for Str {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self.as_str().as_bytes()
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Str {
    #[inline]
    fn from(s: &str) -> Self {
        Str(Repr::Owned(CompactString::from(s)))
    }
}

impl From<&String> for Str {
    fn from(s: &String) -> Self {
        Str(Repr::Owned(CompactString::from(s.as_str())))
    }
}

impl From<String> for Str {
    fn from(s: String) -> Self {
        Str(Repr::Owned(CompactString::from(s)))
    }
}

impl From<Cow<'_, str>> for Str {
    fn from(s: Cow<'_, str>) -> Self {
        Str(Repr::Owned(CompactString::from(s)))
    }
}

impl From<Box<str>> for Str {
    fn from(s: Box<str>) -> Self {
        Str(Repr::Owned(CompactString::from(s)))
    }
}

impl From<char> for Str {
    fn from(c: char) -> Self {
        Str(Repr::Owned(CompactString::from(c.encode_utf8(&mut [0; 4]) as &str)))
    }
}

impl From<Str> for String {
    fn from(s: Str) -> Self {
        s.into_string()
    }
}

impl FromIterator<char> for Str {
    fn from_iter<I: IntoIterator<Item = char>>(iter: I) -> Self {
        Str(Repr::Owned(CompactString::from_iter(iter)))
    }
}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Str {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Str> for str {
    fn eq(&self, other: &Str) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Str> for &str {
    fn eq(&self, other: &Str) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Str> for String {
    fn eq(&self, other: &Str) -> bool {
        self.as_str() == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_are_inline_and_long_ones_round_trip() {
        let short = Str::from("content");
        assert!(matches!(&short.0, Repr::Owned(s) if !s.is_heap_allocated()));
        assert_eq!(short, "content");
        let long = "x".repeat(200);
        let s = Str::from(long.clone());
        assert!(matches!(&s.0, Repr::Owned(s) if s.is_heap_allocated()));
        assert_eq!(s.len(), 200);
        assert_eq!(s.clone().into_string(), long);
        assert_eq!(String::from(s), long);
        assert_eq!(format!("{:?}", Str::from("a\"b")), "\"a\\\"b\"");
        assert_eq!(Str::new(), "");
        assert_eq!(crate::Value::from(Str::from("k")), crate::Value::from("k"));
    }

    #[test]
    fn shared_strings_compare_hash_and_convert_as_owned_ones() {
        use std::collections::HashSet;
        let buf = Bytes::from(format!("key:{}", "é".repeat(20)));
        let text = std::str::from_utf8(&buf).unwrap();
        let shared = Str::shared(text, buf.clone());
        assert!(shared.is_shared());
        let owned = Str::from(text);
        assert_eq!(shared, owned);
        assert_eq!(shared.cmp(&owned), std::cmp::Ordering::Equal);
        assert!(HashSet::from([owned.clone()]).contains(&shared));
        assert!(HashSet::from([shared.clone()]).contains(text));
        assert_eq!(shared.clone().into_string(), text);
        assert_eq!(format!("{shared}"), text);
        assert_eq!(format!("{shared:?}"), format!("{text:?}"));
        assert!(Str::try_from(Bytes::from_static(b"\xff")).is_err());
        assert_eq!(Str::try_from(buf.slice(0..4)).unwrap(), "key:");
    }

    #[test]
    #[should_panic(expected = "not the checked text")]
    fn shared_refuses_bytes_other_than_the_checked_text() {
        let buf = Bytes::from_static(b"abcabc");
        let _ = Str::shared("abc", buf.slice(3..6));
    }

    #[test]
    fn value_stays_40_bytes() {
        assert!(std::mem::size_of::<Str>() <= 32);
        assert!(std::mem::size_of::<crate::Value>() <= 40);
    }
}
