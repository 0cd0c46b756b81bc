//! Python objects with named fields: dataclasses, namedtuples and pydantic
//! v2 models.

use ::serde::de::DeserializeOwned;
use ::serde::Serialize;

use super::{
    describe, ext, parts, payload_of, read_arg, str_entries, str_value, via_value, CONSTRUCTOR_KW_ARGS, PYDANTIC_V2,
};
use crate::error::{Error, Result};
use crate::serde::typed::{from_value as typed_from_value, to_value as typed_to_value};
use crate::serde::Value;

/// How Python writes, and rebuilds, an [`Object`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A dataclass instance or a namedtuple: ext 2 `[module, class, {field:
    /// value}]`, rebuilt as `module.class(**fields)`.
    Dataclass,
    /// A pydantic v2 model: ext 5 `[module, class, model_dump(),
    /// "model_validate_json"]`.
    PydanticV2,
}

const MODEL_VALIDATE_JSON: &str = "model_validate_json";

impl ObjectKind {
    /// The extension type code Python writes this kind with (2 or 5).
    pub fn code(self) -> i8 {
        match self {
            ObjectKind::Dataclass => CONSTRUCTOR_KW_ARGS,
            ObjectKind::PydanticV2 => PYDANTIC_V2,
        }
    }

    /// The kind written with extension type `code`.
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            CONSTRUCTOR_KW_ARGS => Some(ObjectKind::Dataclass),
            PYDANTIC_V2 => Some(ObjectKind::PydanticV2),
            _ => None,
        }
    }

    /// The extension Python writes for an object of this kind of
    /// `module.class` with `fields` (a map with string keys).
    pub(crate) fn encode(self, module: &str, class: &str, fields: Value) -> Value {
        let mut payload = vec![str_value(module), str_value(class), fields];
        if self == ObjectKind::PydanticV2 {
            payload.push(str_value(MODEL_VALIDATE_JSON));
        }
        ext(self.code(), Value::Array(payload.into()))
    }
}

/// A Python object with named fields: a dataclass instance or a namedtuple
/// (ext 2), or a pydantic v2 model (ext 5), as [`kind`](Self::kind) says.
///
/// Fields are in the order Python lists them (declaration order; for a
/// model, `model_dump()` order, parents first, nested models as plain maps),
/// which is the order a Rust struct serializes its fields in. LangChain
/// messages, which are pydantic models, have their own type,
/// [`Message`](super::Message).
///
/// ```
/// use checkpointer::serde::msgpack;
/// use checkpointer::serde::py::{Object, ObjectKind};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct DC { a: i64, b: String }
///
/// let dc = Object::from_struct(ObjectKind::Dataclass, "__main__", "DC", &DC { a: 1, b: "z".into() })?;
/// let v = dc.to_value();
/// let hex: String = msgpack::encode(&v)?.iter().map(|b| format!("{b:02x}")).collect();
/// assert_eq!(hex, "c7150293a85f5f6d61696e5f5fa2444382a16101a162a17a");
/// let back: DC = Object::from_value(&v)?.to_struct()?;
/// assert_eq!(back.b, "z");
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// How Python writes and rebuilds it.
    pub kind: ObjectKind,
    /// The class's module.
    pub module: String,
    /// The class's name.
    pub class: String,
    /// The fields, in order.
    pub fields: Vec<(String, Value)>,
}

impl Object {
    /// An object of `kind` of `module.class` without fields yet; add them
    /// with [`field`](Self::field).
    pub fn new(kind: ObjectKind, module: impl Into<String>, class: impl Into<String>) -> Self {
        Object {
            kind,
            module: module.into(),
            class: class.into(),
            fields: Vec::new(),
        }
    }

    /// A dataclass instance or namedtuple of `module.class` (ext 2).
    pub fn dataclass(module: impl Into<String>, class: impl Into<String>) -> Self {
        Object::new(ObjectKind::Dataclass, module, class)
    }

    /// A pydantic v2 model of `module.class` (ext 5).
    pub fn pydantic(module: impl Into<String>, class: impl Into<String>) -> Self {
        Object::new(ObjectKind::PydanticV2, module, class)
    }

    /// Appends a field.
    #[must_use]
    pub fn field(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fields.push((name.into(), value.into()));
        self
    }

    /// An object of `kind` of `module.class` whose fields are those of a
    /// Rust struct (anything that serializes to a map with string keys).
    ///
    /// # Errors
    /// [`Error::Serde`] when `value` does not serialize to such a map.
    pub fn from_struct<T: Serialize + ?Sized>(
        kind: ObjectKind,
        module: impl Into<String>,
        class: impl Into<String>,
        value: &T,
    ) -> Result<Self> {
        let fields = match typed_to_value(value)? {
            v @ Value::Map(_) => {
                str_entries(&v).ok_or_else(|| Error::serde("a Python object's fields need string keys"))?
            }
            other => {
                return Err(Error::serde(format!(
                    "a Python object's fields must be a map, found {}",
                    describe(&other)
                )))
            }
        };
        Ok(Object {
            fields,
            ..Object::new(kind, module, class)
        })
    }

    /// The fields read into a Rust struct.
    ///
    /// # Errors
    /// [`Error::Serde`] when they do not have the shape `T` expects.
    pub fn to_struct<T: DeserializeOwned>(&self) -> Result<T> {
        typed_from_value(self.fields_value())
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    fn fields_value(&self) -> Value {
        Value::Map(self.fields.iter().map(|(k, v)| (str_value(k), v.clone())).collect())
    }

    /// The extension Python writes for this object.
    pub fn to_value(&self) -> Value {
        self.kind.encode(&self.module, &self.class, self.fields_value())
    }

    /// Reads a keyword-arguments constructor extension (ext 2) or a pydantic
    /// v2 extension (ext 5) whose fields have string keys; the extension
    /// gives [`kind`](Self::kind).
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is neither.
    pub fn from_value(v: &Value) -> Result<Self> {
        let read = || {
            let kind = ObjectKind::from_code(v.as_ext()?.code())?;
            let payload = payload_of(v, kind.code())?;
            let p = parts(&payload)?;
            Some(Object {
                kind,
                module: p.module.to_owned(),
                class: p.class.to_owned(),
                fields: str_entries(p.arg)?,
            })
        };
        read().ok_or_else(|| {
            Error::serde(format!(
                "expected a Python dataclass, namedtuple (ext 2) or pydantic v2 model (ext 5), found {}",
                describe(v)
            ))
        })
    }

    /// Reads the fields of `module.class` (ext 2), refusing other classes.
    pub(crate) fn read_dataclass(v: &Value, module: &str, class: &str) -> Result<Vec<(String, Value)>> {
        read_arg(v, CONSTRUCTOR_KW_ARGS, module, class, str_entries)
    }
}

via_value!(Object);
