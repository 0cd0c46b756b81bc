//! The msgpack decoder on arbitrary bytes: never panics, and whatever it
//! accepts re-encodes canonically: `encode(decode(encode(decode(b))))` equals
//! `encode(decode(b))` byte for byte; and the zero-copy `decode_bytes` reads
//! the same bytes as `decode` (the same encoding, or both refuse).
#![no_main]

use checkpointer::serde::msgpack;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let shared = msgpack::decode_bytes(&bytes::Bytes::copy_from_slice(data));
    let Ok(value) = msgpack::decode(data) else {
        assert!(shared.is_err(), "decode_bytes accepts what decode refuses");
        return;
    };
    let shared = shared.expect("decode_bytes refuses what decode accepts");
    let encoded = msgpack::encode(&value).expect("a decoded value encodes");
    assert_eq!(
        msgpack::encode(&shared).expect("a decoded value encodes"),
        encoded,
        "decode_bytes and decode differ"
    );
    let again = msgpack::decode(&encoded).expect("a canonical encoding decodes");
    assert_eq!(
        msgpack::encode(&again).expect("re-encode"),
        encoded,
        "encoding is not canonical"
    );
});
