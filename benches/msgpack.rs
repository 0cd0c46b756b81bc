//! Criterion benches for the msgpack codec: what SQLite and Postgres reads
//! spend most of their time in (decoding a stored checkpoint into `Value`s).
//!
//! `cargo bench --bench msgpack`
//!
//! The value is the `messages` channel of the reference workload
//! (`../shared/peer/WORKLOAD.md` §2) after 10 and 100 steps: a list of maps
//! with three string entries (role, a 150-character content, an id), about
//! 190 bytes each in msgpack. `decode_and_drop` includes freeing the result,
//! as a reader that consumes a checkpoint pays it.

use std::hint::black_box;

use checkpointer::serde::msgpack::{decode, encode};
use checkpointer::Value;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

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

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("msgpack");
    for n in [10_usize, 100] {
        let value = Value::from((0..n).map(message).collect::<Vec<_>>());
        let bytes = encode(&value).unwrap();
        assert_eq!(decode(&bytes).unwrap(), value);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("decode_and_drop", n), &bytes, |b, bytes| {
            b.iter(|| drop(black_box(decode(black_box(bytes)).unwrap())))
        });
        group.bench_with_input(BenchmarkId::new("encode", n), &value, |b, value| {
            b.iter(|| black_box(encode(black_box(value)).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(msgpack, benches);
criterion_main!(msgpack);
