//! Statements that must commit together, sent back to back on one connection (`BEGIN`,
//! the statements, `COMMIT`): one round trip and one commit. Every statement must be
//! prepared before the first is sent, so nothing else can slip in between them.

use deadpool_postgres::Object;
use fairq_worker::BackendError;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use crate::core::Core;

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

impl Core {
    /// One statement in a transaction of its own: `begin` (`BEGIN` and the statement's
    /// settings), `statement` and `COMMIT`, pipelined (one round trip and one commit, as the
    /// statement alone). Gives the connection back with the statement's rows.
    pub(crate) async fn alone(
        &self,
        client: Object,
        begin: &str,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(Object, Vec<Row>), BackendError> {
        let tx = Pipelined::new(client);
        let c = tx.client();
        let (begun, rows, commit) = tokio::join!(
            c.batch_execute(begin),
            c.query(statement, params),
            c.batch_execute("COMMIT"),
        );
        let client = tx.done();
        // The first error in statement order: the later ones only say the transaction was
        // aborted.
        begun.map_err(|e| self.err(e))?;
        let rows = rows.map_err(|e| self.err(e))?;
        commit.map_err(|e| self.err(e))?;
        Ok((client, rows))
    }
}
