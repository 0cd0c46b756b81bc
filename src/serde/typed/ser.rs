//! The serializer: `T: Serialize` to a [`Value`].

use std::fmt;

use ::serde::ser::{self, Serialize};
use bytes::Bytes;

use super::error::{BResult, BridgeError, Seg};
use super::level::Level;
use super::value_impls::{int128, uint128, Capture, CAPTURE};
use super::{EXT_TOKEN, F32_TOKEN};
use crate::error::Error;
use crate::serde::value::Value;

/// Builds the [`Value`] found at `level`.
pub(super) struct ValueSerializer {
    level: Level,
}

impl ValueSerializer {
    pub(super) fn top() -> Self {
        ValueSerializer { level: Level::TOP }
    }

    /// The serializer of a value wrapped in this one (`Some`, a newtype).
    fn wrapped(self) -> BResult<ValueSerializer> {
        Ok(ValueSerializer {
            level: self.level.wrapped()?,
        })
    }
}

/// Resets the capture slot however the serialization inside it ends.
struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURE.with(|c| *c.borrow_mut() = Capture::Idle);
    }
}

/// Integer types every value of which is a [`Value::Int`].
macro_rules! ints_in_i64 {
    ($($method:ident: $int:ty),*) => {$(
        fn $method(self, v: $int) -> BResult<Value> {
            Ok(Value::Int(v.into()))
        }
    )*};
}

impl ser::Serializer for ValueSerializer {
    type Ok = Value;
    type Error = BridgeError;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = VariantBuilder<SeqBuilder>;
    type SerializeMap = MapBuilder;
    type SerializeStruct = MapBuilder;
    type SerializeStructVariant = VariantBuilder<MapBuilder>;

    fn serialize_bool(self, v: bool) -> BResult<Value> {
        Ok(Value::Bool(v))
    }

