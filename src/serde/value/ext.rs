//! Extension values: LangGraph's encoded Python objects, read as data.

use bytes::Bytes;

use super::{string_value, Value};
use crate::error::{Error, Result};

/// LangGraph's msgpack extension codes (`docs/design.md`, *Extension values*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExtKind {
    /// Code 0: `module.name(arg)`.
    ConstructorSingleArg,
    /// Code 1: `module.name(*args)`.
    ConstructorPosArgs,
    /// Code 2: `module.name(**kwargs)`.
    ConstructorKwArgs,
    /// Code 3: `module.name.method(arg)` (only `datetime.fromisoformat`).
    MethodSingleArg,
    /// Code 4: a pydantic v1 model.
    PydanticV1,
    /// Code 5: a pydantic v2 model (LangChain messages among them).
    PydanticV2,
    /// Code 6: a numpy array.
    NumpyArray,
    /// Code 7: a delta-channel snapshot.
    DeltaSnapshot,
    /// Any other code.
    Unknown(i8),
}

impl ExtKind {
    /// The msgpack extension type code.
    pub fn code(self) -> i8 {
        match self {
            ExtKind::ConstructorSingleArg => 0,
            ExtKind::ConstructorPosArgs => 1,
            ExtKind::ConstructorKwArgs => 2,
            ExtKind::MethodSingleArg => 3,
            ExtKind::PydanticV1 => 4,
            ExtKind::PydanticV2 => 5,
            ExtKind::NumpyArray => 6,
            ExtKind::DeltaSnapshot => 7,
            ExtKind::Unknown(c) => c,
        }
    }

    /// The kind for a type code.
    pub fn from_code(code: i8) -> Self {
        match code {
            0 => ExtKind::ConstructorSingleArg,
            1 => ExtKind::ConstructorPosArgs,
            2 => ExtKind::ConstructorKwArgs,
            3 => ExtKind::MethodSingleArg,
            4 => ExtKind::PydanticV1,
            5 => ExtKind::PydanticV2,
            6 => ExtKind::NumpyArray,
            7 => ExtKind::DeltaSnapshot,
            c => ExtKind::Unknown(c),
        }
    }
}

/// A msgpack extension value.
///
/// For LangGraph's codes 0–7 the payload (itself msgpack) is decoded into a
/// [`Value`] so its parts can be read; it is data only, nothing is ever
/// constructed or executed. Unknown codes, and payloads of known codes that are
/// not a single well-formed msgpack value, are kept as raw bytes.
#[derive(Debug, PartialEq)]
pub struct Ext {
    pub(crate) code: i8,
    pub(crate) payload: ExtPayload,
}

/// A copy made in a loop along extensions whose payload is directly another
/// extension (a snapshot of a snapshot…), so that cloning never recurses:
/// lists and maps below are shared, not copied.
impl Clone for Ext {
    fn clone(&self) -> Self {
        let mut codes = Vec::new();
        let mut cur = self;
        let innermost = loop {
            match &cur.payload {
                ExtPayload::Decoded(inner) => match &**inner {
                    Value::Ext(next) => {
                        codes.push(cur.code);
                        cur = next;
                    }
                    // Not an extension: a shallow copy.
                    other => break ExtPayload::Decoded(Box::new(other.clone())),
                },
                ExtPayload::Raw(raw) => break ExtPayload::Raw(raw.clone()),
            }
        };
        let mut ext = Ext {
            code: cur.code,
            payload: innermost,
        };
        while let Some(code) = codes.pop() {
            ext = Ext {
                code,
                payload: ExtPayload::Decoded(Box::new(Value::Ext(Box::new(ext)))),
            };
        }
        ext
    }
}

/// The payload of an [`Ext`].
#[derive(Debug, Clone, PartialEq)]
pub enum ExtPayload {
    /// The payload decoded as one msgpack value.
    Decoded(Box<Value>),
    /// The payload bytes, kept verbatim.
    Raw(Bytes),
}

/// The memory layout of a numpy array's buffer (ext code 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumpyOrder {
    /// Row-major (`"C"`).
    C,
    /// Column-major (`"F"`).
    F,
}

impl NumpyOrder {
    /// The letter stored in the payload: `"C"` or `"F"`.
    pub fn as_str(self) -> &'static str {
        match self {
            NumpyOrder::C => "C",
            NumpyOrder::F => "F",
        }
    }

    /// Parses the stored letter.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "C" => Some(NumpyOrder::C),
            "F" => Some(NumpyOrder::F),
            _ => None,
        }
    }
}

