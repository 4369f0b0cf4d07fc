//! The SQL catalog's tables on PostgreSQL (tokio-postgres), for [`super::SqlCatalog`].
//!
//! The same two tables PyIceberg's `SqlCatalog` and Java's `JdbcCatalog` create
//! (`iceberg_tables` with `iceberg_type`, `iceberg_namespace_properties`), created here if
//! missing, and the same compare-and-swap: `UPDATE … WHERE metadata_location = expected`, one
//! row or none. The connection's driver runs on lethe's I/O runtime. TLS as the URI's
//! `sslmode` and `sslrootcert` say (default `prefer`; [`crate::pg`]).
//!
//! The password is never part of the URI lethe stores or prints: it is given apart (from the
//! environment or a file) in a `secrecy` type, and a URI that carries one is refused by the
//! configuration before it gets here.

use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tokio_postgres::Client;

use crate::error::{Error, Result};
use crate::io;

const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// A connected PostgreSQL catalog database.
pub(crate) struct Pg {
    client: Arc<Client>,
    place: String,
    /// Whether `iceberg_tables` has `iceberg_type` (Java's V1 schema; V0 lacks it).
    typed: bool,
}

/// `postgresql://user@host:port/db` of a parsed configuration: what messages show.
fn place_of(c: &tokio_postgres::Config) -> String {
    let host = c
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgresql://{}@{host}:{port}/{}",
        c.get_user().unwrap_or(""),
        c.get_dbname().unwrap_or("")
    )
}

fn pg_error(place: &str, what: &str, e: tokio_postgres::Error) -> Error {
    // tokio-postgres errors carry the server's message (never the password).
    let detail = match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    };
    Error::CatalogService(format!("postgresql {place}: {what}: {detail}"))
}

