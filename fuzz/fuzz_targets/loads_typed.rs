//! `JsonPlusSerializer::loads_typed` for every tag (the first byte picks the
//! tag, the rest is the payload): never panics; a value it reads writes back
//! and reads again to the same bytes.
#![no_main]

use checkpointer::serde::{JsonPlusSerializer, Serializer};
use libfuzzer_sys::fuzz_target;

const TAGS: [&str; 10] = [
    "msgpack",
    "json",
    "null",
    "bytes",
    "bytearray",
    "empty",
    "pickle",
    "msgpack+aes",
    "",
    "MSGPACK",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    let tag = TAGS[usize::from(pick) % TAGS.len()];
    let serde = JsonPlusSerializer;
    let Ok(value) = serde.loads_typed(tag, payload) else {
        return;
    };
    let typed = serde.dumps_typed(&value).expect("a read value writes");
    let back = serde
        .loads_typed(&typed.tag, &typed.data)
        .expect("a written value reads");
    let again = serde.dumps_typed(&back).expect("write again");
    assert_eq!(again, typed, "{tag}: write, read, write differs");
});
