//! Feeds arbitrary bytes to the checkpoint and registry decoders; accepted input must
//! re-encode to itself (a version 1 checkpoint to the same content in version 2).
#![no_main]

use fairq_journal::checkpoint::{
    decode_checkpoint, decode_registry, encode_checkpoint, encode_registry,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cp) = decode_checkpoint(data) {
        let again = encode_checkpoint(&cp);
        if data[8] == 2 {
            assert_eq!(again, data);
        }
        assert_eq!(decode_checkpoint(&again).unwrap(), cp);
    }
    if let Ok(names) = decode_registry(data) {
        assert_eq!(encode_registry(&names), data);
    }
});