impl Pg {
    /// Connects and creates the catalog tables when missing. Returns the connection and the
    /// password-free place for messages.
    pub(crate) async fn connect(
        uri: &str,
        password: Option<SecretString>,
        create: bool,
    ) -> Result<(Pg, String)> {
        let target = crate::pg::parse(uri).map_err(|why| {
            Error::invalid(format!(
                "`{}` is not a PostgreSQL URI lethe can use (postgresql://user@host:port/database[?sslmode=verify-full&sslrootcert=FILE]): {why}",
                redact_uri(uri)
            ))
        })?;
        if target.config.get_password().is_some() {
            return Err(Error::invalid(format!(
                "{}: the URI carries a password; give it apart (PGPASSWORD or [catalog] password_env), so it never lands in lethe.toml or a log",
                redact_uri(uri)
            )));
        }
        let mut target = target;
        target.config.application_name("lethe");
        let place = place_of(&target.config);
        let p2 = place.clone();
        let client = io::run(async move {
            let (client, connection) = crate::pg::connect(
                &target,
                password.as_ref().map(|p| p.expose_secret()),
                Some(Duration::from_secs(10)),
            )
            .await
            .map_err(|e| Error::CatalogService(format!("postgresql {p2}: can't connect: {e}")))?;
            io::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!("postgresql connection ended: {e}");
                }
            });
            Ok::<_, Error>(client)
        })
        .await??;
        let client = Arc::new(client);
        let c = client.clone();
        let p3 = place.clone();
        let typed = io::run(async move {
            if create {
                c.batch_execute(CREATE_TABLES)
                    .await
                    .map_err(|e| pg_error(&p3, "can't create the catalog tables", e))?;
            } else {
                let row = c
                    .query_one(
                        "SELECT count(*) FROM information_schema.tables
                         WHERE table_name = 'iceberg_tables' AND table_schema = current_schema()",
                        &[],
                    )
                    .await
                    .map_err(|e| pg_error(&p3, "can't read the database's tables", e))?;
                if row.get::<_, i64>(0) == 0 {
                    return Err(Error::invalid(format!(
                        "{p3} is not an Iceberg SQL catalog: it has no `iceberg_tables` table"
                    )));
                }
            }
            let row = c
                .query_one(
                    "SELECT count(*) FROM information_schema.columns
                     WHERE table_name = 'iceberg_tables' AND column_name = 'iceberg_type'
                       AND table_schema = current_schema()",
                    &[],
                )
                .await
                .map_err(|e| pg_error(&p3, "can't read the catalog's schema", e))?;
            Ok::<_, Error>(row.get::<_, i64>(0) > 0)
        })
        .await??;
        Ok((
            Pg {
                client,
                place: place.clone(),
                typed,
            },
            place,
        ))
    }

    async fn query(
        &self,
        what: &'static str,
        sql: &'static str,
        params: Vec<String>,
    ) -> Result<Vec<tokio_postgres::Row>> {
        let c = self.client.clone();
        let place = self.place.clone();
        io::run(async move {
            let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                .iter()
                .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
                .collect();
            c.query(sql, &refs)
                .await
                .map_err(|e| pg_error(&place, what, e))
        })
        .await?
    }

    async fn execute(&self, what: &'static str, sql: String, params: Vec<String>) -> Result<u64> {
        let c = self.client.clone();
        let place = self.place.clone();
        io::run(async move {
            let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                .iter()
                .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
                .collect();
            c.execute(sql.as_str(), &refs)
                .await
                .map_err(|e| pg_error(&place, what, e))
        })
        .await?
    }

    /// Distinct catalog names with their table counts.
    pub(crate) async fn names(&self) -> Result<Vec<(String, usize)>> {
        let rows = self
            .query(
                "listing catalog names",
                "SELECT catalog_name, count(*) FROM iceberg_tables GROUP BY catalog_name ORDER BY catalog_name",
                Vec::new(),
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as usize))
            .collect())
    }

    pub(crate) async fn namespaces(&self, catalog: &str) -> Result<Vec<String>> {
        let rows = self
            .query(
                "listing namespaces",
                "SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = $1
                 UNION SELECT DISTINCT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1
                 ORDER BY 1",
                vec![catalog.to_string()],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
    }

    pub(crate) async fn ensure_namespace(&self, catalog: &str, ns: &str) -> Result<()> {
        self.execute(
            "creating a namespace",
            "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
             VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING"
                .into(),
            vec![catalog.to_string(), ns.to_string()],
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn tables(&self, catalog: &str) -> Result<Vec<(String, String)>> {
        let rows = if self.typed {
            self.query(
                "listing tables",
                "SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = $1
                 AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)
                 ORDER BY table_namespace, table_name",
                vec![catalog.to_string()],
            )
            .await?
        } else {
            self.query(
                "listing tables",
                "SELECT table_namespace, table_name FROM iceberg_tables WHERE catalog_name = $1
                 ORDER BY table_namespace, table_name",
                vec![catalog.to_string()],
            )
            .await?
        };
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect())
    }

    pub(crate) async fn current(
        &self,
        catalog: &str,
        ns: &str,
        name: &str,
    ) -> Result<Option<String>> {
        let rows = self
            .query(
                "reading a table's metadata location",
                "SELECT metadata_location FROM iceberg_tables
                 WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3",
                vec![catalog.to_string(), ns.to_string(), name.to_string()],
            )
            .await?;
        Ok(rows.first().and_then(|r| r.get::<_, Option<String>>(0)))
    }

    /// Inserts a table row; false when it already exists.
    pub(crate) async fn insert(
        &self,
        catalog: &str,
        ns: &str,
        name: &str,
        location: &str,
    ) -> Result<bool> {
        let sql = if self.typed {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type)
             VALUES ($1, $2, $3, $4, NULL, 'TABLE') ON CONFLICT DO NOTHING"
        } else {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location)
             VALUES ($1, $2, $3, $4, NULL) ON CONFLICT DO NOTHING"
        };
        let n = self
            .execute(
                "registering a table",
                sql.into(),
                vec![
                    catalog.to_string(),
                    ns.to_string(),
                    name.to_string(),
                    location.to_string(),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// The compare-and-swap: rows changed (1 = swapped, 0 = someone else moved it).
    pub(crate) async fn swap(
        &self,
        catalog: &str,
        ns: &str,
        name: &str,
        expected: &str,
        new: &str,
    ) -> Result<u64> {
        self.execute(
            "swapping the metadata pointer",
            "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2
             WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $2"
                .into(),
            vec![
                new.to_string(),
                expected.to_string(),
                catalog.to_string(),
                ns.to_string(),
                name.to_string(),
            ],
        )
        .await
    }

    pub(crate) async fn delete(&self, catalog: &str, ns: &str, name: &str) -> Result<usize> {
        Ok(self
            .execute(
                "dropping a table",
                "DELETE FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3"
                    .into(),
                vec![catalog.to_string(), ns.to_string(), name.to_string()],
            )
            .await? as usize)
    }
}

/// A URI with any password replaced by `***`, for messages.
pub fn redact_uri(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{userinfo}@{host}{tail}")
            }
        }
        None => uri.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_uri("postgresql://lethe:hunter2@127.0.0.1:5432/lethe"),
            "postgresql://lethe:***@127.0.0.1:5432/lethe"
        );
        assert_eq!(
            redact_uri("postgresql://lethe@h/db?sslmode=disable"),
            "postgresql://lethe@h/db?sslmode=disable"
        );
        assert_eq!(redact_uri("postgresql://h/db"), "postgresql://h/db");
    }

    #[tokio::test]
    async fn a_uri_with_a_password_is_refused_without_showing_it() {
        let e = Pg::connect("postgresql://u:hunter2@127.0.0.1:1/db", None, true)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("carries a password") && !e.contains("hunter2"),
            "{e}"
        );
    }
}
