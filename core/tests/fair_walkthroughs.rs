//! The three walkthroughs of the fair queue's original description, step by step, with the
//! internal state (pending snapshot and per-key backlog) checked after every step.
#![cfg(feature = "alloc")]

use fairq_core::fair::FairQueue;

type Q = FairQueue<&'static str, &'static str>;

fn snapshot(q: &Q) -> Vec<(&'static str, &'static str)> {
    q.snapshot().map(|(k, v)| (*k, *v)).collect()
}

fn backlog(q: &Q) -> Vec<(&'static str, Vec<&'static str>)> {
    q.backlog()
        .into_iter()
        .map(|(k, items)| (*k, items.into_iter().copied().collect()))
        .collect()
}

#[test]
fn first_walkthrough_heads_are_delivered_first() {
    let mut q = Q::new();
    q.push("alice", "1").unwrap();
    q.push("alice", "2").unwrap();
    q.push("alice", "3").unwrap();
    q.push("bob", "x").unwrap();
    assert_eq!(snapshot(&q), []);
    assert_eq!(
        backlog(&q),
        [("alice", vec!["1", "2", "3"]), ("bob", vec!["x"])]
    );

    assert_eq!(q.pop_with_key(), Some(("alice", "1")));
    assert_eq!(snapshot(&q), [("bob", "x")]);
    assert_eq!(backlog(&q), [("alice", vec!["2", "3"])]);
    assert_eq!(q.pop_with_key(), Some(("bob", "x")));
    assert_eq!(q.pop_with_key(), Some(("alice", "2")));
    assert_eq!(q.pop_with_key(), Some(("alice", "3")));
    assert_eq!(q.pop_with_key(), None);
    assert!(q.is_empty());
}

#[test]
fn second_walkthrough_pushes_during_a_snapshot_wait_behind_it() {
    let mut q = Q::new();
    q.push("alice", "1").unwrap();
    q.push("bob", "x").unwrap();
    assert_eq!(q.pop(), Some("1"));
    assert_eq!(snapshot(&q), [("bob", "x")]);
    assert_eq!(backlog(&q), []);
    q.push("alice", "2").unwrap();
    assert_eq!(snapshot(&q), [("bob", "x")]);
    assert_eq!(backlog(&q), [("alice", vec!["2"])]);
    q.push("alice", "3").unwrap();
    assert_eq!(backlog(&q), [("alice", vec!["2", "3"])]);
    assert_eq!(q.pop(), Some("x"));
    assert_eq!(q.pop(), Some("2"));
    assert_eq!(q.pop(), Some("3"));
    assert_eq!(q.pop(), None);
}

#[test]
fn third_walkthrough_matches_every_internal_state() {
    let mut q = Q::new();
    // alice: 1
    q.push("alice", "1").unwrap();
    assert_eq!(snapshot(&q), []);
    assert_eq!(backlog(&q), [("alice", vec!["1"])]);
    // alice: 1; bob: x
    q.push("bob", "x").unwrap();
    assert_eq!(backlog(&q), [("alice", vec!["1"]), ("bob", vec!["x"])]);
    // alice: 1, 2; bob: x
    q.push("alice", "2").unwrap();
    assert_eq!(backlog(&q), [("alice", vec!["1", "2"]), ("bob", vec!["x"])]);
    // SNAPSHOT: bob/x; alice: 2  -> returned alice/1
    assert_eq!(q.pop_with_key(), Some(("alice", "1")));
    assert_eq!(snapshot(&q), [("bob", "x")]);
    assert_eq!(backlog(&q), [("alice", vec!["2"])]);
    // SNAPSHOT: bob/x; alice: 2, 3
    q.push("alice", "3").unwrap();
    assert_eq!(snapshot(&q), [("bob", "x")]);
    assert_eq!(backlog(&q), [("alice", vec!["2", "3"])]);
    // SNAPSHOT: bob/x; alice: 2, 3, 4
    q.push("alice", "4").unwrap();
    assert_eq!(backlog(&q), [("alice", vec!["2", "3", "4"])]);
    // alice: 2, 3, 4  -> returned bob/x
    assert_eq!(q.pop_with_key(), Some(("bob", "x")));
    assert_eq!(snapshot(&q), []);
    assert_eq!(backlog(&q), [("alice", vec!["2", "3", "4"])]);
    // alice: 2, 3, 4; bob: y
    q.push("bob", "y").unwrap();
    assert_eq!(
        backlog(&q),
        [("alice", vec!["2", "3", "4"]), ("bob", vec!["y"])]
    );
    // SNAPSHOT: bob/y; alice: 3, 4  -> returned alice/2
    assert_eq!(q.pop_with_key(), Some(("alice", "2")));
    assert_eq!(snapshot(&q), [("bob", "y")]);
    assert_eq!(backlog(&q), [("alice", vec!["3", "4"])]);
    // alice: 3, 4  -> returned bob/y
    assert_eq!(q.pop_with_key(), Some(("bob", "y")));
    assert_eq!(snapshot(&q), []);
    assert_eq!(backlog(&q), [("alice", vec!["3", "4"])]);
    // alice: 4  -> returned alice/3
    assert_eq!(q.pop_with_key(), Some(("alice", "3")));
    assert_eq!(snapshot(&q), []);
    assert_eq!(backlog(&q), [("alice", vec!["4"])]);
    // -> returned alice/4
    assert_eq!(q.pop_with_key(), Some(("alice", "4")));
    assert_eq!(snapshot(&q), []);
    assert_eq!(backlog(&q), []);
    assert_eq!(q.pop(), None);
}

