//! Encryption at rest: [`EncryptedSerializer`] wraps any [`Serializer`] and
//! encrypts its payloads with AES in EAX mode, exactly as Python LangGraph's
//! `EncryptedSerializer.from_pycryptodome_aes` does (see `docs/design.md`,
//! *Encryption at rest*), so either side reads what the other wrote.
//!
//! | | |
//! |---|---|
//! | stored tag | `<inner tag>+aes` (`msgpack+aes`, `null+aes`, `bytes+aes`, …) |
//! | payload | nonce (16 bytes, fresh and random per value) ‖ EAX tag (16) ‖ ciphertext (as long as the plaintext) |
//! | key | 16, 24 or 32 bytes (AES-128/192/256), given as bytes or read from `LANGGRAPH_AES_KEY` |
//!
//! Unlike Python's class before LangGraph issue #8938, reading **fails
//! closed**: a payload whose tag has no cipher suffix is refused with
//! [`EncryptionError::PlaintextRefused`], since anyone able to write to the
//! store could otherwise plant unauthenticated values. Stores holding rows
//! written before encryption was enabled opt in with
//! [`EncryptedSerializer::allow_plaintext`].
//!
//! Keys never appear in `Debug` output or in errors. The key bytes held by
//! the serializer are zeroized when it is dropped; the AES key schedules are
//! zeroized by the `aes` crate.
//!
//! ```
//! use std::sync::Arc;
//! use checkpointer::serde::{EncryptedSerializer, Serializer};
//! use checkpointer::{InMemorySaver, Value};
//!
//! let serde = EncryptedSerializer::from_key(b"0123456789abcdef0123456789abcdef")?;
//! let typed = serde.dumps_typed(&Value::from("secret"))?;
//! assert_eq!(typed.tag, "msgpack+aes");
//! assert_eq!(typed.data.len(), 32 + 7); // nonce, tag, msgpack "secret"
//! assert_eq!(serde.loads_typed(&typed.tag, &typed.data)?, Value::from("secret"));
//!
//! // Plaintext is refused unless asked for.
//! assert!(serde.loads_typed("msgpack", b"\xa2hi").is_err());
//!
//! let saver = InMemorySaver::with_serializer(Arc::new(serde));
//! # Ok::<(), checkpointer::Error>(())
//! ```

use std::fmt;

use aes::cipher::consts::{U0, U16};
use aes::{Aes128, Aes192, Aes256};
use bytes::Bytes;
use eax::aead::generic_array::GenericArray;
use eax::aead::{AeadInPlace, KeyInit};
use eax::Eax;
use rand::TryRngCore;
use zeroize::Zeroizing;

use super::{JsonPlusSerializer, Serializer, TypedBytes, Value};
use crate::error::{EncryptionError, Error, Result};

/// Length of the nonce that starts every payload.
pub const NONCE_LEN: usize = 16;
/// Length of the authentication tag that follows the nonce.
pub const TAG_LEN: usize = 16;
/// Bytes an encrypted payload has beyond its plaintext.
pub const OVERHEAD: usize = NONCE_LEN + TAG_LEN;
/// The cipher name written after the `+` of the type tag.
pub const CIPHER_NAME: &str = "aes";
/// The environment variable Python reads the key from.
pub const KEY_ENV: &str = "LANGGRAPH_AES_KEY";

/// An AES key and the EAX mode built on it, as Python's
/// `PycryptodomeAesCipher` uses it (16-byte nonce, 16-byte tag, no associated
/// data).
///
/// `Debug` shows the key size only.
#[derive(Clone)]
pub struct AesEax {
    key: Zeroizing<Vec<u8>>,
}

impl AesEax {
    /// A cipher with `key` (16, 24 or 32 bytes: AES-128, -192 or -256).
    ///
    /// # Errors
    /// [`EncryptionError::InvalidKeyLength`] for any other length.
    pub fn new(key: &[u8]) -> Result<Self> {
        match key.len() {
            16 | 24 | 32 => Ok(AesEax {
                key: Zeroizing::new(key.to_vec()),
            }),
            len => Err(EncryptionError::InvalidKeyLength { len }.into()),
        }
    }

    /// A cipher whose key is the UTF-8 bytes of the environment variable
    /// `LANGGRAPH_AES_KEY`, as Python reads it.
    ///
    /// # Errors
    /// [`EncryptionError::KeyNotSet`] when the variable is unset or not
    /// UTF-8; [`EncryptionError::InvalidKeyLength`] when it is not 16, 24 or
    /// 32 bytes long.
    pub fn from_env() -> Result<Self> {
        let value = std::env::var(KEY_ENV).map_err(|_| EncryptionError::KeyNotSet { var: KEY_ENV })?;
        let value = Zeroizing::new(value);
        Self::new(value.as_bytes())
    }

