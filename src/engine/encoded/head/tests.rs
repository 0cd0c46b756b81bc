//! `checkpoint_id` answers as decoding the bytes and reading them with
//! `Checkpoint::from_value` answers: the same id or the same error.

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;

use super::checkpoint_id;
use crate::checkpoint::Checkpoint;
use crate::error::Error;
use crate::serde::{msgpack, Ext, Value};

/// What decoding and `from_value` make of `bytes`: the id, or the error
/// (a malformed payload's as `unstorable` words it).
fn decoded(bytes: &[u8]) -> Result<String, String> {
    let value = msgpack::decode(bytes).map_err(|e| unstorable(e).to_string())?;
    Checkpoint::from_value(&value).map(|c| c.id).map_err(|e| e.to_string())
}

fn unstorable(e: Error) -> Error {
    Error::serde(format!("the checkpoint cannot be stored: {e}"))
}

fn scanned(bytes: &[u8]) -> Result<String, String> {
    checkpoint_id(bytes, unstorable)
        .map(str::to_owned)
        .map_err(|e| e.to_string())
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..6).prop_map(Value::Int),
        any::<i64>().prop_map(Value::Int),
        ((i64::MAX as u64 + 1)..=u64::MAX).prop_map(Value::UInt),
        any::<f64>().prop_map(Value::Float),
        any::<f32>().prop_map(Value::F32),
        "[a-z]{0,3}".prop_map(Value::from),
        ".{20,40}".prop_map(Value::from),
        vec(any::<u8>(), 0..4).prop_map(|b| Value::Bin(Bytes::from(b))),
        (0i8..9, vec(any::<u8>(), 0..4)).prop_map(|(c, b)| Value::from(Ext::raw(c, Bytes::from(b)))),
    ]
}

/// Values of every shape a checkpoint field is checked for, nested.
fn field() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 40, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(|v| Value::Array(v.into())),
            vec(("[a-z]{0,2}".prop_map(Value::from), inner.clone()), 0..6).prop_map(|v| Value::Map(v.into())),
            vec((inner.clone(), inner.clone()), 0..4).prop_map(|v| Value::Map(v.into())),
        ]
    })
}

fn key() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => prop::sample::select(vec![
            "v", "id", "ts", "channel_values", "channel_versions", "versions_seen",
            "updated_channels", "pending_sends", "other",
        ])
        .prop_map(Value::from),
        1 => leaf(),
    ]
}

/// A well-formed checkpoint's map, with some fields taken out, replaced by
/// any value or given twice.
fn checkpoint_map() -> impl Strategy<Value = Value> {
    let cp = Checkpoint::new(3).to_value(true);
    let base: Vec<(Value, Value)> = cp.as_map().map(<[_]>::to_vec).unwrap_or_default();
    (
        Just(base),
        vec(any::<prop::sample::Index>(), 0..3),
        vec((key(), field()), 0..4),
    )
        .prop_map(|(mut entries, drop, extra)| {
            for i in drop {
                if !entries.is_empty() {
                    entries.remove(i.index(entries.len()));
                }
            }
            entries.extend(extra);
            Value::Map(entries.into())
        })
}

proptest! {
    #[test]
    fn answers_as_decoding_and_from_value(value in prop_oneof![checkpoint_map(), field()]) {
        let bytes = msgpack::encode(&value).unwrap();
        prop_assert_eq!(scanned(&bytes), decoded(&bytes));
    }

    #[test]
    fn malformed_bytes_answer_as_decoding(value in checkpoint_map(), cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = msgpack::encode(&value).unwrap();
        let at = cut.index(bytes.len());
        let mut truncated = bytes.clone();
        truncated.truncate(at);
        prop_assert_eq!(scanned(&truncated), decoded(&truncated));
        bytes[at] = byte;
        prop_assert_eq!(scanned(&bytes), decoded(&bytes));
        bytes.push(0);
        prop_assert_eq!(scanned(&bytes), decoded(&bytes));
    }
}

#[test]
fn a_well_formed_checkpoint_gives_its_id() {
    let cp = Checkpoint::new(1);
    let bytes = msgpack::encode(&cp.to_value(true)).unwrap();
    assert_eq!(checkpoint_id(&bytes, unstorable).unwrap(), cp.id);
}

#[test]
fn too_deep_a_value_is_unstorable() {
    let mut cp = Checkpoint::new(1);
    cp.channel_values.insert("deep".to_owned(), Value::Nil);
    let plain = msgpack::encode(&cp.to_value(true)).unwrap();
    let at = plain.windows(6).position(|w| w == b"\xa4deep\xc0").unwrap() + 5;
    // a channel value sits two levels down: MAX_DEPTH - 2 lists hold, one more does not
    for (lists, refused) in [(msgpack::MAX_DEPTH - 2, false), (msgpack::MAX_DEPTH - 1, true)] {
        let mut bytes = plain[..at].to_vec();
        bytes.extend(std::iter::repeat_n(0x91, lists));
        bytes.extend_from_slice(&plain[at..]);
        let got = scanned(&bytes);
        assert_eq!(got, decoded(&bytes));
        assert_eq!(got.is_err(), refused, "{lists} lists: {got:?}");
        if refused {
            assert!(got.unwrap_err().contains("the checkpoint cannot be stored"));
        }
    }
}
