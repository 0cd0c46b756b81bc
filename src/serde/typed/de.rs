//! The deserializer: a [`Value`] to `T: Deserialize`.

use ::serde::de::{
    self, value::SeqDeserializer, DeserializeSeed, EnumAccess, Expected, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use ::serde::{forward_to_deserialize_any, Deserializer};

use super::error::{BResult, BridgeError, Seg};
use super::level::Level;
use crate::serde::value::{ExtPayload, Value};

/// A value to read from, owned (moved out) or borrowed for `'de`.
pub(super) enum Node<'de> {
    Owned(Value),
    Borrowed(&'de Value),
}

impl Node<'_> {
    fn value(&self) -> &Value {
        match self {
            Node::Owned(v) => v,
            Node::Borrowed(v) => v,
        }
    }
}

/// Reads the value `node`, found at `level`.
pub(super) struct De<'de> {
    node: Node<'de>,
    level: Level,
}

impl<'de> De<'de> {
    pub(super) fn top(node: Node<'de>) -> Self {
        De {
            node,
            level: Level::TOP,
        }
    }

    fn value(&self) -> &Value {
        self.node.value()
    }

    fn invalid(&self, exp: &dyn Expected) -> BridgeError {
        de::Error::invalid_type(unexpected(self.value()), exp)
    }

    /// The level inside this value, when it is an array, a map or an
    /// extension (checked before anything is moved out of it).
    fn inner_level(&self) -> BResult<Level> {
        match self.value() {
            Value::Array(_) | Value::Map(_) | Value::Ext(_) => self.level.container(),
            _ => Ok(self.level),
        }
    }

    /// This value read again by a wrapping type (`Option`, a newtype).
    fn wrapped(self) -> BResult<Self> {
        Ok(De {
            node: self.node,
            level: self.level.wrapped()?,
        })
    }

    fn visit<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let level = self.inner_level()?;
        match self.node {
            Node::Owned(v) => match v {
                Value::Str(s) => visitor.visit_string(s.into_string()),
                Value::Bin(b) => visitor.visit_byte_buf(Vec::from(b)),
                Value::Array(items) => visit_seq(Items::Owned(items.into_iter()), level, visitor),
                Value::Map(entries) => visit_map(Entries::Owned(entries.into_iter()), level, visitor),
                Value::Ext(ext) => {
                    let (code, payload) = ext.into_parts();
                    visitor.visit_newtype_struct(ExtSeq::new(code, PayloadNode::Owned(payload), level))
                }
                scalar => visit_scalar(&scalar, visitor),
            },
            Node::Borrowed(v) => match v {
                Value::Str(s) => visitor.visit_borrowed_str(s),
                Value::Bin(b) => visitor.visit_borrowed_bytes(b),
                Value::Array(items) => visit_seq(Items::Borrowed(items.iter()), level, visitor),
                Value::Map(entries) => visit_map(Entries::Borrowed(entries.iter()), level, visitor),
                Value::Ext(ext) => {
                    visitor.visit_newtype_struct(ExtSeq::new(ext.code, PayloadNode::Borrowed(&ext.payload), level))
                }
                scalar => visit_scalar(scalar, visitor),
            },
        }
    }

    fn integer<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let float = match *self.value() {
            Value::Int(i) => return visitor.visit_i64(i),
            Value::UInt(u) => return visitor.visit_u64(u),
            Value::Float(f) => f,
            Value::F32(f) => f64::from(f),
            _ => return Err(self.invalid(&visitor)),
        };
        match exact_int(float) {
            Some(Value::Int(i)) => visitor.visit_i64(i),
            Some(Value::UInt(u)) => visitor.visit_u64(u),
            _ => Err(de::Error::invalid_value(Unexpected::Float(float), &visitor)),
        }
    }

    fn float<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        match *self.value() {
            Value::Float(f) => visitor.visit_f64(f),
            Value::F32(f) => visitor.visit_f32(f),
            Value::Int(i) if (i as f64) as i128 == i128::from(i) => visitor.visit_f64(i as f64),
            Value::UInt(u) if (u as f64) as u128 == u128::from(u) => visitor.visit_f64(u as f64),
            Value::Int(i) => Err(de::Error::invalid_value(
                Unexpected::Signed(i),
                &"an integer a float holds exactly",
            )),
            Value::UInt(u) => Err(de::Error::invalid_value(
                Unexpected::Unsigned(u),
                &"an integer a float holds exactly",
            )),
            _ => Err(self.invalid(&visitor)),
        }
    }
}

