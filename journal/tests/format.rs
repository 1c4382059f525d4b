//! The golden test vectors in FORMAT.md match what the encoders produce and decode back.

use fairq_journal::checkpoint::{
    decode_checkpoint, decode_registry, decode_tail, encode_checkpoint, encode_registry,
    encode_tail, Checkpoint,
};
use fairq_journal::format::{
    decode_record, decode_segment_header, encode_record, encode_segment_header, Record, RecordKind,
    SegmentHeader,
};

const FORMAT_MD: &str = include_str!("../FORMAT.md");

/// The bytes of the fenced block tagged `golden:<name>` in FORMAT.md.
fn golden(name: &str) -> Vec<u8> {
    let tag = format!("```golden:{name}\n");
    let start = FORMAT_MD
        .find(&tag)
        .unwrap_or_else(|| panic!("FORMAT.md has no block {tag:?}"))
        + tag.len();
    let end = start + FORMAT_MD[start..].find("```").expect("unterminated block");
    FORMAT_MD[start..end]
        .split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
        .collect()
}

#[test]
fn segment_header_matches_golden_vector() {
    let mut buf = Vec::new();
    encode_segment_header(
        &SegmentHeader {
            segment_id: 1,
            prev_unsynced: false,
        },
        &mut buf,
    );
    assert_eq!(buf, golden("header"));
    assert_eq!(decode_segment_header(&buf).unwrap().segment_id, 1);
    let mut flagged = Vec::new();
    encode_segment_header(
        &SegmentHeader {
            segment_id: 2,
            prev_unsynced: true,
        },
        &mut flagged,
    );
    assert_eq!(flagged, golden("header-flagged"));
    assert!(decode_segment_header(&flagged).unwrap().prev_unsynced);
}

#[test]
fn record_matches_golden_vector() {
    let rec = Record {
        kind: RecordKind::Item,
        id: 1,
        added_at_ms: 1_700_000_000_000,
        expires_at_ms: Some(1_700_000_060_000),
        payload: b"hello",
    };
    let mut buf = Vec::new();
    encode_record(&rec, &mut buf);
    let expected = golden("record");
    assert_eq!(buf, expected);
    let (decoded, used) = decode_record(&expected).unwrap();
    assert_eq!(decoded, rec);
    assert_eq!(used, expected.len());
    // The documented layout: len field = 28 + payload, CRC over len + body.
    assert_eq!(u32::from_le_bytes(expected[0..4].try_into().unwrap()), 33);
    let mut crc_input = expected[0..4].to_vec();
    crc_input.extend_from_slice(&expected[8..]);
    assert_eq!(
        u32::from_le_bytes(expected[4..8].try_into().unwrap()),
        crc32c::crc32c(&crc_input)
    );
}

#[test]
fn checkpoint_and_registry_match_golden_vectors() {
    let cp = Checkpoint {
        head: 3,
        head_segment: 2,
        tail_segment: 4,
        done: vec![5],
        errors: vec![(4, 2)],
    };
    assert_eq!(encode_checkpoint(&cp), golden("checkpoint"));
    assert_eq!(decode_checkpoint(&golden("checkpoint")).unwrap(), cp);
    // Version 2 files (written before the tail segment was kept) still read.
    let v2 = Checkpoint {
        tail_segment: 0,
        ..cp.clone()
    };
    assert_eq!(decode_checkpoint(&golden("checkpoint-v2")).unwrap(), v2);
    // Version 1 files (written before error counts and head segments were kept) still read.
    let v1 = Checkpoint {
        head: 3,
        head_segment: 0,
        tail_segment: 0,
        done: vec![5],
        errors: vec![],
    };
    assert_eq!(decode_checkpoint(&golden("checkpoint-v1")).unwrap(), v1);
    let names = vec!["a".to_string()];
    assert_eq!(encode_registry(&names), golden("registry"));
    assert_eq!(decode_registry(&golden("registry")).unwrap(), names);
    assert_eq!(encode_tail(5), golden("tail"));
    assert_eq!(decode_tail(&golden("tail")).unwrap(), 5);
    let mut damaged = golden("tail");
    damaged[12] ^= 1;
    assert!(decode_tail(&damaged).is_err());
    assert!(decode_tail(&golden("tail")[..20]).is_err());
}
