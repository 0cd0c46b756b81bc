//! The msgpack decoder on arbitrary bytes: never panics, and whatever it
//! accepts re-encodes canonically: `encode(decode(encode(decode(b))))` equals
//! `encode(decode(b))` byte for byte.
#![no_main]

use checkpointer::serde::msgpack;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = msgpack::decode(data) else { return };
    let encoded = msgpack::encode(&value).expect("a decoded value encodes");
    let again = msgpack::decode(&encoded).expect("a canonical encoding decodes");
    assert_eq!(
        msgpack::encode(&again).expect("re-encode"),
        encoded,
        "encoding is not canonical"
    );
});