    ints_in_i64!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32
    );

    fn serialize_i128(self, v: i128) -> BResult<Value> {
        int128(v).map_err(|e| BridgeError::new(reason(e)))
    }

    fn serialize_u64(self, v: u64) -> BResult<Value> {
        Ok(Value::from(v))
    }

    fn serialize_u128(self, v: u128) -> BResult<Value> {
        uint128(v).map_err(|e| BridgeError::new(reason(e)))
    }

    fn serialize_f32(self, v: f32) -> BResult<Value> {
        Ok(Value::Float(v.into()))
    }

    fn serialize_f64(self, v: f64) -> BResult<Value> {
        Ok(Value::Float(v))
    }

    fn serialize_char(self, v: char) -> BResult<Value> {
        Ok(Value::Str(v.into()))
    }

    fn serialize_str(self, v: &str) -> BResult<Value> {
        Ok(Value::Str(v.into()))
    }

    fn serialize_bytes(self, v: &[u8]) -> BResult<Value> {
        Ok(Value::Bin(Bytes::copy_from_slice(v)))
    }

    fn serialize_none(self) -> BResult<Value> {
        Ok(Value::Nil)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> BResult<Value> {
        value.serialize(self.wrapped()?)
    }

    fn serialize_unit(self) -> BResult<Value> {
        Ok(Value::Nil)
    }

    fn serialize_unit_struct(self, _name: &'static str) -> BResult<Value> {
        Ok(Value::Nil)
    }

    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> BResult<Value> {
        Ok(Value::Str(variant.into()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> BResult<Value> {
        match name {
            EXT_TOKEN => {
                let _guard = CaptureGuard;
                CAPTURE.with(|c| *c.borrow_mut() = Capture::Requested);
                value.serialize(ValueSerializer { level: self.level })?;
                match CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), Capture::Idle)) {
                    Capture::Filled(ext) => Ok(Value::Ext(Box::new(ext))),
                    _ => Err(BridgeError::new(format!("the newtype name {EXT_TOKEN:?} is reserved"))),
                }
            }
            F32_TOKEN => match value.serialize(ValueSerializer { level: self.level })? {
                // Exact: the f64 was widened from this f32 just now.
                Value::Float(f) => Ok(Value::F32(f as f32)),
                _ => Err(BridgeError::new(format!("the newtype name {F32_TOKEN:?} is reserved"))),
            },
            _ => value.serialize(self.wrapped()?),
        }
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> BResult<Value> {
        let level = self.level.container()?;
        let inner = value
            .serialize(ValueSerializer { level })
            .map_err(|e| e.at_field(variant))?;
        Ok(variant_map(variant, inner))
    }

    fn serialize_seq(self, len: Option<usize>) -> BResult<SeqBuilder> {
        SeqBuilder::new(len, self.level)
    }

    fn serialize_tuple(self, len: usize) -> BResult<SeqBuilder> {
        SeqBuilder::new(Some(len), self.level)
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> BResult<SeqBuilder> {
        SeqBuilder::new(Some(len), self.level)
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> BResult<VariantBuilder<SeqBuilder>> {
        // `{variant: [..]}`: the list sits inside a map.
        Ok(VariantBuilder {
            variant,
            inner: SeqBuilder::new(Some(len), self.level.container()?)?,
        })
    }

    fn serialize_map(self, len: Option<usize>) -> BResult<MapBuilder> {
        MapBuilder::new(len, self.level)
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> BResult<MapBuilder> {
        MapBuilder::new(Some(len), self.level)
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> BResult<VariantBuilder<MapBuilder>> {
        Ok(VariantBuilder {
            variant,
            inner: MapBuilder::new(Some(len), self.level.container()?)?,
        })
    }

    fn collect_str<T: fmt::Display + ?Sized>(self, value: &T) -> BResult<Value> {
        Ok(Value::Str(value.to_string().into()))
    }
}

fn reason(e: Error) -> String {
    match e {
        Error::Serde { reason } => reason,
        other => other.to_string(),
    }
}

pub(super) struct SeqBuilder {
    items: Vec<Value>,
    /// The level of the elements.
    level: Level,
}

impl SeqBuilder {
    /// A list found at `level`.
    fn new(len: Option<usize>, level: Level) -> BResult<Self> {
        Ok(SeqBuilder {
            items: Vec::with_capacity(len.unwrap_or(0).min(4096)),
            level: level.container()?,
        })
    }

    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let index = self.items.len();
        let v = value
            .serialize(ValueSerializer { level: self.level })
            .map_err(|e| e.at(Seg::Index(index)))?;
        self.items.push(v);
        Ok(())
    }

    fn finish(self) -> Value {
        Value::Array(self.items.into())
    }
}

/// Sequences, tuples and tuple structs all build a list.
macro_rules! list_builder {
    ($($serialize:ident::$element:ident),*) => {$(
        impl ser::$serialize for SeqBuilder {
            type Ok = Value;
            type Error = BridgeError;

            fn $element<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
                self.push(value)
            }

            fn end(self) -> BResult<Value> {
                Ok(self.finish())
            }
        }
    )*};
}

list_builder!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

pub(super) struct MapBuilder {
    entries: Vec<(Value, Value)>,
    key: Option<Value>,
    /// The level of the keys and values.
    level: Level,
}

impl MapBuilder {
    /// A map found at `level`.
    fn new(len: Option<usize>, level: Level) -> BResult<Self> {
        Ok(MapBuilder {
            entries: Vec::with_capacity(len.unwrap_or(0).min(4096)),
            key: None,
            level: level.container()?,
        })
    }

    fn field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> BResult<()> {
        let v = value
            .serialize(ValueSerializer { level: self.level })
            .map_err(|e| e.at_field(name))?;
        self.entries.push((Value::Str(name.into()), v));
        Ok(())
    }

    fn finish(self) -> Value {
        Value::Map(self.entries.into())
    }
}

impl ser::SerializeMap for MapBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> BResult<()> {
        self.key = Some(key.serialize(ValueSerializer { level: self.level })?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let key = self
            .key
            .take()
            .ok_or_else(|| BridgeError::new("map value serialized before its key"))?;
        let v = value
            .serialize(ValueSerializer { level: self.level })
            .map_err(|e| e.at_key(&key))?;
        self.entries.push((key, v));
        Ok(())
    }

    fn end(self) -> BResult<Value> {
        Ok(self.finish())
    }
}

impl ser::SerializeStruct for MapBuilder {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> BResult<()> {
        self.field(name, value)
    }

    fn end(self) -> BResult<Value> {
        Ok(self.finish())
    }
}

/// A tuple or struct variant: `{variant: [..]}` / `{variant: {..}}`.
pub(super) struct VariantBuilder<B> {
    variant: &'static str,
    inner: B,
}

/// An externally tagged variant: `{variant: inner}`.
fn variant_map(variant: &'static str, inner: Value) -> Value {
    Value::Map(vec![(Value::Str(variant.into()), inner)].into())
}

impl ser::SerializeTupleVariant for VariantBuilder<SeqBuilder> {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> BResult<()> {
        let variant = self.variant;
        self.inner.push(value).map_err(|e| e.at_field(variant))
    }

    fn end(self) -> BResult<Value> {
        Ok(variant_map(self.variant, self.inner.finish()))
    }
}

impl ser::SerializeStructVariant for VariantBuilder<MapBuilder> {
    type Ok = Value;
    type Error = BridgeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> BResult<()> {
        let variant = self.variant;
        self.inner.field(name, value).map_err(|e| e.at_field(variant))
    }

    fn end(self) -> BResult<Value> {
        Ok(variant_map(self.variant, self.inner.finish()))
    }
}