/// A read-only view of a numpy array stored as ext code 6:
/// `[dtype, shape, order, buffer]`.
///
/// The buffer is not interpreted; `dtype` is numpy's `dtype.str` (for example
/// `"<i4"`, `"<f8"`), which says how to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumpyView<'a> {
    /// numpy's `dtype.str`, e.g. `"<i4"`.
    pub dtype: &'a str,
    /// The dimensions.
    pub shape: Vec<u64>,
    /// The order of the elements in `data`.
    pub order: NumpyOrder,
    /// The raw element bytes.
    pub data: &'a Bytes,
}

/// Reading and building LangGraph's extension values.
///
/// Everything here is data: an [`Ext`] records which Python class (module and
/// name) and which arguments Python used, so that Python can rebuild the
/// object when it reads the bytes back. This crate never imports, constructs or
/// executes anything named in an extension value.
///
/// ```
/// use checkpointer::serde::{Ext, ExtKind, Value};
/// let uuid = Ext::object(
///     ExtKind::ConstructorSingleArg,
///     "uuid",
///     "UUID",
///     Value::from("12345678123456781234567812345678"),
/// )
/// .unwrap();
/// assert_eq!(uuid.module(), Some("uuid"));
/// assert_eq!(uuid.name(), Some("UUID"));
/// assert_eq!(uuid.arg().and_then(Value::as_str), Some("12345678123456781234567812345678"));
/// ```
impl Ext {
    /// The msgpack extension type code.
    pub fn code(&self) -> i8 {
        self.code
    }

    /// The kind of value the code stands for.
    pub fn kind(&self) -> ExtKind {
        ExtKind::from_code(self.code)
    }

    /// The payload, decoded or verbatim.
    pub fn payload(&self) -> &ExtPayload {
        &self.payload
    }

    /// The code and the payload, taken apart (`Ext` has a `Drop`, so its
    /// fields cannot be moved out of it).
    pub(crate) fn into_parts(mut self) -> (i8, ExtPayload) {
        let payload = std::mem::replace(&mut self.payload, ExtPayload::Raw(Bytes::new()));
        (self.code, payload)
    }

    /// The decoded payload, if it is one (codes 0–7 with a well-formed payload).
    pub fn decoded(&self) -> Option<&Value> {
        match &self.payload {
            ExtPayload::Decoded(v) => Some(v),
            ExtPayload::Raw(_) => None,
        }
    }

    /// The elements of an object payload (codes 0–5): `[module, name, arg(, method)]`.
    fn object_parts(&self) -> Option<&[Value]> {
        if !(0..=5).contains(&self.code) {
            return None;
        }
        self.decoded()?.as_array()
    }

    /// The Python module of the recorded class (codes 0–5), e.g. `"datetime"`.
    pub fn module(&self) -> Option<&str> {
        self.object_parts()?.first()?.as_str()
    }

    /// The Python class (or, for `re.compile`, function) name (codes 0–5).
    pub fn name(&self) -> Option<&str> {
        self.object_parts()?.get(1)?.as_str()
    }

    /// The constructor argument (codes 0–5): the single argument (code 0 and
    /// 3), the positional argument list (1), the keyword/field map (2, 4, 5).
    pub fn arg(&self) -> Option<&Value> {
        self.object_parts()?.get(2)
    }

    /// The fourth element when it is a string (codes 0–5): `"fromisoformat"`
    /// for datetimes (code 3), `"model_validate_json"` for pydantic v2 models.
    pub fn method(&self) -> Option<&str> {
        self.object_parts()?.get(3)?.as_str()
    }

    /// The wrapped value of a delta-channel snapshot (code 7).
    pub fn snapshot_value(&self) -> Option<&Value> {
        if self.code == 7 {
            self.decoded()
        } else {
            None
        }
    }

