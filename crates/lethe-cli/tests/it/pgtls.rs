//! Issue 44 item 15: TLS to PostgreSQL, for the SQL catalog and the database stores, with
//! `sslmode` as libpq spells it and a root certificate file.
//!
//! The test PostgreSQL server (Debian's, started by `scripts/services.sh`) gets TLS turned on
//! once per test process: a certificate authority and a server certificate for `localhost`
//! are made here (rcgen), written into the server's data folder, and `ALTER SYSTEM SET ssl =
//! on` + `pg_reload_conf()` apply them. TLS stays on for the rest of the run: clients that
//! don't ask for it (`prefer`, libpq's and lethe's default) use it unverified, those that
//! turn it off (`sslmode=disable`, `NoTls`) still connect.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use secrecy::SecretString;
use tokio::sync::OnceCell;

use crate::common::Demo;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the tests with `bash scripts/test.sh`, which starts PostgreSQL (docs/services.md)")
    })
}

/// The certificate authorities the test made: the one that signed the server's certificate
/// and another one.
struct Pki {
    /// Keeps the folder.
    _dir: tempfile::TempDir,
    /// The server's CA, PEM.
    ca: PathBuf,
    /// Another CA, PEM.
    other_ca: PathBuf,
}

/// A certificate authority named `name`.
fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

static TLS: OnceCell<Pki> = OnceCell::const_new();

/// A plain (`NoTls`) superuser connection to the test server.
async fn admin() -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(&env("LETHE_PG_URI"), tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(conn);
    c
}

/// Turns TLS on in the test server (once per process) with a certificate for `localhost`
/// only (not 127.0.0.1: so that verify-full to 127.0.0.1 fails on the name, verify-ca not).
async fn tls_server() -> &'static Pki {
    TLS.get_or_init(|| async {
        let ca = authority("lethe test CA");
        let other = authority("another CA");
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, "localhost");
        let cert = p.signed_by(&key, &ca).unwrap();
        let c = admin().await;
        let data: String = c
            .query_one("SHOW data_directory", &[])
            .await
            .unwrap()
            .get(0);
        let data = PathBuf::from(data);
        let owner = {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(&data).expect("the test server's data folder");
            (m.uid(), m.gid())
        };
        let (crt, pem_key) = (data.join("lethe-test.crt"), data.join("lethe-test.key"));
        for (f, text) in [(&crt, cert.pem()), (&pem_key, key.serialize_pem())] {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::remove_file(f);
            std::fs::write(f, text).unwrap();
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(f, Some(owner.0), Some(owner.1)).unwrap();
        }
        for sql in [
            format!("ALTER SYSTEM SET ssl_cert_file = '{}'", crt.display()),
            format!("ALTER SYSTEM SET ssl_key_file = '{}'", pem_key.display()),
            "ALTER SYSTEM SET ssl = on".to_string(),
            "SELECT pg_reload_conf()".to_string(),
        ] {
            c.batch_execute(&sql).await.unwrap();
        }
        // The reload is asynchronous: wait until a new connection sees it.
        let mut on = false;
        for _ in 0..100 {
            let s: String = admin()
                .await
                .query_one("SHOW ssl", &[])
                .await
                .unwrap()
                .get(0);
            if s == "on" {
                on = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(on, "the test server did not turn TLS on (see its log)");
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("ca.pem"), dir.path().join("other-ca.pem"));
        std::fs::write(&a, ca.pem()).unwrap();
        std::fs::write(&b, other.pem()).unwrap();
        Pki {
            _dir: dir,
            ca: a,
            other_ca: b,
        }
    })
    .await
}

/// `postgresql://lethe@HOST:PORT/DB?QUERY` on the test server (no password in it).
fn uri(host: &str, db: &str, query: &str) -> String {
    format!(
        "postgresql://{}@{host}:{}/{db}?{query}",
        env("LETHE_PG_USER"),
        env("LETHE_PG_PORT")
    )
}

