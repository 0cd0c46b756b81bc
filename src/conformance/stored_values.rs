//! Values at the edges through the public API (`docs/reliability.md`, rows
//! B12–B20, B75): 100 MB values, nesting near the limit, NaN, U+0000,
//! extreme integers, odd map keys and version counters beyond 64 bits, all
//! read back exactly on every backend.

use super::identifiers::{put_values, same, value_of, ID1};
use super::*;

/// Puts `values` in a fresh thread and reads them back exactly (bit for bit).
async fn round_trip(s: &dyn CheckpointSaver, values: &[(&str, Value)], write: Option<Value>) -> CheckResult {
    let stored = put_values(s, &generate_config(&new_thread_id()), ID1, values).await?;
    if let Some(w) = &write {
        put_writes(s, &stored, &[("w", w.clone())], "task", "").await?;
    }
    let got = get(s, &stored).await?;
    for (ch, v) in values {
        let read = value_of(&got, ch)?;
        ensure!(same(&read, v), "channel {ch:?} read back differs");
    }
    if let Some(w) = write {
        let read = got.pending_writes.first().map(|p| &p.value);
        ensure!(read.is_some_and(|r| same(r, &w)), "the write read back differs");
    }
    Ok(())
}

/// B12: a 100 MB binary channel value is read back identical.
pub async fn put_value_100_mb_binary_round_trips(s: &dyn CheckpointSaver) -> CheckResult {
    let big: Vec<u8> = (0..100 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    round_trip(s, &[("big", Value::Bin(big.into()))], None).await
}

/// B13: a 100 MB string value (non-ASCII, U+0000) is read back identical.
pub async fn put_value_100_mb_string_round_trips(s: &dyn CheckpointSaver) -> CheckResult {
    round_trip(s, &[("big", Value::from("é\u{0}x".repeat(25 << 20)))], None).await
}

/// B14: a value nested 120 levels, as a channel value and as a write, is
/// stored and read back.
pub async fn put_nesting_120_levels_round_trips(s: &dyn CheckpointSaver) -> CheckResult {
    let value = super::limits::nested(120);
    round_trip(s, &[("deep", value.clone())], Some(value)).await
}

/// B16: NaN, ±infinity and −0.0 in values and writes are read back bit for
/// bit.
pub async fn put_nan_infinity_negative_zero_round_trip(s: &dyn CheckpointSaver) -> CheckResult {
    let values = [
        ("nan", Value::Float(f64::NAN)),
        ("inf", Value::Float(f64::INFINITY)),
        ("ninf", Value::Float(f64::NEG_INFINITY)),
        ("nzero", Value::Float(-0.0)),
        (
            "nested",
            Value::Array(vec![Value::Float(f64::NAN), Value::Float(f64::INFINITY)].into()),
        ),
    ];
    round_trip(s, &values, Some(Value::Float(f64::NAN))).await
}

/// B18: U+0000 in string values (top level, a nested key and value, a
/// write) is read back exactly.
pub async fn put_nul_in_values_round_trips(s: &dyn CheckpointSaver) -> CheckResult {
    let values = [
        ("inline", Value::from("a\0b")),
        ("only_nul", Value::from("\0")),
        ("nested", Value::map([("k\0", Value::from("\0v"))])),
    ];
    round_trip(s, &values, Some(Value::from("\0"))).await
}

/// B19: `i64::MIN`, `i64::MAX` and `u64::MAX` are read back exactly.
pub async fn put_extreme_integers_round_trip(s: &dyn CheckpointSaver) -> CheckResult {
    let values = [
        ("min", Value::Int(i64::MIN)),
        ("max", Value::Int(i64::MAX)),
        ("umax", Value::UInt(u64::MAX)),
    ];
    round_trip(s, &values, None).await
}

/// B20: maps with integer, nil, duplicate and array keys are read back in
/// order, duplicates kept.
pub async fn put_odd_map_keys_round_trip(s: &dyn CheckpointSaver) -> CheckResult {
    let value = Value::Map(
        (vec![
            (Value::Int(1), Value::from("int key")),
            (Value::Nil, Value::from("nil key")),
            (Value::from("a"), Value::Int(1)),
            (Value::from("a"), Value::Int(2)),
            (
                Value::Array(vec![Value::Int(1), Value::Int(2)].into()),
                Value::from("tuple key"),
            ),
        ])
        .into(),
    );
    round_trip(s, &[("m", value)], None).await
}

/// B75: `get_next_version` keeps counting in decimal beyond 64 bits (never
/// back to 1, no overflow), and a channel written at such a version reads
/// back with it.
pub async fn put_version_counters_beyond_64_bits(s: &dyn CheckpointSaver) -> CheckResult {
    let head = |v: &ChannelVersion| v.to_string().split_once('.').map(|(h, _)| h.to_owned());
    let twenty = ChannelVersion::from("00000000000009999999999999999999.0.5");
    for (current, next) in [
        (twenty.clone(), "00000000000010000000000000000000"),
        (ChannelVersion::Int(i64::MAX), "00000000000009223372036854775808"),
    ] {
        let got = s.get_next_version(Some(&current))?;
        ensure_eq!(head(&got).as_deref(), Some(next), "the version after {current}");
    }
    let version = s.get_next_version(Some(&twenty))?;
    let mut cp = checkpoint_with(&[("x", Value::Int(1))], &[("x", version.clone())]);
    cp.id = ID1.to_owned();
    let stored = put_all(
        s,
        &generate_config(&new_thread_id()),
        &cp,
        &generate_metadata("loop", 0),
    )
    .await?;
    let got = get(s, &stored).await?;
    ensure_eq!(
        got.checkpoint.channel_versions.get("x"),
        Some(&version),
        "version read back"
    );
    ensure_eq!(value_of(&got, "x")?, Value::Int(1), "value read back");
    Ok(())
}
