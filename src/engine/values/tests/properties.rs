//! Property tests: split channel values are stored as the decoded
//! checkpoint's, and spliced checkpoints are the encoding of the decoded one.

use bytes::Bytes;
use indexmap::IndexMap;
use proptest::collection::vec;
use proptest::prelude::*;

use super::super::{checkpoint_msgpack, Stored, Values};
use super::checkpoint_bytes;
use crate::checkpoint::{ChannelValues, Checkpoint, CheckpointMetadata};
use crate::engine::encoded::split;
use crate::serde::{msgpack, Ext, ExtKind, JsonPlusSerializer, NumpyOrder, Serializer, TypedBytes, Value};

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        (-200i64..200).prop_map(Value::Int),
        ((i64::MAX as u64 + 1)..=u64::MAX).prop_map(Value::UInt),
        any::<u64>().prop_map(|b| Value::Float(f64::from_bits(b))),
        any::<u32>().prop_map(|b| Value::F32(f32::from_bits(b))),
        ".{0,40}".prop_map(Value::from),
        vec(any::<u8>(), 0..300).prop_map(|b| Value::Bin(Bytes::from(b))),
        Just(Value::Map(Vec::new().into())),
        Just(Value::Array(Vec::new().into())),
        (any::<i8>(), vec(any::<u8>(), 0..24)).prop_map(|(c, b)| Value::from(Ext::raw(c, Bytes::from(b)))),
    ];
    leaf.prop_recursive(4, 96, 20, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..20).prop_map(|v| Value::Array(v.into())),
            vec((inner.clone(), inner.clone()), 0..18).prop_map(|v| Value::Map(v.into())),
            (
                (0i8..=5).prop_map(ExtKind::from_code),
                "[a-z_.]{0,12}",
                "[A-Za-z]{0,8}",
                inner.clone()
            )
                .prop_map(|(k, m, n, a)| Value::from(Ext::object(k, m, n, a).unwrap())),
            inner.clone().prop_map(Value::delta_snapshot),
            (any::<i8>(), inner.clone()).prop_map(|(c, v)| Value::from(Ext::from_decoded(c, v).unwrap())),
            (vec(0u64..70_000, 0..3), any::<bool>(), vec(any::<u8>(), 0..32)).prop_map(|(shape, f, data)| {
                let order = if f { NumpyOrder::F } else { NumpyOrder::C };
                Value::from(Ext::numpy("<i4", shape, order, Bytes::from(data)))
            }),
        ]
    })
}

/// msgpack Python never writes (a longer header than needed): decoding
/// and encoding it again gives other bytes.
fn non_canonical() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![0xcc, 0x05]),
        Just(vec![0xd0, 0x05]),
        Just(vec![0xd1, 0xff, 0xff]),
        Just(vec![0xd9, 0x01, b'a']),
        Just(vec![0xc5, 0x00, 0x01, 0x07]),
        Just(vec![0xdc, 0x00, 0x01, 0xcc, 0x01]),
        Just(vec![0x91, 0xcd, 0x00, 0x01]),
        Just(vec![0xde, 0x00, 0x01, 0xa1, b'k', 0x01]),
        Just(vec![0x81, 0xa1, b'k', 0xd9, 0x01, b'a']),
        Just(vec![0xc7, 0x01, 0x05, 0x01]),
        Just(vec![0xc7, 0x02, 0x05, 0xcc, 0x01]),
        Just(vec![0xd5, 0x05, 0xcc, 0x01]),
    ]
}

/// A channel value: what the encoder makes of a value, or hand-made bytes.
fn arb_channel() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => arb_value().prop_map(|v| msgpack::encode(&v).unwrap()),
        1 => non_canonical(),
    ]
}

