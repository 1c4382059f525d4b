//! Models of the journal's reader doorbell (`fairq-journal/src/wake.rs`): a put publishes an
//! item and rings only if the atomic waiter count is non-zero; a waiting reader registers,
//! reads the generation, looks for an item and sleeps. A lost wake-up would leave the reader
//! asleep forever, which loom reports as a deadlock.
#![cfg(loom)]

mod common;

use std::time::Duration;

use common::model;
use fairq_journal::model::Doorbell;
use loom::sync::atomic::{fence, AtomicU64, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// Under loom a condition variable never times out.
const FOREVER: Duration = Duration::from_secs(3600);

/// The reader's loop of `Reader::get_timeout`, looking at a slot guarded by a mutex (the
/// segment index in the journal).
fn wait_for(bell: &Doorbell, slot: &Mutex<Vec<u32>>) -> u32 {
    let _registered = bell.enter();
    loop {
        let seen = bell.generation();
        if let Some(item) = slot.lock().unwrap().pop() {
            return item;
        }
        bell.wait(seen, FOREVER, || false);
    }
}

fn publish(bell: &Doorbell, slot: &Mutex<Vec<u32>>, item: u32) {
    slot.lock().unwrap().push(item);
    bell.ring();
}

/// One put races one waiting reader: the reader always gets the item.
#[test]
fn a_put_always_wakes_a_waiting_reader() {
    model(|| {
        let bell = Arc::new(Doorbell::new());
        let slot = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let (bell, slot) = (Arc::clone(&bell), Arc::clone(&slot));
            thread::spawn(move || wait_for(&bell, &slot))
        };
        publish(&bell, &slot, 7);
        assert_eq!(reader.join().unwrap(), 7);
    });
}

/// A put under `Never`, `Periodic` or `Always` publishes its end with one `SeqCst` store and
/// no lock (`Visible` in `fairq-journal/src/state.rs`) and then rings; the reader counts
/// itself a waiter and then reads the end. The waiting reader still always wakes.
///
/// The journal relies on the single total order of `SeqCst` accesses there (C++20
/// [atomics.order]: the end's store, the waiter count's load, its increment and the end's
/// load cannot all miss each other). Loom treats `SeqCst` accesses as `AcqRel`, without that
/// order, so the model puts in the `SeqCst` fences that stand for it; without them loom
/// reports the reader asleep forever.
#[test]
fn a_put_published_without_a_lock_always_wakes_a_waiting_reader() {
    model(|| {
        let bell = Arc::new(Doorbell::new());
        let end = Arc::new(AtomicU64::new(0));
        let reader = {
            let (bell, end) = (Arc::clone(&bell), Arc::clone(&end));
            thread::spawn(move || {
                let _registered = bell.enter();
                fence(Ordering::SeqCst);
                loop {
                    let seen = bell.generation();
                    let at = end.load(Ordering::SeqCst);
                    if at > 0 {
                        return at;
                    }
                    bell.wait(seen, FOREVER, || false);
                }
            })
        };
        end.store(7, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        bell.ring();
        assert_eq!(reader.join().unwrap(), 7);
    });
}

/// Two readers, two puts from two threads: both readers get one item each.
#[test]
fn two_puts_wake_two_readers() {
    model(|| {
        let bell = Arc::new(Doorbell::new());
        let slot = Arc::new(Mutex::new(Vec::new()));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (bell, slot) = (Arc::clone(&bell), Arc::clone(&slot));
                thread::spawn(move || wait_for(&bell, &slot))
            })
            .collect();
        let other = {
            let (bell, slot) = (Arc::clone(&bell), Arc::clone(&slot));
            thread::spawn(move || publish(&bell, &slot, 1))
        };
        publish(&bell, &slot, 2);
        other.join().unwrap();
        let mut got: Vec<u32> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, vec![1, 2]);
    });
}

/// Closing (an unconditional ring with a stop flag) wakes a reader that waits for nothing.
#[test]
fn closing_wakes_a_reader_with_nothing_to_read() {
    model(|| {
        let bell = Arc::new(Doorbell::new());
        let closed = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (bell, closed) = (Arc::clone(&bell), Arc::clone(&closed));
            thread::spawn(move || {
                let _registered = bell.enter();
                loop {
                    let seen = bell.generation();
                    if closed.load(loom::sync::atomic::Ordering::Acquire) {
                        return;
                    }
                    bell.wait(seen, FOREVER, || {
                        closed.load(loom::sync::atomic::Ordering::Acquire)
                    });
                }
            })
        };
        closed.store(true, loom::sync::atomic::Ordering::Release);
        bell.ring_always();
        reader.join().unwrap();
    });
}