    /// The key size in bits.
    pub fn key_bits(&self) -> usize {
        self.key.len() * 8
    }

    /// Encrypts `plaintext` under a fresh random nonce: nonce ‖ tag ‖ ciphertext.
    ///
    /// # Errors
    /// [`EncryptionError::Random`] when the operating system gives no random
    /// bytes.
    pub fn encrypt(&self, plaintext: &[u8]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng
            .try_fill_bytes(&mut nonce)
            .map_err(|e| EncryptionError::Random { reason: e.to_string() })?;
        self.encrypt_with_nonce(plaintext, &nonce)
    }

    /// Encrypts with a caller-chosen nonce. Reusing a nonce with the same key
    /// destroys EAX's security: this exists only to reproduce fixed test
    /// vectors.
    ///
    /// # Errors
    /// Never in practice (EAX accepts any length that fits in memory).
    #[doc(hidden)]
    pub fn encrypt_with_nonce(&self, plaintext: &[u8], nonce: &[u8; NONCE_LEN]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(OVERHEAD + plaintext.len());
        out.extend_from_slice(nonce);
        out.extend_from_slice(&[0u8; TAG_LEN]);
        out.extend_from_slice(plaintext);
        let (head, body) = out.split_at_mut(OVERHEAD);
        let tag = self.seal(nonce, body)?;
        head[NONCE_LEN..].copy_from_slice(&tag);
        Ok(out)
    }

    /// Checks and decrypts a payload written by [`AesEax::encrypt`] or by
    /// Python.
    ///
    /// # Errors
    /// [`EncryptionError::Truncated`] for payloads shorter than 32 bytes;
    /// [`EncryptionError::AuthenticationFailed`] for a wrong key or altered
    /// bytes.
    pub fn decrypt(&self, payload: &[u8]) -> Result<Vec<u8>> {
        if payload.len() < OVERHEAD {
            return Err(EncryptionError::Truncated { len: payload.len() }.into());
        }
        let (nonce, rest) = payload.split_at(NONCE_LEN);
        let (tag, body) = rest.split_at(TAG_LEN);
        let mut plain = body.to_vec();
        self.open(nonce, tag, &mut plain)?;
        Ok(plain)
    }

    fn seal(&self, nonce: &[u8], buf: &mut [u8]) -> Result<[u8; TAG_LEN]> {
        self.with_cipher(|cipher| {
            let tag = cipher
                .encrypt_in_place_detached(GenericArray::from_slice(nonce), b"", buf)
                .map_err(|_| Error::serde("value too large to encrypt"))?;
            let mut out = [0u8; TAG_LEN];
            out.copy_from_slice(&tag);
            Ok(out)
        })
    }

    fn open(&self, nonce: &[u8], tag: &[u8], buf: &mut [u8]) -> Result<()> {
        self.with_cipher(|cipher| {
            cipher
                .decrypt_in_place_detached(GenericArray::from_slice(nonce), b"", buf, GenericArray::from_slice(tag))
                .map_err(|_| EncryptionError::AuthenticationFailed.into())
        })
    }

    /// Runs `f` with the AES-EAX cipher of the key (its length picks
    /// AES-128, AES-192 or AES-256).
    fn with_cipher<R>(&self, f: impl FnOnce(&Cipher) -> Result<R>) -> Result<R> {
        fn keyed<C, R>(key: &[u8], f: impl FnOnce(&Cipher) -> Result<R>) -> Result<R>
        where
            Eax<C>: KeyInit + AeadInPlace<NonceSize = U16, TagSize = U16, CiphertextOverhead = U0>,
            C: aes::cipher::BlockCipher<BlockSize = U16> + aes::cipher::BlockEncrypt + Clone + KeyInit + 'static,
        {
            let cipher =
                Eax::<C>::new_from_slice(key).map_err(|_| EncryptionError::InvalidKeyLength { len: key.len() })?;
            f(&cipher)
        }
        match self.key.len() {
            16 => keyed::<Aes128, R>(&self.key, f),
            24 => keyed::<Aes192, R>(&self.key, f),
            _ => keyed::<Aes256, R>(&self.key, f),
        }
    }
}

/// An AES-EAX cipher of any key length: 16-byte nonces and tags.
type Cipher = dyn AeadInPlace<NonceSize = U16, TagSize = U16, CiphertextOverhead = U0>;