/// Connects through lethe's connector; Ok(whether the session uses TLS) or the error shown.
async fn session_tls(conn: &str) -> Result<bool, String> {
    let target = lethe_iceberg::pg::parse(conn)?;
    let password = env("LETHE_PG_PASSWORD");
    let (client, connection) = lethe_iceberg::pg::connect(&target, Some(&password), None)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

/// Each sslmode against the server's certificate (for `localhost`, signed by the test CA):
/// verify-full passes with the right CA and fails with another (and fails on 127.0.0.1, which
/// the certificate doesn't name, where verify-ca passes); require and the default (prefer)
/// use TLS unverified; disable doesn't. The SQL catalog connects with verify-full and the
/// right CA, and refuses with another, naming why; the password never shows.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_tls_verify_full_passes_with_the_right_ca_and_fails_with_another() {
    let pki = tls_server().await;
    let db = env("LETHE_PG_DATABASE");
    let ca = pki.ca.display().to_string();
    let other = pki.other_ca.display().to_string();
    let full =
        |host: &str, ca: &str| uri(host, &db, &format!("sslmode=verify-full&sslrootcert={ca}"));
    assert_eq!(session_tls(&full("localhost", &ca)).await, Ok(true));
    let e = session_tls(&full("localhost", &other)).await.unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
    let e = session_tls(&full("127.0.0.1", &ca)).await.unwrap_err();
    assert!(e.contains("not valid for name"), "{e}");
    let verify_ca = uri(
        "127.0.0.1",
        &db,
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    );
    assert_eq!(session_tls(&verify_ca).await, Ok(true));
    let verify_ca_other = uri(
        "127.0.0.1",
        &db,
        &format!("sslmode=verify-ca&sslrootcert={other}"),
    );
    assert!(session_tls(&verify_ca_other).await.is_err());
    assert_eq!(
        session_tls(&uri("127.0.0.1", &db, "sslmode=require")).await,
        Ok(true)
    );
    assert_eq!(
        session_tls(&uri("127.0.0.1", &db, "sslmode=disable")).await,
        Ok(false)
    );
    assert_eq!(
        session_tls(&uri("127.0.0.1", &db, "application_name=x")).await,
        Ok(true),
        "the default, prefer, uses TLS when the server offers it"
    );

    // The SQL catalog.
    let password = || Some(SecretString::from(env("LETHE_PG_PASSWORD")));
    let name = format!("tls_{:08x}", rand::random::<u32>());
    let cat = lethe_iceberg::catalog::SqlCatalog::connect_postgres(
        &name,
        &full("localhost", &ca),
        password(),
    )
    .await
    .expect("the SQL catalog over verify-full");
    assert!(cat.catalog_names().await.is_ok());
    let Err(e) = lethe_iceberg::catalog::SqlCatalog::connect_postgres(
        &name,
        &full("localhost", &other),
        password(),
    )
    .await
    else {
        panic!("another CA must be refused")
    };
    let e = e.to_string();
    assert!(
        e.contains("can't connect") && e.contains("UnknownIssuer"),
        "{e}"
    );
    assert!(!e.contains(&env("LETHE_PG_PASSWORD")), "{e}");
    let e = lethe_iceberg::catalog::SqlCatalog::connect_postgres(
        &name,
        &uri("localhost", &db, "sslmode=verify-full"),
        password(),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("needs sslrootcert"), "{e}");
}

/// A database store (the demo's application database on PostgreSQL, its URL from the
/// environment with `sslmode=verify-full`): with another CA the erasure stops at the store
/// naming the TLS failure and deletes nothing there; with the right CA it resumes and erases.
#[tokio::test(flavor = "multi_thread")]
async fn a_database_store_over_verify_full_erases_with_the_right_ca_only() {
    let pki = tls_server().await;
    // The demo's application database in a fresh database on the test server.
    let name = format!("lethe_tls_{:08x}", rand::random::<u32>());
    admin()
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (head, _) = env("LETHE_PG_URI")
        .rsplit_once('/')
        .map(|(h, t)| (h.to_string(), t.to_string()))
        .unwrap();
    let plain = format!("{head}/{name}");
    let demo = Demo::with_stores(lethe_demo::platform::appdb::AppDb::Postgres(
        std::sync::Arc::new(SecretString::from(plain.clone())),
    ))
    .await;
    let vendor = demo.vendor().await;
    let with_ca = |ca: &std::path::Path| {
        format!(
            "{}?sslmode=verify-full&sslrootcert={}",
            plain.replace("@127.0.0.1:", "@localhost:"),
            ca.display()
        )
    };
    let learners = || {
        let plain = plain.clone();
        async move {
            let (c, conn) = tokio_postgres::connect(&plain, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            c.query_one("SELECT count(*) FROM learners WHERE learner_id = 3590", &[])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    assert_eq!(learners().await, 1);
    let run = |args: &[&str], url: String| {
        std::process::Command::new(env!("CARGO_BIN_EXE_lethe"))
            .args(args)
            .current_dir(&demo.dir)
            .env_remove("LETHE_REGISTER_KEY")
            .env(lethe_demo::platform::appdb::APP_DB_URL_ENV, url)
            .output()
            .unwrap()
    };
    let out = run(
        &[
            "erase",
            "--subject",
            "learner=3590",
            "--request",
            "erasure-0001",
            "--min-age",
            "0",
        ],
        with_ca(&pki.other_ca),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("app_db") && stderr.contains("UnknownIssuer"),
        "{stderr}"
    );
    assert!(!stderr.contains(&env("LETHE_PG_PASSWORD")), "{stderr}");
    assert_eq!(learners().await, 1, "deleted over a connection it refused");
    let out = run(&["erase", "--resume", "erasure-0001"], with_ca(&pki.ca));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(learners().await, 0);
    drop(vendor);
}
