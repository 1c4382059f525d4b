//! Payload codecs: how values become job payload bytes and back.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A payload that could not be encoded or decoded.
///
/// ```
/// let err = fairq_worker::Job::example(b"{".to_vec()).json::<u32>().unwrap_err();
/// assert!(err.to_string().starts_with("cannot decode payload"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Encoding failed.
    #[error("cannot encode payload: {0}")]
    Encode(String),
    /// Decoding failed (malformed or of another shape).
    #[error("cannot decode payload: {0}")]
    Decode(String),
}

/// Encodes and decodes payloads. JSON ([`JsonCodec`]) is the default; implement this to use
/// another format.
///
/// ```
/// use fairq_worker::{Codec, JsonCodec};
/// let bytes = JsonCodec.encode(&(1, "a")).unwrap();
/// let back: (u8, String) = JsonCodec.decode(&bytes).unwrap();
/// assert_eq!(back, (1, "a".to_string()));
/// ```
pub trait Codec: Send + Sync + 'static {
    /// Value to bytes.
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError>;
    /// Bytes to value.
    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError>;
}

/// JSON through `serde_json`.
///
/// ```
/// use fairq_worker::{Codec, JsonCodec};
/// assert_eq!(JsonCodec.encode(&true).unwrap(), b"true");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonCodec;

impl Codec for JsonCodec {
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        serde_json::to_vec(value).map_err(|e| CodecError::Encode(e.to_string()))
    }

    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, CodecError> {
        serde_json::from_slice(bytes).map_err(|e| CodecError::Decode(e.to_string()))
    }
}
