//! Feeds arbitrary bytes to the segment header and record decoders, and checks that an
//! accepted record re-encodes to the bytes it was decoded from.
#![no_main]

use fairq_journal::format::{decode_record, decode_segment_header, encode_record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_segment_header(data);
    let mut at = 0;
    while at < data.len() {
        match decode_record(&data[at..]) {
            Ok((rec, used)) => {
                let mut again = Vec::new();
                encode_record(&rec, &mut again);
                assert_eq!(&again[..], &data[at..at + used]);
                at += used;
            }
            Err(_) => at += 1,
        }
    }
});
