//! The decoders return errors, never panic, on arbitrary bytes; and whatever they accept
//! re-encodes to the same bytes.

use fairq_journal::checkpoint::{
    decode_checkpoint, decode_registry, encode_checkpoint, encode_registry,
};
use fairq_journal::format::{
    decode_record, decode_segment_header, encode_record, encode_record_header,
    encode_segment_header,
};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn record_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok((rec, used)) = decode_record(&bytes) {
            let mut again = Vec::new();
            encode_record(&rec, &mut again);
            prop_assert_eq!(&again[..], &bytes[..used]);
        }
    }

    /// The header encoded apart (written with the caller's slice by `writev`) and the whole
    /// record encoded at once (one buffer) are the same bytes, appended after anything, and
    /// decode to the record.
    #[test]
    fn record_encoders_agree(
        prefix in proptest::collection::vec(any::<u8>(), 0..16),
        payload in proptest::collection::vec(any::<u8>(), 0..5000),
        id in any::<u64>(),
        added_at_ms in any::<u64>(),
        expires_at_ms in proptest::option::of(any::<u64>()),
    ) {
        let rec = fairq_journal::format::Record {
            kind: fairq_journal::format::RecordKind::Item,
            id,
            added_at_ms,
            expires_at_ms,
            payload: &payload,
        };
        let mut whole = prefix.clone();
        encode_record(&rec, &mut whole);
        let mut parts = prefix.clone();
        parts.extend_from_slice(&encode_record_header(&rec));
        parts.extend_from_slice(&payload);
        prop_assert_eq!(&whole, &parts);
        let (back, used) = decode_record(&whole[prefix.len()..]).unwrap();
        prop_assert_eq!(back, rec);
        prop_assert_eq!(used, whole.len() - prefix.len());
    }

    #[test]
    fn record_decoder_on_mutated_valid_records(
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        id in any::<u64>(),
        expiry in proptest::option::of(any::<u64>()),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut buf = Vec::new();
        encode_record(&fairq_journal::format::Record {
            kind: fairq_journal::format::RecordKind::Item,
            id,
            added_at_ms: 5,
            expires_at_ms: expiry,
            payload: &payload,
        }, &mut buf);
        let mut damaged = buf.clone();
        for (at, bit) in &flips {
            let i = at.index(damaged.len());
            damaged[i] ^= 1 << bit;
        }
        if damaged != buf {
            prop_assert!(decode_record(&damaged).is_err(), "damage accepted");
        }
        let cut = cut.index(buf.len());
        prop_assert!(decode_record(&buf[..cut]).is_err());
    }

    #[test]
    fn header_checkpoint_and_registry_decoders_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        if let Ok(h) = decode_segment_header(&bytes) {
            let mut again = Vec::new();
            encode_segment_header(&h, &mut again);
            prop_assert_eq!(&again[..], &bytes[..again.len()]);
        }
        if let Ok(cp) = decode_checkpoint(&bytes) {
            // Version 3 files re-encode to themselves; older ones are read and rewritten as
            // version 3 with the same content.
            let again = encode_checkpoint(&cp);
            if bytes[8] == 3 {
                prop_assert_eq!(&again, &bytes);
            }
            prop_assert_eq!(decode_checkpoint(&again).unwrap(), cp);
        }
        if let Ok(names) = decode_registry(&bytes) {
            prop_assert_eq!(encode_registry(&names), bytes.clone());
        }
    }

    #[test]
    fn decoders_never_panic_on_plausible_prefixes(
        magic in prop_oneof![Just(&b"FAIRQCKP"[..]), Just(&b"FAIRQRDR"[..]), Just(&b"FAIRQJNL"[..])],
        version in 1u8..=3,
        rest in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        // Random bytes rarely get past the magic; start from it so the later checks run.
        let mut bytes = magic.to_vec();
        bytes.extend_from_slice(&[version, 0, 0, 0]);
        bytes.extend_from_slice(&rest);
        let n = bytes.len();
        if n >= 4 {
            let crc = crc32c::crc32c(&bytes[..n - 4]);
            bytes[n - 4..].copy_from_slice(&crc.to_le_bytes());
        }
        if let Ok(cp) = decode_checkpoint(&bytes) {
            prop_assert_eq!(decode_checkpoint(&encode_checkpoint(&cp)).unwrap(), cp);
        }
        let _ = decode_registry(&bytes);
        let _ = decode_segment_header(&bytes);
    }
}