/// The integer a float holds exactly, if it is in msgpack's integer range.
fn exact_int(f: f64) -> Option<Value> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    if !f.is_finite() || f.fract() != 0.0 {
        None
    } else if (-TWO_63..TWO_63).contains(&f) {
        Some(Value::Int(f as i64))
    } else if (0.0..TWO_64).contains(&f) {
        Some(Value::UInt(f as u64))
    } else {
        None
    }
}

fn visit_scalar<'de, V: Visitor<'de>>(v: &Value, visitor: V) -> BResult<V::Value> {
    match *v {
        Value::Nil => visitor.visit_unit(),
        Value::Bool(b) => visitor.visit_bool(b),
        Value::Int(i) => visitor.visit_i64(i),
        Value::UInt(u) => visitor.visit_u64(u),
        Value::F32(f) => visitor.visit_f32(f),
        Value::Float(f) => visitor.visit_f64(f),
        _ => Err(de::Error::invalid_type(unexpected(v), &visitor)),
    }
}

fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Nil => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Int(i) => Unexpected::Signed(*i),
        Value::UInt(u) => Unexpected::Unsigned(*u),
        Value::F32(f) => Unexpected::Float(f64::from(*f)),
        Value::Float(f) => Unexpected::Float(*f),
        Value::Str(s) => Unexpected::Str(s),
        Value::Bin(b) => Unexpected::Bytes(b),
        Value::Array(_) => Unexpected::Seq,
        Value::Map(_) => Unexpected::Map,
        Value::Ext(_) => Unexpected::Other("a Python object (msgpack extension)"),
    }
}

/// A bin read as a sequence of bytes.
fn visit_byte_seq<'de, V: Visitor<'de>>(bytes: impl Iterator<Item = u8>, visitor: V) -> BResult<V::Value> {
    let mut seq = SeqDeserializer::<_, BridgeError>::new(bytes);
    let out = visitor.visit_seq(&mut seq)?;
    seq.end()?;
    Ok(out)
}

fn visit_seq<'de, V: Visitor<'de>>(items: Items<'de>, level: Level, visitor: V) -> BResult<V::Value> {
    let len = items.len();
    let mut seq = SeqDe { items, index: 0, level };
    let out = visitor.visit_seq(&mut seq)?;
    if seq.items.len() != 0 {
        return Err(de::Error::invalid_length(len, &"fewer elements in the array"));
    }
    Ok(out)
}

fn visit_map<'de, V: Visitor<'de>>(entries: Entries<'de>, level: Level, visitor: V) -> BResult<V::Value> {
    let len = entries.len();
    let mut map = MapDe {
        entries,
        pending: None,
        level,
    };
    let out = visitor.visit_map(&mut map)?;
    if map.entries.len() != 0 {
        return Err(de::Error::invalid_length(len, &"fewer entries in the map"));
    }
    Ok(out)
}

/// `deserialize_*` methods that all read through one method of [`De`].
macro_rules! forward_to {
    ($read:ident => $($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
            self.$read(visitor)
        }
    )*};
}

