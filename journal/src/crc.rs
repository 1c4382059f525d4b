//! CRC32C (the Castagnoli polynomial, also called CRC-32/ISCSI): the checksum of records,
//! segment headers, checkpoints and the other small files (`FORMAT.md`).
//!
//! Computed by `crc-fast`, which folds with carry-less multiplication next to the CPU's own
//! CRC32C instruction: about 40 ns for a 1 KiB record and 100 ns for 4 KiB on a machine
//! with AVX-512, against 65 and 200 ns with the CRC32C instruction alone. Every put
//! checksums its record and every get verifies one, so this is on both paths.
//!
//! Without AVX-512 (many virtual machines hide it), `crc-fast` folds 16 bytes at a time
//! and computes a shift constant for every input over 256 bytes. There the `crc32c` crate
//! (the CRC32C instruction in three streams, combined by tables) is faster for long
//! inputs: on a 2-vCPU AMD EPYC without AVX-512, 88 against 112 ns for 1,060 bytes and
//! 3.5 against 4.8 µs for 64 KiB, while `crc-fast` stays ahead at 164 bytes (18 against
//! 23 ns). So inputs over [`LONG`] bytes go to `crc32c` on x86-64 processors with SSE 4.2
//! and without AVX-512; everything else to `crc-fast`. Both compute the same checksum
//! (tested below against each other on every length and split).
//!
//! ```
//! use fairq_journal::format::{decode_record, encode_record, Record, RecordKind};
//! // Whatever computes it, the checksum is the one FORMAT.md names: the record round-trips.
//! let rec = Record {
//!     kind: RecordKind::Item,
//!     id: 1,
//!     added_at_ms: 2,
//!     expires_at_ms: None,
//!     payload: b"abc",
//! };
//! let mut buf = Vec::new();
//! encode_record(&rec, &mut buf);
//! assert_eq!(decode_record(&buf).unwrap().0, rec);
//! ```

use crc_fast::{CrcAlgorithm, Digest};

/// Inputs longer than this go to the `crc32c` crate where [`streams_win`] says so; up to
/// it, `crc-fast` computes no shift constant and is the faster of the two everywhere.
const LONG: usize = 256;

/// Whether the CRC32C instruction in three streams (`crc32c`) beats `crc-fast` on long
/// inputs here: an x86-64 processor with SSE 4.2 but without AVX-512 (`crc-fast`'s wide
/// folding needs `avx512vl`). The standard library caches the answer; a test is one load.
#[inline]
fn streams_win() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("sse4.2")
            && !std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CRC32C of `data`.
#[inline]
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    if data.len() > LONG && streams_win() {
        return ::crc32c::crc32c(data);
    }
    // A 32-bit checksum: the upper half of the result is zero.
    crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data) as u32
}

#[cfg(test)]
thread_local! {
    /// Bytes of record bodies checksummed on this thread (unit tests only): lets a test
    /// tell how much checksumming a search through damaged bytes did.
    pub(crate) static PAIR_BYTES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The CRC32C of `a` followed by `b`: for a record, whose checksum covers its length field
/// and then its body, which the checksum field lies between.
#[inline]
pub(crate) fn crc32c_pair(a: &[u8], b: &[u8]) -> u32 {
    #[cfg(test)]
    PAIR_BYTES.with(|n| n.set(n.get() + (a.len() + b.len()) as u64));
    if b.len() > LONG && streams_win() {
        return ::crc32c::crc32c_append(::crc32c::crc32c(a), b);
    }
    let mut digest = Digest::new(CrcAlgorithm::Crc32Iscsi);
    digest.update(a);
    digest.update(b);
    digest.finalize() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_check_value_of_crc32c() {
        // The catalogue's check value: the CRC of the nine ASCII digits.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c_pair(b"1234", b"56789"), 0xE306_9283);
    }

    proptest! {
        /// Every length from empty to a few KiB (the folding paths change at 16, 64, 128,
        /// 256 bytes and more), every alignment, and any split into two parts agree with the
        /// reference implementation of the same checksum.
        #[test]
        fn matches_the_reference(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            offset in 0usize..16,
            split in any::<prop::sample::Index>(),
        ) {
            let data = &data[offset.min(data.len())..];
            let reference = crc32c::crc32c(data);
            prop_assert_eq!(crc32c(data), reference);
            // Both implementations, whichever this processor's inputs go to.
            let fast = crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data) as u32;
            prop_assert_eq!(fast, reference);
            let at = split.index(data.len() + 1);
            let (a, b) = data.split_at(at);
            prop_assert_eq!(crc32c_pair(a, b), reference);
            let mut digest = Digest::new(CrcAlgorithm::Crc32Iscsi);
            digest.update(a);
            digest.update(b);
            prop_assert_eq!(digest.finalize() as u32, reference);
            prop_assert_eq!(crc32c::crc32c_append(crc32c::crc32c(a), b), reference);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Large records (the wide folding loops, and their tails) agree too.
        #[test]
        fn matches_the_reference_on_large_records(
            data in proptest::collection::vec(any::<u8>(), 5000..140_000),
            split in any::<prop::sample::Index>(),
        ) {
            let reference = crc32c::crc32c(&data);
            prop_assert_eq!(crc32c(&data), reference);
            let fast = crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, &data) as u32;
            prop_assert_eq!(fast, reference);
            let (a, b) = data.split_at(split.index(data.len() + 1));
            prop_assert_eq!(crc32c_pair(a, b), reference);
            prop_assert_eq!(crc32c::crc32c_append(crc32c::crc32c(a), b), reference);
        }
    }
}
