//! Sharing a store folder between processes: the owner serves the store on a Unix socket in
//! the folder (`fairq.sock`), and a process that finds the folder held opens it as a client
//! of the owner.
//!
//! * `wire.rs`: the messages and their framing;
//! * `server.rs`: the owner's side;
//! * `client.rs`: the other processes' side;
//! * `address.rs`: naming the socket from a folder path of any length.

mod address;
pub(crate) mod client;
pub(crate) mod server;
pub(crate) mod wire;