impl<'de> Deserializer<'de> for De<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        self.visit(visitor)
    }

    forward_to!(integer => deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128);
    forward_to!(float => deserialize_f32 deserialize_f64);

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        match self.value() {
            Value::Nil => visitor.visit_none(),
            _ => visitor.visit_some(self.wrapped()?),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> BResult<V::Value> {
        visitor.visit_newtype_struct(self.wrapped()?)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        // A bin reads as a sequence of bytes, so `Vec<u8>` fields accept it.
        match self.node {
            Node::Owned(Value::Bin(b)) => visit_byte_seq(Vec::from(b).into_iter(), visitor),
            Node::Borrowed(Value::Bin(b)) => visit_byte_seq(b.iter().copied(), visitor),
            node => De {
                node,
                level: self.level,
            }
            .visit(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> BResult<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> BResult<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> BResult<V::Value> {
        let inner = self.inner_level()?;
        let (variant, value) = match self.node {
            Node::Owned(Value::Map(entries)) if entries.len() == 1 => {
                let mut it = entries.into_iter();
                match it.next() {
                    Some((k, v)) => (Node::Owned(k), Some(Node::Owned(v))),
                    None => return Err(BridgeError::new("empty enum map")),
                }
            }
            Node::Borrowed(Value::Map(entries)) if entries.len() == 1 => {
                (Node::Borrowed(&entries[0].0), Some(Node::Borrowed(&entries[0].1)))
            }
            node @ (Node::Owned(Value::Str(_)) | Node::Borrowed(Value::Str(_))) => (node, None),
            node => {
                let de = De {
                    node,
                    level: self.level,
                };
                return Err(de.invalid(&"a variant name or a map with exactly one entry {variant: value}"));
            }
        };
        visitor.visit_enum(EnumDe {
            variant,
            value,
            level: inner,
        })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool char str string bytes byte_buf unit unit_struct map struct identifier
    }
}

impl<'de> IntoDeserializer<'de, BridgeError> for De<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

enum Items<'de> {
    Owned(std::vec::IntoIter<Value>),
    Borrowed(std::slice::Iter<'de, Value>),
}

impl<'de> Items<'de> {
    fn len(&self) -> usize {
        match self {
            Items::Owned(it) => it.len(),
            Items::Borrowed(it) => it.len(),
        }
    }

    fn next(&mut self) -> Option<Node<'de>> {
        match self {
            Items::Owned(it) => it.next().map(Node::Owned),
            Items::Borrowed(it) => it.next().map(Node::Borrowed),
        }
    }
}

struct SeqDe<'de> {
    items: Items<'de>,
    index: usize,
    /// The level of the elements.
    level: Level,
}

impl<'de> SeqAccess<'de> for SeqDe<'de> {
    type Error = BridgeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> BResult<Option<T::Value>> {
        match self.items.next() {
            Some(node) => {
                let index = self.index;
                self.index += 1;
                seed.deserialize(De {
                    node,
                    level: self.level,
                })
                .map(Some)
                .map_err(|e| e.at(Seg::Index(index)))
            }
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

enum Entries<'de> {
    Owned(std::vec::IntoIter<(Value, Value)>),
    Borrowed(std::slice::Iter<'de, (Value, Value)>),
}

impl Entries<'_> {
    fn len(&self) -> usize {
        match self {
            Entries::Owned(it) => it.len(),
            Entries::Borrowed(it) => it.len(),
        }
    }
}

struct MapDe<'de> {
    entries: Entries<'de>,
    /// The value of the entry whose key was just read, with the key's path
    /// segment for errors.
    pending: Option<(Node<'de>, Option<Seg>)>,
    /// The level of the keys and values.
    level: Level,
}

impl<'de> MapAccess<'de> for MapDe<'de> {
    type Error = BridgeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> BResult<Option<K::Value>> {
        let (key, value) = match &mut self.entries {
            Entries::Owned(it) => match it.next() {
                Some((k, v)) => (Node::Owned(k), Node::Owned(v)),
                None => return Ok(None),
            },
            Entries::Borrowed(it) => match it.next() {
                Some((k, v)) => (Node::Borrowed(k), Node::Borrowed(v)),
                None => return Ok(None),
            },
        };
        let seg = Seg::of_key(key.value());
        self.pending = Some((value, seg));
        seed.deserialize(De {
            node: key,
            level: self.level,
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> BResult<V::Value> {
        let (value, seg) = self
            .pending
            .take()
            .ok_or_else(|| BridgeError::new("map value read before its key"))?;
        let de = De {
            node: value,
            level: self.level,
        };
        seed.deserialize(de).map_err(|e| e.at_opt(seg))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct EnumDe<'de> {
    variant: Node<'de>,
    value: Option<Node<'de>>,
    /// The level of the variant name and value.
    level: Level,
}

impl<'de> EnumAccess<'de> for EnumDe<'de> {
    type Error = BridgeError;
    type Variant = VariantDe<'de>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> BResult<(T::Value, VariantDe<'de>)> {
        let seg = Seg::of_key(self.variant.value());
        let level = self.level;
        let variant = seed.deserialize(De {
            node: self.variant,
            level,
        })?;
        Ok((
            variant,
            VariantDe {
                value: self.value,
                seg,
                level,
            },
        ))
    }
}

struct VariantDe<'de> {
    value: Option<Node<'de>>,
    seg: Option<Seg>,
    level: Level,
}

impl<'de> VariantDe<'de> {
    /// The reader of the variant's value and the path segment its errors
    /// take; a unit variant has no value to read as `expected`.
    fn content(self, expected: &'static str) -> BResult<(De<'de>, Option<Seg>)> {
        match self.value {
            Some(node) => Ok((
                De {
                    node,
                    level: self.level,
                },
                self.seg,
            )),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &expected)),
        }
    }
}