    /// The parts of a numpy array (code 6), when the payload has the expected
    /// shape `[dtype: str, shape: [int…], "C"|"F", buffer: bin]`.
    pub fn numpy_view(&self) -> Option<NumpyView<'_>> {
        if self.code != 6 {
            return None;
        }
        match self.decoded()?.as_array()? {
            [Value::Str(dtype), Value::Array(shape), Value::Str(order), Value::Bin(data)] => Some(NumpyView {
                dtype,
                shape: shape
                    .iter()
                    .map(|d| d.as_i64().and_then(|d| u64::try_from(d).ok()))
                    .collect::<Option<Vec<u64>>>()?,
                order: NumpyOrder::parse(order)?,
                data,
            }),
            _ => None,
        }
    }

    /// An object extension (codes 0–5): payload `[module, name, arg]`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `kind` is not one of codes 0–5.
    pub fn object(kind: ExtKind, module: impl Into<String>, name: impl Into<String>, arg: Value) -> Result<Ext> {
        Self::object_parts_ext(kind, vec![string_value(module), string_value(name), arg])
    }

    /// An object extension with a fourth `method` element: code 3
    /// (`["datetime", "datetime", iso, "fromisoformat"]`) and code 5
    /// (`[module, name, fields, "model_validate_json"]`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `kind` is not one of codes 0–5.
    pub fn object_with_method(
        kind: ExtKind,
        module: impl Into<String>,
        name: impl Into<String>,
        arg: Value,
        method: impl Into<String>,
    ) -> Result<Ext> {
        Self::object_parts_ext(
            kind,
            vec![string_value(module), string_value(name), arg, string_value(method)],
        )
    }

    fn object_parts_ext(kind: ExtKind, parts: Vec<Value>) -> Result<Ext> {
        let code = kind.code();
        if !(0..=5).contains(&code) {
            return Err(Error::invalid(format!(
                "extension code {code} does not hold a [module, name, arg] object"
            )));
        }
        Ok(Ext {
            code,
            payload: ExtPayload::Decoded(Box::new(Value::Array(parts.into()))),
        })
    }

    /// A delta-channel snapshot (code 7) wrapping `value`.
    pub fn delta_snapshot(value: Value) -> Ext {
        Ext {
            code: 7,
            payload: ExtPayload::Decoded(Box::new(value)),
        }
    }

    /// A numpy array (code 6): `[dtype, shape, order, data]`, as Python writes
    /// it. `data` must hold the elements in `order`; it is not checked against
    /// `dtype` and `shape`.
    pub fn numpy(
        dtype: impl Into<String>,
        shape: impl IntoIterator<Item = u64>,
        order: NumpyOrder,
        data: Bytes,
    ) -> Ext {
        let shape = shape.into_iter().map(Value::from).collect();
        Ext {
            code: 6,
            payload: ExtPayload::Decoded(Box::new(Value::Array(
                (vec![
                    string_value(dtype),
                    Value::Array(shape),
                    Value::Str(order.as_str().into()),
                    Value::Bin(data),
                ])
                .into(),
            ))),
        }
    }

    /// The extension the decoder produces for type `code` with payload bytes
    /// `data`: for codes 0–7 a payload that is exactly one msgpack value in
    /// Python's canonical form is decoded; anything else is kept verbatim, so
    /// encoding the result always writes `data` back unchanged.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use checkpointer::serde::{Ext, ExtPayload};
    /// let snap = Ext::raw(7, Bytes::from_static(&[0x92, 0x01, 0x02]));
    /// assert!(matches!(snap.payload(), ExtPayload::Decoded(_)));
    /// // 1 written as `cc 01` is not Python's form: kept as bytes
    /// let odd = Ext::raw(7, Bytes::from_static(&[0xcc, 0x01]));
    /// assert!(matches!(odd.payload(), ExtPayload::Raw(_)));
    /// ```
    pub fn raw(code: i8, data: Bytes) -> Ext {
        if (0..=7).contains(&code) {
            if let Ok(value) = crate::serde::msgpack_codec::decode_bytes(&data) {
                if crate::serde::msgpack_codec::encode(&value).is_ok_and(|b| b[..] == data[..]) {
                    return Ext {
                        code,
                        payload: ExtPayload::Decoded(Box::new(value)),
                    };
                }
            }
        }
        Ext {
            code,
            payload: ExtPayload::Raw(data),
        }
    }

    /// An extension of type `code` whose payload is the encoding of `value`.
    /// Codes 0–7 keep `value` decoded; other codes store its bytes, as the
    /// decoder does for codes it does not know.
    ///
    /// # Errors
    /// [`Error::Serde`] when `code` is not 0–7 and `value` cannot be encoded.
    pub fn from_decoded(code: i8, value: Value) -> Result<Ext> {
        let payload = if (0..=7).contains(&code) {
            ExtPayload::Decoded(Box::new(value))
        } else {
            ExtPayload::Raw(Bytes::from(crate::serde::msgpack_codec::encode(&value)?))
        };
        Ok(Ext { code, payload })
    }
}
