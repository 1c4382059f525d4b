//! Payloads as stored: JSON in a `jsonb` column operators can query with SQL, and the exact
//! bytes in a `bytea` column whenever `jsonb` could not give them back unchanged.
//!
//! `jsonb` keeps a parsed value, not text: it drops whitespace, sorts object keys (by length,
//! then bytes), keeps the last of duplicate keys and prints numbers its own way. So a payload
//! is stored in one of three ways, and every one gives a worker back exactly the bytes that
//! were enqueued:
//!
//! * **jsonb only**, when the payload is already in *canonical form*: what [`canonical`]
//!   writes for its own parsed value (compact, object keys in byte order, numbers as
//!   `serde_json` writes them, no float that `jsonb` would print differently). Reading it back
//!   parses `jsonb`'s text and writes the canonical form again: the same bytes.
//! * **jsonb and bytes**, when the payload is JSON but not canonical (a struct serialized in
//!   field order, pretty-printed, duplicate keys, `1e5`): the bytes are what workers get; the
//!   `jsonb` copy, the same value as `serde_json` parses it, is there for queries.
//! * **bytes only**, when the payload is not JSON (or holds a `\u0000`, which `jsonb` refuses),
//!   or is larger than [`JSONB_MAX`].

use serde_json::Value;

use fairq_worker::BackendError;

use crate::error::corrupt;

/// The largest payload also stored as `jsonb` (1 MiB); a larger one is stored as bytes only.
///
/// `jsonb` takes up to six times the JSON text's size (an array of small numbers: each
/// element costs an entry of 4 bytes and a numeric of 8, where the text spends 2), and
/// PostgreSQL cannot build a `jsonb` value beyond 255 MiB (SQLSTATE 54000, "total size of
/// jsonb array elements exceeds the maximum", or, on PostgreSQL 15, an allocation of 1 GiB
/// refused while it parses an array of 20 million numbers, 40 MB of text): such a JSON
/// payload could not be enqueued at all, though the store takes payloads of up to
/// [`MAX_CALL_BYTES`](fairq_worker::MAX_CALL_BYTES). Payloads worth looking at in SQL are far
/// smaller, and parsing a large one costs the enqueue for a column nobody reads.
pub(crate) const JSONB_MAX: usize = 1 << 20;

/// A payload split into the two columns: `payload_json` and `payload`.
#[derive(Debug, PartialEq)]
pub(crate) struct Columns<'a> {
    /// The value, for `jsonb` (`None`: not JSON `jsonb` can hold).
    pub(crate) json: Option<Value>,
    /// The exact bytes, kept when `json` alone would not give them back.
    pub(crate) bytes: Option<&'a [u8]>,
}

/// How `payload` is stored (see the module documentation).
///
/// Only bytes that start like a JSON value are parsed, so binary payloads cost one look at
/// their first byte, and payloads larger than [`JSONB_MAX`] none.
pub(crate) fn split(payload: &[u8]) -> Columns<'_> {
    let raw = Columns {
        json: None,
        bytes: Some(payload),
    };
    if payload.len() > JSONB_MAX {
        return raw;
    }
    let first = payload.iter().find(|b| !b.is_ascii_whitespace());
    if !first.is_some_and(|b| b"{[\"-0123456789tfn".contains(b)) {
        return raw;
    }
    let Ok(value) = serde_json::from_slice::<Value>(payload) else {
        return raw;
    };
    match canonical(&value) {
        None => raw,
        Some((text, exact)) => {
            let bytes = (!exact || text != payload).then_some(payload);
            Columns {
                json: Some(value),
                bytes,
            }
        }
    }
}

/// The payload a worker gets from the stored columns.
pub(crate) fn join(bytes: Option<Vec<u8>>, json: Option<Value>) -> Result<Vec<u8>, BackendError> {
    match (bytes, json) {
        (Some(bytes), _) => Ok(bytes),
        (None, Some(value)) => canonical(&value)
            .map(|(text, _)| text)
            .ok_or_else(|| corrupt("a jsonb payload holds a NUL character")),
        (None, None) => Err(corrupt("a job has neither payload column")),
    }
}

/// The canonical text of `value`, and whether `jsonb` gives it back exactly: compact, object
/// keys in byte order, numbers and strings as `serde_json` writes them. `None` when `jsonb`
/// cannot hold the value (a string or key with a NUL character).
///
/// Not exact: a float written with an exponent (`jsonb` prints `1e-7` as `0.0000001`, which
/// need not parse back to the same float) or a negative zero (`jsonb` has none).
pub(crate) fn canonical(value: &Value) -> Option<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut exact = true;
    write(value, &mut out, &mut exact).then_some((out, exact))
}

