//! The schema: its name, its versioned migrations, and `migrate`.

use crate::error::PgError;

/// The schema used when none is configured.
pub const DEFAULT_SCHEMA: &str = "fairq";

/// The newest schema version this library creates and understands.
pub const SCHEMA_VERSION: i32 = 8;

/// The migrations, oldest first, as shipped in the crate's `sql/` folder (written for the
/// default schema name; see [`migration_sql`] for another name).
///
/// ```
/// assert_eq!(fairq_postgres::MIGRATIONS.len() as i32, fairq_postgres::SCHEMA_VERSION);
/// assert!(fairq_postgres::MIGRATIONS[0].1.contains("CREATE TABLE fairq.jobs"));
/// ```
pub const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../sql/v1.sql")),
    (2, include_str!("../sql/v2.sql")),
    (3, include_str!("../sql/v3.sql")),
    (4, include_str!("../sql/v4.sql")),
    (5, include_str!("../sql/v5.sql")),
    (6, include_str!("../sql/v6.sql")),
    (7, include_str!("../sql/v7.sql")),
    (8, include_str!("../sql/v8.sql")),
];

/// A validated schema name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaName(String);

impl SchemaName {
    /// Checks that `name` is a plain identifier: 1 to 48 ASCII letters, digits and underscores,
    /// not starting with a digit (so it can be quoted safely and still leave room in the
    /// notification channel name).
    pub(crate) fn new(name: &str) -> Result<SchemaName, PgError> {
        let ok = !name.is_empty()
            && name.len() <= 48
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if ok {
            Ok(SchemaName(name.to_string()))
        } else {
            Err(PgError::BadSchemaName(name.to_string()))
        }
    }

    /// The bare name.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a quoted SQL identifier.
    pub(crate) fn quoted(&self) -> String {
        format!("\"{}\"", self.0)
    }

    /// The LISTEN/NOTIFY channel of this schema on which ready jobs are announced.
    pub(crate) fn channel(&self) -> String {
        format!("fairq_{}", self.0)
    }

    /// The channel on which jobs that wait for a time are announced.
    pub(crate) fn due_channel(&self) -> String {
        format!("fairq_{}_due", self.0)
    }

    /// Rewrites SQL written for the default schema to use this one.
    pub(crate) fn render(&self, sql: &str) -> String {
        let quoted = self.quoted();
        sql.replace("fairq.", &format!("{quoted}."))
            .replace("EXISTS fairq;", &format!("EXISTS {quoted};"))
    }
}

/// The SQL of every migration, in order, for the schema `schema` — for applying with your
/// own migration tool. With the default name it is exactly the shipped `sql/*.sql` files.
///
/// ```
/// let sql = fairq_postgres::migration_sql("billing_jobs").unwrap();
/// assert!(sql.contains("CREATE TABLE \"billing_jobs\".jobs"));
/// assert!(fairq_postgres::migration_sql("bad-name").is_err());
/// ```
pub fn migration_sql(schema: &str) -> Result<String, PgError> {
    let name = SchemaName::new(schema)?;
    Ok(MIGRATIONS
        .iter()
        .map(|(_, sql)| name.render(sql))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Brings the schema up to [`SCHEMA_VERSION`] on `client`, in one transaction under an
/// advisory lock, so any number of processes may run it at once. Returns how many
/// migrations were applied (0 when the schema was already current).
pub(crate) async fn migrate(
    client: &mut tokio_postgres::Client,
    schema: &SchemaName,
) -> Result<usize, PgError> {
    let err = |e| PgError::from_db(e, schema.as_str());
    let tx = client.transaction().await.map_err(err)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&format!("fairq-migrate:{}", schema.as_str())],
    )
    .await
    .map_err(err)?;
    let table = format!("{}.schema_version", schema.quoted());
    let exists: bool = tx
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .map_err(err)?
        .get(0);
    let current: i32 = if exists {
        tx.query_one(
            &format!("SELECT COALESCE(max(version), 0) FROM {table}"),
            &[],
        )
        .await
        .map_err(err)?
        .get(0)
    } else {
        0
    };
    if current > SCHEMA_VERSION {
        return Err(PgError::SchemaTooNew {
            schema: schema.as_str().to_string(),
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    let mut applied = 0;
    for (version, sql) in MIGRATIONS {
        if *version > current {
            tx.batch_execute(&schema.render(sql)).await.map_err(err)?;
            applied += 1;
        }
    }
    tx.commit().await.map_err(err)?;
    Ok(applied)
}

/// The schema's version (0 when it does not exist).
pub(crate) async fn version(
    client: &tokio_postgres::Client,
    schema: &SchemaName,
) -> Result<i32, PgError> {
    let err = |e| PgError::from_db(e, schema.as_str());
    let table = format!("{}.schema_version", schema.quoted());
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .map_err(err)?
        .get(0);
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_one(
            &format!("SELECT COALESCE(max(version), 0) FROM {table}"),
            &[],
        )
        .await
        .map_err(err)?
        .get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(SchemaName::new("fairq").is_ok());
        assert!(SchemaName::new("Jobs_2").is_ok());
        for bad in ["", "1abc", "a-b", "a\"b", "a.b", "a b", &"x".repeat(49)] {
            assert!(SchemaName::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn rendering_for_another_schema_leaves_no_default_name() {
        let name = SchemaName::new("other_schema").unwrap();
        for (_, sql) in MIGRATIONS {
            let rendered = name.render(sql);
            assert!(
                !rendered.contains("fairq"),
                "default name left in:\n{rendered}"
            );
            assert!(rendered.contains("\"other_schema\"."));
        }
    }

    #[test]
    fn the_default_schema_renders_to_the_shipped_file_modulo_quoting() {
        let name = SchemaName::new(DEFAULT_SCHEMA).unwrap();
        let rendered = name.render(MIGRATIONS[0].1);
        assert_eq!(rendered.replace("\"fairq\"", "fairq"), MIGRATIONS[0].1);
    }
}
