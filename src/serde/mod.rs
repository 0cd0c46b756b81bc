//! Values and their encodings: msgpack as LangGraph writes it, the typed
//! bridge to Rust types, and the [`Serializer`] trait with its type tags.
//!
//! Decoding never executes anything: LangGraph's extension values (Python
//! objects) decode to [`Ext`] data whose module, class name and arguments can
//! be read, and encode back to the same bytes.

#[cfg(feature = "encryption")]
pub mod encrypted;
pub mod json;
mod msgpack_codec;
mod pyfloat;
#[cfg(feature = "render")]
pub mod render;
mod serializer;
mod str;
mod typed;
mod value;

pub mod py;

pub mod msgpack {
    //! Lossless msgpack encoding and bounded decoding of [`Value`](super::Value).
    pub(crate) use super::msgpack_codec::{
        bin_header, deeper, is_canonical, len32, map_header, split_checkpoint, str_header, ValueBytes,
    };
    /// msgpack looked at without decoding it.
    pub(crate) mod peek {
        pub(crate) use super::super::msgpack_codec::peek::{
            elements, header, map_entries, pairs, peek, text, text_bytes, Payload, Peek,
        };
    }
    pub use super::msgpack_codec::{
        decode, decode_bytes, decode_bytes_with, decode_with, encode, encode_into, validate, DecodeLimits, MAX_DEPTH,
    };
}

#[cfg(feature = "encryption")]
pub use encrypted::{AesEax, EncryptedSerializer};
pub(crate) use msgpack_codec::payload_too_deep as msgpack_payload_too_deep;
pub use pyfloat::py_float_repr;
pub use serializer::{JsonPlusSerializer, Serializer, TypedBytes};
pub use str::Str;
pub use typed::{from_value, from_value_ref, to_value};
pub(crate) use value::size_memo;
pub use value::{Ext, ExtKind, ExtPayload, NumpyOrder, NumpyView, SharedVec, Value};
