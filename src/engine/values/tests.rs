//! Channel values split from a caller's bytes are stored as `put` stores the
//! decoded checkpoint: the same payload for every value, byte for byte.
//!
//! The property tests are in `properties` (proptest, which the
//! `conformance` feature brings: `cargo test --features conformance --lib`).

use bytes::Bytes;

use super::{Slot, Values};
use crate::checkpoint::{Checkpoint, CheckpointMetadata};
use crate::engine::encoded::split;
use crate::serde::{msgpack, Value};

#[cfg(feature = "conformance")]
mod properties;

/// A checkpoint's bytes with these channel values, in this order (names
/// may repeat).
fn checkpoint_bytes(id: &str, channels: &[(String, Vec<u8>)], extra: Option<&Value>) -> Bytes {
    let mut out = vec![0x80 | if extra.is_some() { 7 } else { 6 }];
    let mut put = |v: &Value| msgpack::encode_into(v, &mut out).unwrap();
    put(&"v".into());
    put(&Value::Int(4));
    put(&"ts".into());
    put(&"2024-01-01T00:00:00+00:00".into());
    put(&"id".into());
    put(&id.into());
    put(&"channel_versions".into());
    put(&Value::map(
        channels.iter().map(|(name, _)| (name.as_str(), Value::Int(1))),
    ));
    if let Some(extra) = extra {
        put(&"future_field".into());
        put(extra);
    }
    put(&"channel_values".into());
    let n = u16::try_from(channels.len()).unwrap();
    if n < 16 {
        out.push(0x80 | n as u8);
    } else {
        out.push(0xde);
        out.extend_from_slice(&n.to_be_bytes());
    }
    for (name, bytes) in channels {
        msgpack::encode_into(&name.as_str().into(), &mut out).unwrap();
        out.extend_from_slice(bytes);
    }
    msgpack::encode_into(&"updated_channels".into(), &mut out).unwrap();
    out.push(0xc0);
    Bytes::from(out)
}

#[test]
fn split_refuses_as_decoding_does() {
    let good = checkpoint_bytes("x", &[("a".into(), vec![0x91, 0x01])], None);
    for bad in [
        good.slice(..good.len() - 1),                                   // truncated
        Bytes::from([&good[..], &[0x00]].concat()),                     // trailing
        checkpoint_bytes("x", &[("a".into(), vec![0xc1])], None),       // reserved byte
        checkpoint_bytes("x", &[("a".into(), vec![0xa1, 0xff])], None), // not UTF-8
        checkpoint_bytes("x", &[("a".into(), [vec![0x91; 127], vec![0x01]].concat())], None), // too deep
    ] {
        let want = msgpack::decode(&bad).unwrap_err().to_string();
        let got = split(&bad, "x", &CheckpointMetadata::default())
            .unwrap_err()
            .to_string();
        assert_eq!(got, want);
    }
    // the deepest a channel value can nest and be read back is what `put`
    // stores: both take it
    let deep = checkpoint_bytes("x", &[("a".into(), [vec![0x91; 126], vec![0x01]].concat())], None);
    let (_, values) = split(&deep, "x", &CheckpointMetadata::default()).unwrap();
    let cp = Checkpoint::from_value(&msgpack::decode(&deep).unwrap()).unwrap();
    crate::limits::check_put(&cp, &CheckpointMetadata::default()).unwrap();
    assert!(matches!(Values::Split(&values).get("a"), Some(Slot::Msgpack(_))));
    // the wrong id
    assert!(split(&good, "y", &CheckpointMetadata::default()).is_err());
}

#[test]
fn only_canonical_lists_maps_extensions_and_binaries_stay_bytes() {
    let cases: [(&[u8], bool); 8] = [
        (&[0x91, 0x01], true),
        (&[0x80], true),
        (&[0xc4, 0x01, 0x07], true),
        (&[0xd4, 0x05, 0x01], true),
        (&[0xa1, b'a'], false),
        (&[0xc0], false),
        (&[0xdc, 0x00, 0x01, 0x01], false),
        (&[0xc7, 0x01, 0x05, 0x01], false),
    ];
    for (bytes, kept) in cases {
        let bytes = checkpoint_bytes("x", &[("a".into(), bytes.to_vec())], None);
        let (_, values) = split(&bytes, "x", &CheckpointMetadata::default()).unwrap();
        let slot = Values::Split(&values).get("a").unwrap();
        assert_eq!(matches!(slot, Slot::Msgpack(_)), kept, "{bytes:02x?}");
    }
}
