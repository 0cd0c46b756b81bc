//! [`CkptId`]: a checkpoint id as the store's ordered indexes hold it.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// A checkpoint id: the string, and its 128-bit value when it is a canonical
/// UUID (36 characters, lowercase hex, hyphens at 8, 13, 18 and 23: what
/// LangGraph and this crate write). For those the numeric order is the
/// string order, so two UUID ids compare as two integers instead of by a
/// `memcmp` that runs deep (ids of one thread share their first 13–18
/// characters); any other id compares as its string. Either way the order is
/// the string's, which is what makes `Borrow<str>` lookups and ranges valid.
#[derive(Clone)]
pub(crate) struct CkptId {
    text: Arc<str>,
    value: Option<(u64, u64)>,
}

/// The value of a canonical lowercase UUID string.
fn uuid_value(s: &str) -> Option<(u64, u64)> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    // 16 hex digits each: 8-4-4 and 4-12
    let hi = hex(&b[0..8])? << 32 | hex(&b[9..13])? << 16 | hex(&b[14..18])?;
    let lo = hex(&b[19..23])? << 48 | hex(&b[24..36])?;
    Some((hi, lo))
}

/// The value of up to 16 lowercase hex digits.
fn hex(digits: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    let mut bad = 0u8;
    for &c in digits {
        let d = HEX[usize::from(c)];
        bad |= d;
        v = v << 4 | u64::from(d & 0x0f);
    }
    (bad & 0x80 == 0).then_some(v)
}

/// Lowercase hex digit values; 0x80 for every other byte.
const HEX: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

impl From<Arc<str>> for CkptId {
    fn from(text: Arc<str>) -> Self {
        let value = uuid_value(&text);
        CkptId { text, value }
    }
}

impl From<&str> for CkptId {
    fn from(s: &str) -> Self {
        CkptId::from(Arc::<str>::from(s))
    }
}

impl Deref for CkptId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl Borrow<str> for CkptId {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl PartialEq for CkptId {
    fn eq(&self, other: &Self) -> bool {
        match (self.value, other.value) {
            (Some(a), Some(b)) => a == b,
            _ => self.text == other.text,
        }
    }
}

impl Eq for CkptId {}

impl Ord for CkptId {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.value, other.value) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.text.cmp(&other.text),
        }
    }
}

impl PartialOrd for CkptId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for CkptId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // as `str` hashes, so `Borrow<str>` lookups agree
        (*self.text).hash(state);
    }
}

impl fmt::Debug for CkptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

impl fmt::Display for CkptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_the_strings_order() {
        let ids = [
            "",
            "1ef4f797-8335-6428-8001-8a1503f9b875",
            "1ef4f797-8335-6428-8001-8a1503f9b876",
            "1ef4f797-8335-6428-8002-000000000000",
            "1EF4F797-8335-6428-8001-8a1503f9b875",
            "1ef4f797-8335-6428-8001-8a1503f9b87",
            "1ef4f797-8335-6428-8001-8a1503f9b875x",
            "1ef4f797x8335-6428-8001-8a1503f9b875",
            "2",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            "00000000-0000-0000-0000-000000000000",
            "a",
        ];
        for a in ids {
            for b in ids {
                let (x, y) = (CkptId::from(a), CkptId::from(b));
                assert_eq!(x.cmp(&y), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(x == y, a == b, "{a:?} vs {b:?}");
            }
        }
        assert!(CkptId::from("1ef4f797-8335-6428-8001-8a1503f9b875").value.is_some());
        assert!(CkptId::from("1EF4F797-8335-6428-8001-8a1503f9b875").value.is_none());
    }
}