/// Appends `value` to `out`; false when `jsonb` cannot hold it.
fn write(value: &Value, out: &mut Vec<u8>, exact: &mut bool) -> bool {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            let text = n.to_string();
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                if text.contains(['e', 'E']) || (f == 0.0 && f.is_sign_negative()) {
                    *exact = false;
                }
            }
            out.extend_from_slice(text.as_bytes());
        }
        Value::String(s) => return string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !write(item, out, exact) {
                    return false;
                }
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !string(key, out) {
                    return false;
                }
                out.push(b':');
                if !write(item, out, exact) {
                    return false;
                }
            }
            out.push(b'}');
        }
    }
    true
}

/// Appends `s` as a JSON string, escaped as `serde_json` escapes it; false for a NUL.
fn string(s: &str, out: &mut Vec<u8>) -> bool {
    if s.contains('\0') {
        return false;
    }
    serde_json::to_writer(&mut *out, s).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stored(payload: &[u8]) -> (bool, bool) {
        let c = split(payload);
        (c.json.is_some(), c.bytes.is_some())
    }

    #[test]
    fn canonical_json_is_stored_once() {
        for text in [
            r#"{"a":1,"b":[true,null,"x"]}"#,
            r#""ada@example.com""#,
            "42",
            "-7",
            "1.5",
            "0.30000000000000004",
            "100000.0",
            r#"{"b":{"a":[]},"ba":{}}"#,
            r#""tab\there, quote\" and é""#,
            "18446744073709551615",
        ] {
            assert_eq!(stored(text.as_bytes()), (true, false), "{text}");
        }
    }

    #[test]
    fn json_that_jsonb_would_change_keeps_its_bytes() {
        for text in [
            r#"{"to":"a","subject":"b"}"#, // field order, not byte order
            r#"{ "a": 1 }"#,
            r#"{"a":1,"a":2}"#,
            "1e5",
            "1e-7",
            "-0.0",
            "1.50",
            r#""\u0041""#,
        ] {
            assert_eq!(stored(text.as_bytes()), (true, true), "{text}");
        }
    }

    #[test]
    fn other_bytes_are_stored_as_bytes() {
        for payload in [
            &b""[..],
            b"payload",
            b"{",
            b"\xff\x00\x01",
            br#""nul \u0000 inside""#,
            br#"{"\u0000":1}"#,
            b"12 13",
        ] {
            assert_eq!(stored(payload), (false, true), "{payload:?}");
        }
    }

    #[test]
    fn json_larger_than_the_jsonb_limit_is_stored_as_bytes() {
        let string = |len: usize| {
            let mut text = vec![b'a'; len];
            text[0] = b'"';
            text[len - 1] = b'"';
            text
        };
        assert_eq!(stored(&string(JSONB_MAX)), (true, false));
        assert_eq!(stored(&string(JSONB_MAX + 1)), (false, true));
    }

    #[test]
    fn a_jsonb_only_payload_reads_back_from_its_value() {
        let text = br#"{"a":[1,2.5,"x"],"bb":{"c":null}}"#;
        let c = split(text);
        assert_eq!(join(None, c.json).unwrap(), text);
        assert_eq!(join(Some(b"raw".to_vec()), None).unwrap(), b"raw");
        assert!(join(None, None).is_err());
    }

    /// jsonb's own key order (shorter keys first) and text, as the server sends it back.
    fn as_jsonb_prints(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries
                    .sort_by(|a, b| (a.0.len(), a.0.as_bytes()).cmp(&(b.0.len(), b.0.as_bytes())));
                let inner: Vec<String> = entries
                    .into_iter()
                    .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), as_jsonb_prints(v)))
                    .collect();
                format!("{{{}}}", inner.join(", "))
            }
            Value::Array(items) => {
                let inner: Vec<String> = items.iter().map(as_jsonb_prints).collect();
                format!("[{}]", inner.join(", "))
            }
            other => other.to_string(),
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e15f64..1e15).prop_map(Value::from),
            "[a-zé\"\\\\\n\t\u{1}-\u{1f}]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-c]{0,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever is stored as jsonb alone comes back byte for byte, even though jsonb
        /// reorders keys and respaces the text.
        #[test]
        fn jsonb_only_payloads_round_trip(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_vec_pretty(&value).unwrap()
            } else {
                serde_json::to_vec(&value).unwrap()
            };
            let c = split(&text);
            prop_assert!(c.json.is_some());
            if c.bytes.is_none() {
                let printed: Value = serde_json::from_str(&as_jsonb_prints(&value)).unwrap();
                prop_assert_eq!(join(None, Some(printed)).unwrap(), text);
            }
        }
    }
}
