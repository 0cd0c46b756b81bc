//! LangGraph's `EncryptedSerializer` with a cipher only Python knows: the
//! crate's msgpack, then the Python cipher object's `encrypt` /
//! `decrypt` (called with the GIL held). AES-EAX keys handed over by the
//! package never come here: they use the crate's own `EncryptedSerializer`.

use std::fmt;

use checkpointer::serde::{JsonPlusSerializer, Serializer, TypedBytes, Value};
use checkpointer::Error;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `EncryptedSerializer(cipher, JsonPlusSerializer())` over a Python
/// `CipherProtocol` object: tags `"{inner}+{ciphername}"`; a tag without
/// `+` is read as plaintext, as Python does.
pub(crate) struct PyCipherSerializer {
    cipher: Py<PyAny>,
}

impl PyCipherSerializer {
    pub(crate) fn new(cipher: Py<PyAny>) -> Self {
        PyCipherSerializer { cipher }
    }
}

impl fmt::Debug for PyCipherSerializer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PyCipherSerializer { .. }")
    }
}

fn cipher_failed(what: &str, e: PyErr) -> Error {
    Error::serde(format!("the cipher's {what} failed: {e}"))
}

impl Serializer for PyCipherSerializer {
    fn dumps_typed(&self, value: &Value) -> checkpointer::Result<TypedBytes> {
        self.seal(JsonPlusSerializer.dumps_typed(value)?)
    }

    /// Encrypts a plaintext payload with the cipher object, as it is.
    fn seal(&self, plain: TypedBytes) -> checkpointer::Result<TypedBytes> {
        if plain.tag.contains('+') {
            return Ok(plain);
        }
        let (name, data) = Python::attach(|py| -> PyResult<(String, Vec<u8>)> {
            let out = self
                .cipher
                .call_method1(py, "encrypt", (PyBytes::new(py, &plain.data),))?;
            let (name, data): (String, Bound<'_, PyBytes>) = out.extract(py)?;
            Ok((name, data.as_bytes().to_vec()))
        })
        .map_err(|e| cipher_failed("encrypt", e))?;
        Ok(TypedBytes::new(format!("{}+{name}", plain.tag), data))
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> checkpointer::Result<Value> {
        let Some((inner, name)) = tag.split_once('+') else {
            return JsonPlusSerializer.loads_typed(tag, data);
        };
        let plain = Python::attach(|py| -> PyResult<Vec<u8>> {
            let out = self
                .cipher
                .call_method1(py, "decrypt", (name, PyBytes::new(py, data)))?;
            let plain: Bound<'_, PyBytes> = out.into_bound(py).extract()?;
            Ok(plain.as_bytes().to_vec())
        })
        .map_err(|e| cipher_failed("decrypt", e))?;
        JsonPlusSerializer.loads_typed(inner, &plain)
    }

    fn encrypts(&self) -> bool {
        true
    }

    fn reads_plaintext(&self) -> bool {
        true
    }
}
