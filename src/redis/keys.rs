//! Key names and the framing of stored records (`docs/design.md`, *Redis
//! layout*).
//!
//! Every key of a thread starts with `<prefix>:v2:{<tag>}`: the hash tag
//! is the escaped thread id (`%` for the empty id), so on a Redis Cluster
//! all of a thread's keys live in one slot and a script touching them is
//! atomic.

use crate::error::{Error, Result};
use crate::serde::TypedBytes;

/// The layout version in every key and in the marker.
pub(crate) const LAYOUT: &str = "v2";

/// What the marker key holds.
pub(crate) const MARKER: &str = "checkpointer-redis-layout 2";

/// Percent-escapes everything but `[A-Za-z0-9._-]`: the result holds no
/// `{`, `}`, `:` or `%` of its own, so it is safe inside a hash tag and as a
/// key component followed by `:`.
pub(crate) fn escape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The hash tag of a thread: its escaped id, never empty. The empty id
/// is `%`, which no escaped id is (an escaped `%` is `%25`): `{}` would be
/// no hash tag, and the keys of the thread would fall in different slots.
pub(crate) fn tag(thread_id: &str) -> String {
    if thread_id.is_empty() {
        "%".to_owned()
    } else {
        escape(thread_id)
    }
}

/// The inverse of [`escape`].
pub(crate) fn unescape(escaped: &str) -> Result<String> {
    let bytes = escaped.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = escaped
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Error::serde("malformed escaped key component in Redis"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Error::serde("escaped key component in Redis is not UTF-8"))
}

/// The key names of one saver (one prefix).
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    pub(crate) prefix: String,
}

impl Keys {
    /// `<prefix>:v2:{<tag>}`: the base of every key of the thread (the
    /// scripts append `:ns`, `:all`, `:ids`, ...: `queries::THREAD_KEYS`).
    pub(crate) fn thread(&self, thread_id: &str) -> String {
        format!("{}:{LAYOUT}:{{{}}}", self.prefix, tag(thread_id))
    }

    /// The base the empty thread id had before it got a tag of its own
    /// (`{}` is no hash tag: on a cluster its keys fell in several slots).
    pub(crate) fn untagged_empty_thread(&self) -> String {
        format!("{}:{LAYOUT}:{{}}", self.prefix)
    }

    /// The layout marker.
    pub(crate) fn marker(&self) -> String {
        format!("{}:layout", self.prefix)
    }

    /// The global ZSET of thread ids. Both global indexes share the hash
    /// tag `{#index}` (no escaped thread id holds `#`), so on a cluster
    /// they are one slot and one pipeline updates them.
    pub(crate) fn threads(&self) -> String {
        self.global("threads")
    }

    /// The global ZSET of `id \0 thread \0 ns`.
    pub(crate) fn checkpoints(&self) -> String {
        self.global("checkpoints")
    }

    /// The global HASH thread → generation, bumped by every index update
    /// of the thread: a sweep removes a thread's entries only if no write
    /// came since it looked.
    pub(crate) fn gens(&self) -> String {
        self.global("gen")
    }

    /// The global ZSET of threads written with a TTL, scored by their
    /// deadline (ms since the epoch) as the index last saw it.
    pub(crate) fn expiry(&self) -> String {
        self.global("expiry")
    }

    /// A global index `name`, under the hash tag the global indexes share.
    fn global(&self, name: &str) -> String {
        format!("{}:{LAYOUT}:{{#index}}:{name}", self.prefix)
    }

    /// The SET of a TTL thread's members of the checkpoint index, so a
    /// sweep can remove them once the thread has expired.
    pub(crate) fn members(&self, thread_id: &str) -> String {
        format!("{}:{LAYOUT}:{{#index}}:tm:{}", self.prefix, escape(thread_id))
    }
}

/// The member of the global checkpoint index.
pub(crate) fn global_member(thread: &str, ns: &str, id: &str) -> Vec<u8> {
    format!("{id}\0{thread}\0{ns}").into_bytes()
}

/// The member of the global checkpoint index of `thread`'s own member
/// `local` (`id \0 ns`, as `:all` holds it).
pub(crate) fn global_of_local(thread: &str, local: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(local);
    let (id, ns) = text.split_once('\0').unwrap_or((&text, ""));
    global_member(thread, ns, id)
}

/// Splits a global index member into (thread, ns, id).
pub(crate) fn split_global(member: &[u8]) -> Result<(String, String, String)> {
    let text = std::str::from_utf8(member).map_err(|_| Error::serde("checkpoint index member is not UTF-8"))?;
    let mut parts = text.splitn(3, '\0');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(id), Some(thread), Some(ns)) => Ok((thread.to_owned(), ns.to_owned(), id.to_owned())),
        _ => Err(Error::serde("malformed checkpoint index member")),
    }
}

/// The blob field of (channel, version): `<escaped channel>:<version>`.
pub(crate) fn blob_field(channel: &str, version: &str) -> String {
    format!("{}:{version}", escape(channel))
}