impl<'de> VariantAccess<'de> for VariantDe<'de> {
    type Error = BridgeError;

    fn unit_variant(self) -> BResult<()> {
        match self.value {
            None => Ok(()),
            Some(node) => match node.value() {
                Value::Nil => Ok(()),
                other => Err(de::Error::invalid_type(unexpected(other), &"unit variant")),
            },
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> BResult<T::Value> {
        let (de, seg) = self.content("newtype variant")?;
        seed.deserialize(de).map_err(|e| e.at_opt(seg))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> BResult<V::Value> {
        let (de, seg) = self.content("tuple variant")?;
        de.deserialize_seq(visitor).map_err(|e| e.at_opt(seg))
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], visitor: V) -> BResult<V::Value> {
        let (de, seg) = self.content("struct variant")?;
        de.visit(visitor).map_err(|e| e.at_opt(seg))
    }
}

/// Every `deserialize_*` method but `deserialize_any`, forwarded to it: an
/// extension and its payload read the same whatever type asks.
macro_rules! forward_everything_to_any {
    () => {
        forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map struct enum identifier ignored_any
        }
    };
}

/// An extension presented to a visitor: the sequence `(code, payload)`,
/// `level` the level of the payload.
struct ExtSeq<'de> {
    code: Option<i8>,
    payload: Option<PayloadNode<'de>>,
    level: Level,
}

impl<'de> ExtSeq<'de> {
    fn new(code: i8, payload: PayloadNode<'de>, level: Level) -> Self {
        ExtSeq {
            code: Some(code),
            payload: Some(payload),
            level,
        }
    }
}

impl<'de> Deserializer<'de> for ExtSeq<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        visitor.visit_seq(self)
    }

    forward_everything_to_any!();
}

impl<'de> SeqAccess<'de> for ExtSeq<'de> {
    type Error = BridgeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> BResult<Option<T::Value>> {
        if let Some(code) = self.code.take() {
            return seed.deserialize(code.into_deserializer()).map(Some);
        }
        match self.payload.take() {
            Some(payload) => seed
                .deserialize(PayloadDe {
                    node: payload,
                    level: self.level,
                })
                .map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(usize::from(self.code.is_some()) + usize::from(self.payload.is_some()))
    }
}

enum PayloadNode<'de> {
    Owned(ExtPayload),
    Borrowed(&'de ExtPayload),
}

struct PayloadDe<'de> {
    node: PayloadNode<'de>,
    level: Level,
}

impl<'de> Deserializer<'de> for PayloadDe<'de> {
    type Error = BridgeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> BResult<V::Value> {
        let level = self.level;
        match self.node {
            PayloadNode::Owned(ExtPayload::Raw(raw)) => visitor.visit_byte_buf(Vec::from(raw)),
            PayloadNode::Borrowed(ExtPayload::Raw(raw)) => visitor.visit_borrowed_bytes(raw),
            PayloadNode::Owned(ExtPayload::Decoded(inner)) => visitor.visit_newtype_struct(De {
                node: Node::Owned(*inner),
                level,
            }),
            PayloadNode::Borrowed(ExtPayload::Decoded(inner)) => visitor.visit_newtype_struct(De {
                node: Node::Borrowed(inner),
                level,
            }),
        }
    }

    forward_everything_to_any!();
}