#[test]
fn bound_counts_snapshot_and_backlog_and_refusal_changes_nothing() {
    let mut q = FairQueue::with_capacity(3);
    q.push("a", 1).unwrap();
    q.push("b", 2).unwrap();
    q.push("a", 3).unwrap();
    assert_eq!(q.pop(), Some(1)); // snapshot [b2], backlog a:[3]
    q.push("c", 4).unwrap();
    let before: Vec<_> = q.iter().map(|(k, v)| (*k, *v)).collect();
    let full = q.push("d", 5).unwrap_err();
    assert_eq!((full.key, full.item, full.len), ("d", 5, 3));
    assert_eq!(full.to_string(), "fair queue is full (3 items queued)");
    let after: Vec<_> = q.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(before, after);
    assert_eq!(q.len(), 3);
    let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
    assert_eq!(rest, [2, 3, 4]);
}

#[test]
fn default_capacity_is_128_and_unbounded_takes_more() {
    let mut q = FairQueue::new();
    assert_eq!(FairQueue::<u8, u8>::DEFAULT_CAPACITY, 128);
    for i in 0..128 {
        q.push(i % 7, i).unwrap();
    }
    assert!(q.is_full());
    assert_eq!(q.push(0, 0).unwrap_err().len, 128);

    let mut u = FairQueue::unbounded();
    for i in 0..10_000u32 {
        u.push(i % 3, i).unwrap();
    }
    assert_eq!(u.len(), 10_000);
    assert_eq!(u.capacity(), None);
}

#[test]
fn remove_key_drops_snapshot_and_backlog_items_and_keeps_order_for_others() {
    let mut q = FairQueue::unbounded();
    for i in 0..5 {
        q.push("heavy", i).unwrap();
    }
    q.push("light", 100).unwrap();
    q.push("other", 200).unwrap();
    assert_eq!(q.pop(), Some(0)); // snapshot now [light 100, other 200], heavy backlog 1..5
    q.push("light", 101).unwrap();
    assert_eq!(q.remove_key(&"light"), vec![100, 101]);
    assert_eq!(q.len(), 5);
    let rest: Vec<_> = std::iter::from_fn(|| q.pop_with_key()).collect();
    assert_eq!(
        rest,
        [
            ("other", 200),
            ("heavy", 1),
            ("heavy", 2),
            ("heavy", 3),
            ("heavy", 4)
        ]
    );
    assert!(q.remove_key(&"nobody").is_empty());
}

#[test]
fn removing_the_only_backlogged_key_leaves_a_consistent_queue() {
    let mut q = FairQueue::unbounded();
    for i in 0..4 {
        q.push("a", i).unwrap();
    }
    assert_eq!(q.pop(), Some(0));
    assert_eq!(q.remove_key(&"a"), vec![1, 2, 3]);
    assert!(q.is_empty());
    q.push("b", 9).unwrap();
    q.push("a", 5).unwrap();
    assert_eq!(q.pop_with_key(), Some(("b", 9)));
    assert_eq!(q.pop_with_key(), Some(("a", 5)));
    assert_eq!(q.pop(), None);
}

#[test]
fn weights_give_w_items_per_round_and_weight_one_is_the_snapshot_rule() {
    let mut q = FairQueue::unbounded();
    q.set_weight(&"gold", 3);
    for i in 0..9 {
        q.push("gold", i).unwrap();
    }
    for i in 0..3 {
        q.push("free", 100 + i).unwrap();
    }
    let keys: Vec<_> = std::iter::from_fn(|| q.pop_with_key())
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        keys,
        [
            "gold", "gold", "gold", "free", "gold", "gold", "gold", "free", "gold", "gold", "gold",
            "free"
        ]
    );
    q.set_weight(&"gold", 0);
    assert_eq!(q.weight(&"gold"), 1);
}