/// The channel of a blob field.
pub(crate) fn field_channel(field: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(field).map_err(|_| Error::serde("blob field is not UTF-8"))?;
    let ch = text.split(':').next().unwrap_or_default();
    unescape(ch)
}

/// The write field of (task, idx): `<escaped task>:<idx>`.
pub(crate) fn write_field(task_id: &str, idx: i64) -> String {
    format!("{}:{idx}", escape(task_id))
}

pub(super) fn has_nul(parts: &[&str]) -> bool {
    parts.iter().any(|p| p.contains('\0'))
}

pub(super) fn refuse_nul(text: &str, what: &str) -> Result<()> {
    if text.contains('\0') {
        return Err(Error::invalid(format!(
            "RedisSaver cannot store a {what} holding U+0000"
        )));
    }
    Ok(())
}

pub(super) fn excl(bound: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bound.len() + 1);
    out.push(b'(');
    out.extend_from_slice(bound);
    out
}

pub(super) fn incl(bound: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bound.len() + 1);
    out.push(b'[');
    out.extend_from_slice(bound);
    out
}

/// A stored write's value: its task id, task path, channel, tag and bytes,
/// [`pack`]ed.
pub(crate) fn pack_write(task_id: &str, task_path: &str, channel: &str, value: &TypedBytes) -> Vec<u8> {
    pack(&[
        task_id.as_bytes(),
        task_path.as_bytes(),
        channel.as_bytes(),
        value.tag.as_bytes(),
        &value.data,
    ])
}

/// `<name> key start end LIMIT 0 count`: at most `count` members of a
/// sorted set by `ZRANGEBYLEX` (`start` the lower bound) or
/// `ZREVRANGEBYLEX` (`start` the upper one).
pub(crate) fn lex_range(name: &str, key: String, start: Vec<u8>, end: &str, count: usize) -> redis::Cmd {
    let mut cmd = redis::cmd(name);
    cmd.arg(key).arg(start).arg(end).arg("LIMIT").arg(0).arg(count);
    cmd
}

/// Frames parts as (u32 big-endian length, bytes) each.
pub(crate) fn pack(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for p in parts {
        let len = u32::try_from(p.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// The parts of a [`pack`]ed record; exactly `n` of them.
pub(crate) fn unpack(mut data: &[u8], n: usize) -> Result<Vec<&[u8]>> {
    let bad = || Error::serde("malformed record in Redis");
    let mut out = Vec::with_capacity(n);
    while !data.is_empty() {
        let len = data.get(..4).ok_or_else(bad)?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let part = data.get(4..4 + len).ok_or_else(bad)?;
        out.push(part);
        data = &data[4 + len..];
    }
    if out.len() != n {
        return Err(bad());
    }
    Ok(out)
}

/// The part of a record as text.
pub(crate) fn text(part: &[u8], what: &str) -> Result<String> {
    String::from_utf8(part.to_vec()).map_err(|_| Error::serde(format!("{what} in Redis is not UTF-8")))
}

/// CRC16 (XMODEM) of a key's hash tag modulo 16384: the cluster slot.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(0) | None => key,
            Some(len) => &key[open + 1..open + 1 + len],
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &b in tagged {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_and_hides_braces() {
        for raw in ["", "t-1", "a{b}c", "}{", "x:y%z", "ünï\u{0}", "{}"] {
            let e = escape(raw);
            assert!(!e.contains(['{', '}', ':']), "{e}");
            assert_eq!(unescape(&e).unwrap(), raw);
        }
    }

    #[test]
    fn pack_round_trips() {
        let packed = pack(&[b"a", b"", b"xyz"]);
        assert_eq!(unpack(&packed, 3).unwrap(), [&b"a"[..], b"", b"xyz"]);
        assert!(unpack(&packed, 2).is_err());
        assert!(unpack(&packed[..6], 2).is_err());
    }

    #[test]
    fn slot_uses_the_hash_tag() {
        // the values Redis' CLUSTER KEYSLOT gives
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo{123456789}bar"), 12739);
        assert_eq!(key_slot(b"{}x"), key_slot(b"{}x"));
        let keys = Keys { prefix: "ckpt".into() };
        for thread in ["a{b}c", "", "%", "}", "{"] {
            let base = keys.thread(thread);
            assert_eq!(
                key_slot(base.as_bytes()),
                key_slot(format!("{base}:ns").as_bytes()),
                "{thread:?}"
            );
            assert_eq!(
                key_slot(base.as_bytes()),
                key_slot(format!("{base}:s:x:w").as_bytes()),
                "{thread:?}"
            );
        }
        // every id has a tag of its own: the empty one too
        assert_ne!(tag(""), tag("%"));
        assert!(!tag("").is_empty());
        assert_eq!(
            key_slot(keys.threads().as_bytes()),
            key_slot(keys.checkpoints().as_bytes())
        );
    }
}
