//! Checkpoint ids (uuid6 with the step as clock sequence) and timestamps
//! (see `docs/design.md`, *Versions and ids*).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use uuid::Uuid;

/// 100-ns ticks between 1582-10-15 (the uuid epoch) and 1970-01-01.
const UUID_EPOCH_OFFSET: u64 = 0x01B2_1DD2_1381_4000;

static LAST_TICKS: AtomicU64 = AtomicU64::new(0);

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Builds a uuid6 from a timestamp in 100-ns uuid ticks, a clock sequence
/// (only its low 14 bits are used, so `-1` becomes `0x3fff`) and a 48-bit node.
pub fn uuid6_from_ticks(ticks: u64, clock_seq: i64, node: u64) -> Uuid {
    let time_high = (ticks >> 12) & 0xFFFF_FFFF_FFFF;
    let time_low = ticks & 0x0FFF;
    let seq = (clock_seq as u64) & 0x3FFF;
    let v: u128 = (u128::from(time_high) << 80)
        | (0x6u128 << 76)
        | (u128::from(time_low) << 64)
        | (0b10u128 << 62)
        | (u128::from(seq) << 48)
        | u128::from(node & 0xFFFF_FFFF_FFFF);
    Uuid::from_u128(v)
}

/// A uuid6 for the current time, strictly greater (in ticks) than every other
/// id this process generated, even when the system clock steps back.
pub fn uuid6(clock_seq: i64, node: Option<u64>) -> Uuid {
    let ticks = next_ticks(now_ns() / 100 + UUID_EPOCH_OFFSET);
    uuid6_from_ticks(ticks, clock_seq, node.unwrap_or_else(rand::random::<u64>))
}

fn next_ticks(candidate: u64) -> u64 {
    let mut last = LAST_TICKS.load(Ordering::Relaxed);
    loop {
        let ticks = if candidate <= last { last + 1 } else { candidate };
        match LAST_TICKS.compare_exchange_weak(last, ticks, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return ticks,
            Err(seen) => last = seen,
        }
    }
}

/// A new checkpoint id for a checkpoint of `step` (LangGraph passes the step as
/// clock sequence: step -1 gives `…-bfff-…`, step 0 `…-8000-…`).
///
/// ```
/// let a = checkpointer::id::checkpoint_id(0);
/// let b = checkpointer::id::checkpoint_id(0);
/// assert!(a < b);
/// assert_eq!(&a[19..23], "8000");
/// ```
pub fn checkpoint_id(step: i64) -> String {
    uuid6(step, None).to_string()
}

/// The current UTC time as Python's `datetime.now(UTC).isoformat()`:
/// `2026-11-29T14:05:11.101486+00:00`, the fraction omitted when zero.
pub fn now_iso() -> String {
    iso_from_unix_micros((now_ns() / 1000) as i64)
}

/// Formats microseconds since the Unix epoch as Python's UTC `isoformat()`.
pub fn iso_from_unix_micros(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (sod / 3600, (sod % 3600) / 60, sod % 60);
    if frac == 0 {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}+00:00")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{frac:06}+00:00")
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_714_804_362_235_444_000;

    fn ticks() -> u64 {
        T / 100 + UUID_EPOCH_OFFSET
    }

    #[test]
    fn spec_vectors() {
        assert_eq!(
            uuid6_from_ticks(ticks(), 1, 0x8a15_03f9_b875).to_string(),
            "1ef09e01-c354-6e08-8001-8a1503f9b875"
        );
        assert_eq!(
            uuid6_from_ticks(ticks(), -1, 0x0123_4567_89ab).to_string(),
            "1ef09e01-c354-6e08-bfff-0123456789ab"
        );
        assert_eq!(
            uuid6_from_ticks(ticks(), -2, 0).to_string(),
            "1ef09e01-c354-6e08-bffe-000000000000"
        );
        assert_eq!(
            uuid6_from_ticks(ticks(), 0, 1).to_string(),
            "1ef09e01-c354-6e08-8000-000000000001"
        );
        assert_eq!(
            uuid6_from_ticks(ticks() + 1, 0, 1).to_string(),
            "1ef09e01-c354-6e09-8000-000000000001"
        );
    }

    #[test]
    fn strictly_increasing_even_when_clock_repeats_or_steps_back() {
        let a = next_ticks(ticks() + 1_000_000_000);
        let b = next_ticks(ticks() + 1_000_000_000);
        let c = next_ticks(ticks());
        assert!(b > a && c > b);
        let ids: Vec<String> = (0..10_000).map(|_| checkpoint_id(3)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids.iter().all(|id| &id[14..15] == "6" && &id[19..23] == "8003"));
    }

    #[test]
    fn iso_format_matches_python() {
        assert_eq!(
            iso_from_unix_micros(1_714_804_362_235_444),
            "2024-05-04T06:32:42.235444+00:00"
        );
        assert_eq!(iso_from_unix_micros(1_704_164_645_000_000), "2024-01-02T03:04:05+00:00");
        assert_eq!(iso_from_unix_micros(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(
            iso_from_unix_micros(951_782_400_000_001),
            "2000-02-29T00:00:00.000001+00:00"
        );
    }
}
