//! Whether the server cleans the store's tables: every job leaves dead row versions behind (a
//! claim updates its row, a settlement deletes it), and only `VACUUM` makes their space
//! reusable. With autovacuum off and no scheduled `VACUUM`, the tables and their indexes grow
//! with every job ever run and each claim wades through more dead entries: on this project's
//! benchmark server, two million dead rows made the store run at about half its speed.
//! [`PgBackend::connect`] logs a warning when it finds autovacuum off; operators can ask with
//! [`PgBackend::vacuuming`] and clean up with [`PgBackend::vacuum`].

use std::fmt;

use fairq_worker::BackendError;

use crate::store::PgBackend;

/// The tables whose dead rows matter (the store's other tables are tiny or append-only).
const TABLES: [&str; 4] = ["jobs", "archive", "rounds", "ghosts"];

/// How the server cleans the store's tables, as `pg_settings`, `pg_class` and
/// `pg_stat_user_tables` tell.
///
/// ```
/// let v = fairq_postgres::Vacuuming {
///     autovacuum: false,
///     tables_off: vec![],
///     dead_rows: 2_000_000,
///     live_rows: 10,
/// };
/// assert!(v.needs_vacuum());
/// assert!(v.to_string().contains("VACUUM"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vacuuming {
    /// The server runs autovacuum (`autovacuum` and `track_counts` both on).
    pub autovacuum: bool,
    /// Tables of the store on which autovacuum is turned off (`autovacuum_enabled = false`).
    pub tables_off: Vec<String>,
    /// Dead row versions in the store's tables, as the statistics collector counts them.
    pub dead_rows: u64,
    /// Live rows in the same tables.
    pub live_rows: u64,
}

impl Vacuuming {
    /// True when nothing cleans some of the store's tables: autovacuum is off on the server or
    /// on one of the tables, so they need a scheduled `VACUUM`.
    ///
    /// ```
    /// let on = fairq_postgres::Vacuuming {
    ///     autovacuum: true,
    ///     tables_off: vec![],
    ///     dead_rows: 5,
    ///     live_rows: 5,
    /// };
    /// assert!(!on.needs_vacuum());
    /// ```
    pub fn needs_vacuum(&self) -> bool {
        !self.autovacuum || !self.tables_off.is_empty()
    }
}

impl fmt::Display for Vacuuming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.autovacuum {
            f.write_str("autovacuum is off on the server")?;
        } else if !self.tables_off.is_empty() {
            write!(
                f,
                "autovacuum is off on the tables {}",
                self.tables_off.join(", ")
            )?;
        } else {
            f.write_str("autovacuum is on")?;
        }
        write!(
            f,
            " ({} dead and {} live rows in the job tables)",
            self.dead_rows, self.live_rows
        )?;
        if self.needs_vacuum() {
            f.write_str(
                ": every job leaves dead rows that slow claims down until VACUUM runs; \
                 turn autovacuum on or schedule VACUUM (`fairq vacuum`, or PgBackend::vacuum)",
            )?;
        }
        Ok(())
    }
}

impl PgBackend {
    /// Asks the server how it cleans the store's tables (see [`Vacuuming`]).
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend) -> Result<(), fairq_worker::BackendError> {
    /// let vacuuming = store.vacuuming().await?;
    /// if vacuuming.needs_vacuum() {
    ///     eprintln!("warning: PostgreSQL: {vacuuming}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn vacuuming(&self) -> Result<Vacuuming, BackendError> {
        let client = self.inner.core.client().await?;
        let schema = self.schema();
        let row = client
            .query_one(
                "SELECT current_setting('autovacuum')::bool \
                        AND current_setting('track_counts')::bool, \
                 ARRAY(SELECT c.relname::text FROM pg_class c \
                       JOIN pg_namespace n ON n.oid = c.relnamespace \
                       WHERE n.nspname = $1 AND c.relname::text = ANY($2::text[]) \
                         AND EXISTS (SELECT 1 FROM unnest(c.reloptions) o \
                                     WHERE lower(o) IN ('autovacuum_enabled=false', \
                                                        'autovacuum_enabled=off', \
                                                        'autovacuum_enabled=no', \
                                                        'autovacuum_enabled=0')) \
                       ORDER BY c.relname), \
                 (SELECT COALESCE(sum(s.n_dead_tup), 0)::int8 FROM pg_stat_user_tables s \
                  WHERE s.schemaname = $1 AND s.relname::text = ANY($2::text[])), \
                 (SELECT COALESCE(sum(s.n_live_tup), 0)::int8 FROM pg_stat_user_tables s \
                  WHERE s.schemaname = $1 AND s.relname::text = ANY($2::text[]))",
                &[&schema, &TABLES.as_slice()],
            )
            .await
            .map_err(|e| self.inner.core.err(e))?;
        let count = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
        Ok(Vacuuming {
            autovacuum: row.get(0),
            tables_off: row.get(1),
            dead_rows: count(2),
            live_rows: count(3),
        })
    }

    /// Runs `VACUUM (ANALYZE)` on the store's job tables: for servers where nothing else
    /// cleans them (see [`vacuuming`](Self::vacuuming)). It takes no lock that blocks workers,
    /// but reads every page of the tables, so schedule it at a quiet time.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend) -> Result<(), fairq_worker::BackendError> {
    /// if store.vacuuming().await?.needs_vacuum() {
    ///     store.vacuum().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn vacuum(&self) -> Result<(), BackendError> {
        let client = self.inner.core.client().await?;
        let schema = self.inner.core.sql.schema.quoted();
        let tables: Vec<String> = TABLES.iter().map(|t| format!("{schema}.{t}")).collect();
        client
            .batch_execute(&format!("VACUUM (ANALYZE) {}", tables.join(", ")))
            .await
            .map_err(|e| self.inner.core.err(e))
    }

    /// Logs a warning when nothing cleans the store's tables (done by `connect`; a server
    /// that will not say is not warned about).
    pub(crate) async fn warn_about_vacuum(&self) {
        match self.vacuuming().await {
            Ok(v) if v.needs_vacuum() => tracing::warn!(schema = self.schema(), "PostgreSQL {v}"),
            Ok(_) => {}
            Err(err) => tracing::debug!(error = %err, "cannot tell whether PostgreSQL vacuums"),
        }
    }
}
