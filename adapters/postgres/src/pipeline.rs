//! Statements that must commit together, sent back to back on one connection (`BEGIN`,
//! the statements, `COMMIT`): one round trip and one commit. Every statement must be
//! prepared before the first is sent, so nothing else can slip in between them.

use deadpool_postgres::Object;

/// A pooled connection in the middle of a pipelined transaction. If the caller gives up (the
/// future is dropped) before the transaction's replies came back, the connection is taken
/// out of the pool rather than handed to the next user inside a transaction.
pub(crate) struct Pipelined {
    client: Option<Object>,
}

impl Pipelined {
    pub(crate) fn new(client: Object) -> Pipelined {
        Pipelined {
            client: Some(client),
        }
    }

    pub(crate) fn client(&self) -> &tokio_postgres::Client {
        self.client
            .as_deref()
            .map(std::ops::Deref::deref)
            .unwrap_or_else(|| unreachable!("the client is only taken by `done`"))
    }

    /// Every reply came back: the connection may go back to the pool.
    pub(crate) fn done(mut self) -> Object {
        self.client
            .take()
            .unwrap_or_else(|| unreachable!("`done` is called once"))
    }
}

impl Drop for Pipelined {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}
