//! Feeds arbitrary bytes to the checkpoint and registry decoders; accepted input must
//! re-encode to itself.
#![no_main]

use fairq_journal::checkpoint::{
    decode_checkpoint, decode_registry, encode_checkpoint, encode_registry,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cp) = decode_checkpoint(data) {
        assert_eq!(encode_checkpoint(&cp), data);
    }
    if let Ok(names) = decode_registry(data) {
        assert_eq!(encode_registry(&names), data);
    }
});