impl fmt::Debug for AesEax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesEax")
            .field("key", &format_args!("<{} bits, redacted>", self.key_bits()))
            .finish()
    }
}

/// A [`Serializer`] that encrypts what `S` produces; see the [module
/// docs](self) for the format.
///
/// Writing: `(tag, bytes) = inner.dumps_typed(v)` becomes
/// `(tag + "+aes", nonce ‖ tag ‖ ciphertext)`, for every tag including
/// `null` (an empty plaintext) and `bytes`.
///
/// Reading: the tag is split at its first `+`; the cipher name must be `aes`;
/// the payload is authenticated and decrypted, then read by `inner`. A tag
/// without `+` is plaintext: refused unless [`allow_plaintext`](Self::allow_plaintext)
/// was set, in which case `inner` reads it as stored.
#[derive(Clone)]
pub struct EncryptedSerializer<S = JsonPlusSerializer> {
    inner: S,
    cipher: AesEax,
    allow_plaintext: bool,
}

impl EncryptedSerializer<JsonPlusSerializer> {
    /// Encrypts [`JsonPlusSerializer`] payloads with `key`.
    ///
    /// # Errors
    /// [`EncryptionError::InvalidKeyLength`] unless the key is 16, 24 or 32
    /// bytes long.
    pub fn from_key(key: &[u8]) -> Result<Self> {
        Ok(Self::new(JsonPlusSerializer, AesEax::new(key)?))
    }

    /// Encrypts [`JsonPlusSerializer`] payloads with the key in
    /// `LANGGRAPH_AES_KEY` (see [`AesEax::from_env`]).
    ///
    /// # Errors
    /// As [`AesEax::from_env`].
    pub fn from_env() -> Result<Self> {
        Ok(Self::new(JsonPlusSerializer, AesEax::from_env()?))
    }
}

impl<S: Serializer> EncryptedSerializer<S> {
    /// Encrypts `inner`'s payloads with `cipher`.
    pub fn new(inner: S, cipher: AesEax) -> Self {
        EncryptedSerializer {
            inner,
            cipher,
            allow_plaintext: false,
        }
    }

    /// Whether payloads stored without encryption (tags without `+`) are read;
    /// off by default (see the [module docs](self)). Writing is unaffected.
    pub fn allow_plaintext(mut self, allow: bool) -> Self {
        self.allow_plaintext = allow;
        self
    }

    /// Whether plaintext payloads are read (see [`allow_plaintext`](Self::allow_plaintext)).
    pub fn allows_plaintext(&self) -> bool {
        self.allow_plaintext
    }

    /// The wrapped serializer.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// [`Serializer::dumps_typed`] with a caller-chosen nonce, to reproduce
    /// fixed test vectors. Never use it for real data.
    ///
    /// # Errors
    /// As `dumps_typed`.
    #[doc(hidden)]
    pub fn dumps_typed_with_nonce(&self, value: &Value, nonce: &[u8; NONCE_LEN]) -> Result<TypedBytes> {
        let plain = self.inner.dumps_typed(value)?;
        let data = self.cipher.encrypt_with_nonce(&plain.data, nonce)?;
        Ok(TypedBytes::new(format!("{}+{CIPHER_NAME}", plain.tag), data))
    }
}

impl<S: Serializer> Serializer for EncryptedSerializer<S> {
    fn dumps_typed(&self, value: &Value) -> Result<TypedBytes> {
        let plain = self.inner.dumps_typed(value)?;
        let data = self.cipher.encrypt(&plain.data)?;
        Ok(TypedBytes::new(
            format!("{}+{CIPHER_NAME}", plain.tag),
            Bytes::from(data),
        ))
    }

    fn loads_typed(&self, tag: &str, data: &[u8]) -> Result<Value> {
        let Some((inner_tag, cipher)) = tag.split_once('+') else {
            if self.allow_plaintext {
                return self.inner.loads_typed(tag, data);
            }
            return Err(EncryptionError::PlaintextRefused { tag: tag.to_owned() }.into());
        };
        if cipher != CIPHER_NAME {
            return Err(EncryptionError::UnknownCipher {
                cipher: cipher.to_owned(),
            }
            .into());
        }
        let plain = Zeroizing::new(self.cipher.decrypt(data)?);
        self.inner.loads_typed(inner_tag, &plain)
    }

    /// Plaintext (when allowed) is read zero-copy by the inner serializer;
    /// decrypted payloads as by [`loads_typed`](Serializer::loads_typed),
    /// from the zeroized plaintext.
    fn loads_typed_bytes(&self, tag: &str, data: &Bytes) -> Result<Value> {
        if !tag.contains('+') && self.allow_plaintext {
            return self.inner.loads_typed_bytes(tag, data);
        }
        self.loads_typed(tag, data)
    }

