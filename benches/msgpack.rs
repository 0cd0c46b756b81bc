//! Criterion benches for the msgpack codec: what SQLite and Postgres reads
//! spend most of their time in (decoding a stored checkpoint into `Value`s).
//!
//! `cargo bench -p checkpointer-benches --bench msgpack`
//!
//! The value is the `messages` channel of the reference workload
//! (`../shared/peer/WORKLOAD.md` §2) after 10 and 100 steps: a list of maps
//! with three string entries (role, a 150-character content, an id), about
//! 190 bytes each in msgpack. `decode_and_drop` includes freeing the result,
//! as a reader that consumes a checkpoint pays it; it decodes a `&[u8]`
//! (copied once into a shared buffer). `decode_bytes_and_drop` decodes the
//! row's `Bytes`, as the savers do, slicing its long strings out of it.
//!
//! For instruction counts, which stay the same from run to run where wall
//! times on a shared machine do not, `MSGPACK_LOOP=<encode|decode|decode_bytes>`
//! runs that operation 1 000 times on the 100-message value instead of criterion:
//!
//! ```text
//! MSGPACK_LOOP=encode valgrind --tool=callgrind --toggle-collect='msgpack::run_loop' \
//!     target/release/deps/msgpack-<hash>
//! ```

use std::hint::black_box;

use bytes::Bytes;
use checkpointer::serde::msgpack::{decode, decode_bytes, encode};
use checkpointer::Value;
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};

fn message(s: usize) -> Value {
    let content: String = (0..150)
        .map(|i| char::from(b"0123456789abcdef"[(s * 7 + i * 13) % 16]))
        .collect();
    Value::map([
        ("role", Value::from(if s % 2 == 0 { "user" } else { "assistant" })),
        ("content", Value::from(content)),
        ("id", Value::from(format!("msg-00042-{s:05}"))),
    ])
}

fn messages(n: usize) -> Value {
    Value::from((0..n).map(message).collect::<Vec<_>>())
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("msgpack");
    for n in [10_usize, 100] {
        let value = messages(n);
        let bytes = encode(&value).unwrap();
        assert_eq!(decode(&bytes).unwrap(), value);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("decode_and_drop", n), &bytes, |b, bytes| {
            b.iter(|| drop(black_box(decode(black_box(bytes)).unwrap())))
        });
        let shared = Bytes::from(bytes.clone());
        group.bench_with_input(BenchmarkId::new("decode_bytes_and_drop", n), &shared, |b, shared| {
            b.iter(|| drop(black_box(decode_bytes(black_box(shared)).unwrap())))
        });
        group.bench_with_input(BenchmarkId::new("encode", n), &value, |b, value| {
            b.iter(|| black_box(encode(black_box(value)).unwrap()))
        });
    }
    group.finish();
}

/// 1 000 encodes or decodes (with drop) of the 100-message value.
#[inline(never)]
fn run_loop(op: &str, value: &Value, bytes: &[u8]) {
    let shared = Bytes::copy_from_slice(bytes);
    for _ in 0..1_000 {
        match op {
            "encode" => drop(black_box(encode(black_box(value)).unwrap())),
            "decode_bytes" => drop(black_box(decode_bytes(black_box(&shared)).unwrap())),
            _ => drop(black_box(decode(black_box(bytes)).unwrap())),
        }
    }
}

criterion_group!(msgpack, benches);

fn main() {
    match std::env::var("MSGPACK_LOOP") {
        Ok(op) => {
            assert!(
                ["encode", "decode", "decode_bytes"].contains(&op.as_str()),
                "MSGPACK_LOOP is encode, decode or decode_bytes, not {op:?}"
            );
            let value = messages(100);
            let bytes = encode(&value).unwrap();
            run_loop(&op, &value, &bytes);
        }
        Err(_) => {
            msgpack();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}