/// The split of `bytes` stores what `put` stores of their decoding.
fn check_against_decoding(bytes: &Bytes, serde: &dyn Serializer) {
    let decoded = Checkpoint::from_value(&msgpack::decode(bytes).unwrap()).unwrap();
    let (skeleton, values) = split(bytes, &decoded.id, &CheckpointMetadata::default()).unwrap();
    // compared as bytes: a NaN among the extra fields is stored as it came,
    // though it is not equal to itself
    let want = Checkpoint {
        channel_values: ChannelValues::new(),
        ..decoded.clone()
    };
    assert_eq!(
        msgpack::encode(&skeleton.to_value(true)).unwrap(),
        msgpack::encode(&want.to_value(true)).unwrap()
    );
    let split_values = Values::Split(&values);
    let names: Vec<&String> = split_values.iter().map(|(k, _)| k).collect();
    assert_eq!(names, decoded.channel_values.keys().collect::<Vec<_>>());
    for (name, slot) in split_values.iter() {
        let value = &decoded.channel_values[name];
        let want = JsonPlusSerializer.dumps_typed(value).unwrap();
        let typed = slot.typed(serde).unwrap();
        match serde.unseal(&typed).unwrap() {
            // sealed: compare what was sealed
            Some(plain) => assert_eq!(plain, want, "channel {name:?}"),
            None => assert_eq!(typed, want, "channel {name:?}"),
        }
        assert_eq!(
            msgpack::encode(&slot.to_value().unwrap()).unwrap(),
            msgpack::encode(value).unwrap()
        );
        let snapshot = matches!(value, Value::Ext(e) if e.kind() == ExtKind::DeltaSnapshot);
        assert_eq!(slot.is_delta_snapshot(), snapshot, "channel {name:?}");
        if let Some(v) = slot.as_value() {
            assert_eq!(msgpack::encode(v).unwrap(), msgpack::encode(value).unwrap());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn split_values_store_as_decoded_ones(
        channels in vec(("[a-c]{1,2}", arb_channel()), 0..20),
        extra in proptest::option::of(arb_value()),
    ) {
        let bytes = checkpoint_bytes("1ef-id", &channels, extra.as_ref());
        check_against_decoding(&bytes, &JsonPlusSerializer);
        #[cfg(feature = "encryption")]
        {
            let cipher = crate::serde::AesEax::new(&[7; 16]).unwrap();
            let serde = crate::serde::EncryptedSerializer::new(JsonPlusSerializer, cipher);
            check_against_decoding(&bytes, &serde);
        }
    }
}

/// Splices `stored` (one payload per channel, as a store keeps them) into
/// the checkpoint `skeleton`; checks the bytes against encoding the decoded
/// values, and returns whether they were spliced.
fn check_splice(skeleton: &Checkpoint, stored: &[(String, TypedBytes)], serde: &dyn Serializer) -> bool {
    let values: Vec<(&str, Stored<'_>)> = stored
        .iter()
        .map(|(k, t)| {
            (
                k.as_str(),
                Stored::Typed {
                    tag: &t.tag,
                    data: &t.data,
                },
            )
        })
        .collect();
    let Some(got) = checkpoint_msgpack(serde, skeleton, &values).unwrap() else {
        return false;
    };
    let mut decoded = skeleton.clone();
    for (k, t) in stored {
        decoded
            .channel_values
            .insert(k.clone(), serde.loads_typed_bytes(&t.tag, &t.data).unwrap());
    }
    let want = JsonPlusSerializer.dumps_typed(&decoded.to_value(true)).unwrap();
    assert_eq!(got, want);
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn spliced_checkpoints_are_the_encoded_decoding(
        values in vec(("[a-z]{1,3}", arb_value()), 0..12),
        extra in proptest::option::of(arb_value()),
        raw in proptest::option::of(non_canonical()),
    ) {
        let mut skeleton = Checkpoint::new(3);
        skeleton.channel_versions.insert("a".into(), crate::ChannelVersion::Int(1));
        if let Some(extra) = extra {
            skeleton.extra.push(("future".into(), extra));
        }
        // one payload per channel name, as stores keep them
        let names: IndexMap<String, Value> = values.into_iter().collect();
        let mut stored: Vec<(String, TypedBytes)> = names
            .iter()
            .map(|(k, v)| (k.clone(), JsonPlusSerializer.dumps_typed(v).unwrap()))
            .collect();
        assert!(check_splice(&skeleton, &stored, &JsonPlusSerializer));
        #[cfg(feature = "encryption")]
        {
            let cipher = crate::serde::AesEax::new(&[7; 16]).unwrap();
            let serde = crate::serde::EncryptedSerializer::new(JsonPlusSerializer, cipher);
            let sealed: Vec<(String, TypedBytes)> =
                names.iter().map(|(k, v)| (k.clone(), serde.dumps_typed(v).unwrap())).collect();
            assert!(check_splice(&skeleton, &sealed, &serde));
        }
        if let Some(raw) = raw {
            // bytes Python does not write: spliced only where decoding and
            // encoding gives them back (an extension keeps its payload)
            let kept = raw.first() == Some(&0xd5);
            stored.push(("zz".into(), TypedBytes::new("msgpack", raw)));
            assert_eq!(check_splice(&skeleton, &stored, &JsonPlusSerializer), kept);
        }
    }
}
