//! The JSON readers on arbitrary bytes (first byte: 0 = checkpoint metadata
//! as the SQL savers store it, else any JSON value as the legacy `json` tag
//! reads it): never panic; what they accept prints as Python's `json.dumps`
//! would and that text reads back to the same text.
#![no_main]

use checkpointer::serde::json::{from_json, to_python_json};
use checkpointer::CheckpointMetadata;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, text)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let Ok(meta) = CheckpointMetadata::from_json(text) else {
            return;
        };
        let Ok(out) = meta.to_python_json() else { return };
        let back = CheckpointMetadata::from_json(out.as_bytes()).expect("printed metadata reads back");
        assert_eq!(back.to_python_json().expect("prints again"), out);
    } else {
        let Ok(value) = from_json(text) else { return };
        let Ok(out) = to_python_json(&value) else { return };
        let back = from_json(out.as_bytes()).expect("printed JSON reads back");
        assert_eq!(to_python_json(&back).expect("prints again"), out);
    }
});