    /// Encrypts the plaintext payload as it is (the inner serializer's
    /// bytes, as `dumps_typed` would have made them).
    fn seal(&self, plain: TypedBytes) -> Result<TypedBytes> {
        if plain.tag.contains('+') {
            return Ok(plain);
        }
        let data = self.cipher.encrypt(&plain.data)?;
        Ok(TypedBytes::new(
            format!("{}+{CIPHER_NAME}", plain.tag),
            Bytes::from(data),
        ))
    }

    fn unseal(&self, sealed: &TypedBytes) -> Result<Option<TypedBytes>> {
        let Some((inner_tag, cipher)) = sealed.tag.split_once('+') else {
            return Ok(None);
        };
        if cipher != CIPHER_NAME {
            return Err(EncryptionError::UnknownCipher {
                cipher: cipher.to_owned(),
            }
            .into());
        }
        let plain = self.cipher.decrypt(&sealed.data)?;
        Ok(Some(TypedBytes::new(inner_tag, plain)))
    }

    fn encrypts(&self) -> bool {
        true
    }

    fn reads_plaintext(&self) -> bool {
        self.allow_plaintext
    }
}

impl<S: fmt::Debug> fmt::Debug for EncryptedSerializer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptedSerializer")
            .field("inner", &self.inner)
            .field("cipher", &self.cipher)
            .field("allow_plaintext", &self.allow_plaintext)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";
    const NONCE: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    const VECTOR: &str = "000102030405060708090a0b0c0d0e0f8ee76d82f558339f0a1b2b3ee26b5ee1a5d8639e";

    fn a1() -> Value {
        Value::map([("a", Value::Int(1))])
    }

    #[test]
    fn spec_vector_decrypts() {
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        assert_eq!(
            s.loads_typed("msgpack+aes", &hex::decode(VECTOR).unwrap()).unwrap(),
            a1()
        );
    }

    #[test]
    fn spec_vector_encrypts_byte_exactly() {
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        let typed = s.dumps_typed_with_nonce(&a1(), &NONCE).unwrap();
        assert_eq!(typed.tag, "msgpack+aes");
        assert_eq!(typed.data.to_vec(), hex::decode(VECTOR).unwrap());
    }

    #[test]
    fn nonces_are_fresh() {
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        let a = s.dumps_typed(&a1()).unwrap();
        let b = s.dumps_typed(&a1()).unwrap();
        assert_ne!(a.data[..NONCE_LEN], b.data[..NONCE_LEN]);
        assert_ne!(a.data, b.data);
        assert_eq!(s.loads_typed(&a.tag, &a.data).unwrap(), a1());
        assert_eq!(s.loads_typed(&b.tag, &b.data).unwrap(), a1());
    }

    #[test]
    fn every_key_size_roundtrips_and_others_are_refused() {
        for len in [16, 24, 32] {
            let s = EncryptedSerializer::from_key(&KEY[..len]).unwrap();
            let typed = s.dumps_typed(&Value::from("x")).unwrap();
            assert_eq!(s.loads_typed(&typed.tag, &typed.data).unwrap(), Value::from("x"));
        }
        for len in [0, 1, 15, 17, 23, 25, 31, 33, 64] {
            let key = vec![7u8; len];
            match EncryptedSerializer::from_key(&key) {
                Err(Error::Encryption(EncryptionError::InvalidKeyLength { len: got })) => assert_eq!(got, len),
                other => panic!("{len}: {other:?}"),
            }
        }
    }

    #[test]
    fn null_and_bytes_are_encrypted_too() {
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        let null = s.dumps_typed(&Value::Nil).unwrap();
        assert_eq!(null.tag, "null+aes");
        assert_eq!(null.data.len(), OVERHEAD);
        assert_eq!(s.loads_typed(&null.tag, &null.data).unwrap(), Value::Nil);
        let bin = Value::Bin(Bytes::from_static(b"raw"));
        let typed = s.dumps_typed(&bin).unwrap();
        assert_eq!(typed.tag, "bytes+aes");
        assert!(!typed.data.windows(3).any(|w| w == b"raw"));
        assert_eq!(s.loads_typed(&typed.tag, &typed.data).unwrap(), bin);
    }

    #[test]
    fn plaintext_fails_closed_unless_allowed() {
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        assert!(!s.allows_plaintext());
        for (tag, data) in [
            ("msgpack", &b"\x01"[..]),
            ("null", b""),
            ("bytes", b"x"),
            ("empty", b""),
        ] {
            match s.loads_typed(tag, data) {
                Err(Error::Encryption(EncryptionError::PlaintextRefused { tag: got })) => assert_eq!(got, tag),
                other => panic!("{tag}: {other:?}"),
            }
        }
        let open = s.clone().allow_plaintext(true);
        assert_eq!(open.loads_typed("msgpack", b"\x01").unwrap(), Value::Int(1));
        assert_eq!(open.loads_typed("null", b"").unwrap(), Value::Nil);
        // New values are still written encrypted.
        assert_eq!(open.dumps_typed(&Value::Int(1)).unwrap().tag, "msgpack+aes");
    }

    #[test]
    fn wrong_key_tampering_truncation_and_cipher_names_are_typed_errors() {
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        let data = hex::decode(VECTOR).unwrap();
        let other = EncryptedSerializer::from_key(b"fedcba9876543210fedcba9876543210").unwrap();
        assert!(matches!(
            other.loads_typed("msgpack+aes", &data),
            Err(Error::Encryption(EncryptionError::AuthenticationFailed))
        ));
        for bit in 0..data.len() * 8 {
            let mut flipped = data.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(
                    s.loads_typed("msgpack+aes", &flipped),
                    Err(Error::Encryption(EncryptionError::AuthenticationFailed))
                ),
                "bit {bit}"
            );
        }
        for len in 0..OVERHEAD {
            assert!(matches!(
                s.loads_typed("msgpack+aes", &data[..len]),
                Err(Error::Encryption(EncryptionError::Truncated { len: got })) if got == len
            ));
        }
        // A cut body keeps the length check happy but fails authentication.
        assert!(matches!(
            s.loads_typed("msgpack+aes", &data[..data.len() - 1]),
            Err(Error::Encryption(EncryptionError::AuthenticationFailed))
        ));
        for (tag, cipher) in [("msgpack+des", "des"), ("msgpack+", ""), ("msgpack+aes+aes", "aes+aes")] {
            match s.loads_typed(tag, &data) {
                Err(Error::Encryption(EncryptionError::UnknownCipher { cipher: got })) => assert_eq!(got, cipher),
                other => panic!("{tag}: {other:?}"),
            }
        }
        // The inner tag is checked after decryption.
        let typed = s.dumps_typed_with_nonce(&a1(), &NONCE).unwrap();
        assert!(matches!(
            s.loads_typed("pickle+aes", &typed.data),
            Err(Error::Serde { .. })
        ));
    }

    #[test]
    fn says_it_encrypts() {
        assert!(EncryptedSerializer::from_key(KEY).unwrap().encrypts());
        assert!(!JsonPlusSerializer.encrypts());
        assert!(!EncryptedSerializer::from_key(KEY).unwrap().reads_plaintext());
        assert!(EncryptedSerializer::from_key(KEY)
            .unwrap()
            .allow_plaintext(true)
            .reads_plaintext());
        assert!(JsonPlusSerializer.reads_plaintext());
    }

    /// A transforming wrapper answers for what it stores, not for its inner
    /// serializer (see the `Serializer` trait's docs).
    #[test]
    fn answers_for_the_ciphertext_not_the_inner_serializer() {
        assert!(JsonPlusSerializer.preserves_values());
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        assert!(!s.preserves_values(), "values are stored as ciphertext");
        assert!(!s.clone().allow_plaintext(true).preserves_values());
    }

    #[test]
    fn debug_and_errors_never_show_the_key() {
        let s = EncryptedSerializer::from_key(KEY).unwrap();
        let text = format!("{s:?} {s:#?} {:?}", s.cipher);
        assert!(text.contains("256 bits, redacted"), "{text}");
        let needles: [&[u8]; 3] = [b"0123456789abcdef", b"30313233", b"48, 49, 50"];
        for needle in needles {
            let needle = String::from_utf8_lossy(needle);
            assert!(!text.contains(&*needle), "{needle} in {text}");
        }
        let errors = [
            s.loads_typed("msgpack", b"x").unwrap_err(),
            s.loads_typed("msgpack+aes", &[0u8; 40]).unwrap_err(),
            s.loads_typed("msgpack+aes", &[0u8; 3]).unwrap_err(),
            s.loads_typed("msgpack+rot13", &[0u8; 40]).unwrap_err(),
            EncryptedSerializer::from_key(b"0123456789abcdef0").unwrap_err(),
        ];
        for err in errors {
            let text = format!("{err} {err:?}");
            assert!(!text.contains("0123456789abcdef"), "{text}");
        }
    }
}
