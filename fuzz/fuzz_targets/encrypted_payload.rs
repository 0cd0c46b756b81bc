//! The encrypted payload reader (`EncryptedSerializer`, fixed key).
//!
//! First byte even: the rest is a stored payload under a tag the byte picks;
//! reading it never panics and succeeds only for a payload that
//! authenticates under the key (plaintext tags are refused; anything short of
//! a forgery of AES-EAX fails authentication).
//! First byte odd: the rest is a msgpack plaintext; its ciphertext (fixed
//! nonce) reads back exactly as the plaintext decodes, and with any one bit
//! flipped it is refused.
#![no_main]

use checkpointer::serde::encrypted::AesEax;
use checkpointer::serde::{msgpack, EncryptedSerializer, Serializer};
use checkpointer::{EncryptionError, Error};
use libfuzzer_sys::fuzz_target;

const KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";
const TAGS: [&str; 6] = [
    "msgpack+aes",
    "null+aes",
    "bytes+aes",
    "msgpack",
    "msgpack+des",
    "json+aes",
];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let serde = EncryptedSerializer::from_key(KEY).expect("32-byte key");
    let cipher = AesEax::new(KEY).expect("32-byte key");
    if mode % 2 == 0 {
        let tag = TAGS[usize::from(mode / 2) % TAGS.len()];
        if serde.loads_typed(tag, rest).is_ok() {
            assert!(tag.ends_with("+aes"), "{tag}: plaintext accepted");
            assert!(cipher.decrypt(rest).is_ok(), "{tag}: unauthenticated payload accepted");
        }
        return;
    }
    let nonce = [mode; 16];
    let sealed = cipher.encrypt_with_nonce(rest, &nonce).expect("encrypt");
    assert_eq!(sealed.len(), rest.len() + 32);
    assert_eq!(cipher.decrypt(&sealed).expect("own ciphertext"), rest);
    match (serde.loads_typed("msgpack+aes", &sealed), msgpack::decode(rest)) {
        (Ok(a), Ok(b)) => assert_eq!(msgpack::encode(&a).ok(), msgpack::encode(&b).ok()),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("decrypted read {a:?} differs from plain decode {b:?}"),
    }
    let bit = rest.iter().fold(usize::from(mode), |h, &b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    }) % (sealed.len() * 8);
    let mut flipped = sealed;
    flipped[bit / 8] ^= 1 << (bit % 8);
    assert!(matches!(
        serde.loads_typed("msgpack+aes", &flipped),
        Err(Error::Encryption(EncryptionError::AuthenticationFailed))
    ));
});
