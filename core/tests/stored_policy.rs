//! A retry policy read back from a store: the values a row may hold, whoever wrote it.
//!
//! The row is fed through serde's own value deserializers, so no data format is needed.
#![cfg(feature = "serde")]

use std::time::Duration;

use fairq_core::job::{verdict, Outcome, Setback, MAX_MILLIS};
use fairq_core::retry::{Decision, RetryPolicy};
use serde::de::value::{Error, MapDeserializer};
use serde::de::{Deserializer, IntoDeserializer, Visitor};
use serde::Deserialize;

/// One field of a stored row: a unit variant's name, or a number.
#[derive(Clone, Copy)]
enum Field {
    Name(&'static str),
    Number(u16),
}

struct FieldDeserializer(Field);

impl IntoDeserializer<'_, Error> for Field {
    type Deserializer = FieldDeserializer;

    fn into_deserializer(self) -> FieldDeserializer {
        FieldDeserializer(self)
    }
}

impl<'de> Deserializer<'de> for FieldDeserializer {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Field::Name(name) => visitor.visit_str(name),
            Field::Number(n) => visitor.visit_u16(n),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        enum_name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Field::Name(name) => IntoDeserializer::<Error>::into_deserializer(name)
                .deserialize_enum(enum_name, variants, visitor),
            Field::Number(_) => self.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

/// A stored policy that retries forever, at once, with the given jitter.
fn stored(jitter_permille: u16) -> RetryPolicy {
    let row = [
        ("backoff", Field::Name("Immediate")),
        ("jitter_permille", Field::Number(jitter_permille)),
    ];
    RetryPolicy::deserialize(MapDeserializer::<_, Error>::new(row.into_iter()))
        .expect("the row is a policy")
}

#[test]
fn a_stored_policy_reads_back_as_written() {
    let p = stored(250);
    assert_eq!(p, RetryPolicy::forever().with_jitter(250));
}

#[test]
fn a_stored_jitter_above_1000_permille_is_read_as_full_jitter() {
    for permille in [1001, 1500, u16::MAX] {
        let p = stored(permille);
        assert_eq!(p.jitter_permille(), 1000, "stored {permille}");
        assert_eq!(p, RetryPolicy::forever().with_jitter(1000));
    }
}

#[test]
fn a_stored_jitter_above_1000_permille_keeps_the_retry_within_its_delay() {
    let p = stored(1500).with_delays([Duration::from_secs(10)]);
    for random in [0, u64::MAX / 3, u64::MAX] {
        let Decision::Retry { after } = p.decide_with_random(1, random) else {
            panic!("the policy retries forever");
        };
        assert!(after <= Duration::from_secs(10), "{after:?}");
        let out = verdict(&p, 1, Setback::Failed, 1_000, random);
        assert_ne!(out, Outcome::Retry { run_at: MAX_MILLIS });
    }
}
