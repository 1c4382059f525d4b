//! Every checkpoint the journal writes reads back: no limit on reading is lower than what
//! the writer produces.

use fairq_journal::checkpoint::{decode_checkpoint, encode_checkpoint, Checkpoint};

/// One open read left unfinished while the reader goes on makes every later commit an
/// out-of-order id. Past 2^24 of them a broken reader refuses the checkpoint the writer
/// wrote (`BadLength`), so at the next open the reader restarts from the oldest item and
/// delivers millions of finished items again.
#[test]
fn a_checkpoint_with_more_than_2_24_out_of_order_ids_reads_back() {
    let cp = Checkpoint {
        head: 1,
        head_segment: 1,
        tail_segment: 1,
        done: (2..=(1u64 << 24) + 2).collect(),
        errors: vec![(1, 3)],
    };
    let bytes = encode_checkpoint(&cp);
    assert_eq!(bytes.len(), 48 + 8 * cp.done.len() + 12);
    let back = decode_checkpoint(&bytes);
    assert!(back.is_ok(), "written but unreadable: {:?}", back.err());
    assert!(back.unwrap() == cp);
}
