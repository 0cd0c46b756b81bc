//! [`Str`]: the string of [`Value::Str`](super::Value::Str).

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;

use compact_str::CompactString;

/// The string held by [`Value::Str`](super::Value::Str).
///
/// Strings of up to 24 bytes (keys, roles, ids, short texts: most strings in
/// a checkpoint) are stored inside the value itself; longer ones on the heap.
/// Decoding a map of short keys and values therefore allocates nothing for
/// the strings. Reading goes through `Deref<Target = str>`; build one from
/// `&str`, `String` or `Cow<str>` with `into()`, and get a `String` back
/// with [`Str::into_string`] or `String::from`.
///
/// ```
/// use checkpointer::serde::Str;
/// use checkpointer::Value;
/// let v = Value::Str("assistant".into());
/// assert_eq!(v.as_str(), Some("assistant"));
/// let s: Str = String::from("a longer string that lives on the heap").into();
/// assert!(s.starts_with("a longer"));
/// assert_eq!(s, "a longer string that lives on the heap");
/// ```
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Str(CompactString);

impl Str {
    /// An empty string (no allocation).
    pub const fn new() -> Self {
        Str(CompactString::const_new(""))
    }

    /// The string slice.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The string as a `String` (reusing the heap buffer where there is one).
    pub fn into_string(self) -> String {
        self.0.into_string()
    }
}

impl Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self.0.as_str()
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Self {
        Str(CompactString::from(s))
    }
}

impl From<&String> for Str {
    fn from(s: &String) -> Self {
        Str(CompactString::from(s.as_str()))
    }
}

impl From<String> for Str {
    fn from(s: String) -> Self {
        Str(CompactString::from(s))
    }
}

impl From<Cow<'_, str>> for Str {
    fn from(s: Cow<'_, str>) -> Self {
        Str(CompactString::from(s))
    }
}

impl From<Box<str>> for Str {
    fn from(s: Box<str>) -> Self {
        Str(CompactString::from(s))
    }
}

impl From<char> for Str {
    fn from(c: char) -> Self {
        Str(CompactString::from(c.encode_utf8(&mut [0; 4]) as &str))
    }
}

impl From<Str> for String {
    fn from(s: Str) -> Self {
        s.into_string()
    }
}

impl FromIterator<char> for Str {
    fn from_iter<I: IntoIterator<Item = char>>(iter: I) -> Self {
        Str(CompactString::from_iter(iter))
    }
}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        self.0.as_str() == other
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_str() == *other
    }
}

impl PartialEq<String> for Str {
    fn eq(&self, other: &String) -> bool {
        self.0.as_str() == other.as_str()
    }
}

impl PartialEq<Str> for str {
    fn eq(&self, other: &Str) -> bool {
        self == other.0.as_str()
    }
}

impl PartialEq<Str> for &str {
    fn eq(&self, other: &Str) -> bool {
        *self == other.0.as_str()
    }
}

impl PartialEq<Str> for String {
    fn eq(&self, other: &Str) -> bool {
        self.as_str() == other.0.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_are_inline_and_long_ones_round_trip() {
        let short = Str::from("content");
        assert!(!short.0.is_heap_allocated());
        assert_eq!(short, "content");
        let long = "x".repeat(200);
        let s = Str::from(long.clone());
        assert!(s.0.is_heap_allocated());
        assert_eq!(s.len(), 200);
        assert_eq!(s.clone().into_string(), long);
        assert_eq!(String::from(s), long);
        assert_eq!(format!("{:?}", Str::from("a\"b")), "\"a\\\"b\"");
        assert_eq!(Str::new(), "");
        assert_eq!(crate::Value::from(Str::from("k")), crate::Value::from("k"));
    }
}
