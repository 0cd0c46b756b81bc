//! Where the replayer's PostgreSQL saver runs: by default a database it
//! creates for the run (`ckpt_bench_<pid>_<random>`) and drops at the end,
//! also when the run fails; an existing database only when one is named
//! (`--pg-url` / `$PEER_PG_URL`), whose checkpoint tables (and schema
//! `floor`) are then dropped and recreated. SQLite runs in a temporary
//! directory, Redis under a fresh key prefix (never a flush).

use super::Res;

/// The server of a fresh database when none is named.
pub const DEFAULT_PG_SERVER: &str = "postgresql://postgres@127.0.0.1:5432";

/// Where the PostgreSQL saver runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgTarget {
    /// A database named explicitly, used as it is: its checkpoint tables are
    /// dropped and recreated.
    Existing(String),
    /// A database this run creates on `server` under `name` and drops.
    Fresh { server: String, name: String },
}

/// Decides the target: `url` (the `--pg-url` flag, else `$PEER_PG_URL`)
/// names an existing database; without one, a fresh database on `server`
/// (`--pg-server`, else `$PEER_PG_SERVER`, else [`DEFAULT_PG_SERVER`]),
/// named after this process and `random`.
///
/// # Errors
/// A server URL that names a database (or carries a query), which would
/// make the fresh database's URL wrong.
pub fn pg_target(url: Option<&str>, server: Option<&str>, random: u32) -> Res<PgTarget> {
    if let Some(url) = url.filter(|u| !u.is_empty()) {
        return Ok(PgTarget::Existing(url.to_owned()));
    }
    let server = server.filter(|s| !s.is_empty()).unwrap_or(DEFAULT_PG_SERVER);
    let server = server.trim_end_matches('/');
    let after_scheme = server.split_once("://").map_or(server, |(_, rest)| rest);
    if after_scheme.contains('/') || after_scheme.contains('?') {
        return Err(
            "--pg-server takes a server URL without a database or query (postgresql://USER@HOST:PORT); \
                    to run on an existing database, name it with --pg-url"
                .into(),
        );
    }
    Ok(PgTarget::Fresh {
        server: server.to_owned(),
        name: format!("ckpt_bench_{}_{random:08x}", std::process::id()),
    })
}

impl PgTarget {
    /// The URL the saver connects to.
    pub fn url(&self) -> String {
        match self {
            PgTarget::Existing(url) => url.clone(),
            PgTarget::Fresh { server, name } => format!("{server}/{name}"),
        }
    }
}

/// The URL the postgres saver runs on, and the fresh database to drop
/// when the run ends (see [`pg_target`]).
///
/// # Errors
/// As [`pg_target`]; the fresh database cannot be created.
pub fn pg_database(url: Option<&str>, server: Option<&str>) -> Res<(String, Option<FreshDb>)> {
    let target = pg_target(url, server, rand::random())?;
    if let PgTarget::Existing(_) = &target {
        eprintln!("[workload] using the named database: dropping and recreating its checkpoint tables");
    }
    let fresh = FreshDb::create(&target)?;
    Ok((target.url(), fresh))
}

/// A fresh database, dropped when this is dropped (a failed run included).
pub struct FreshDb {
    server: String,
    name: String,
}

async fn admin(server: &str, sql: &str) -> Res<()> {
    let (client, conn) = checkpointer::postgres::tokio_postgres::connect(
        &format!("{server}/postgres"),
        checkpointer::postgres::tokio_postgres::NoTls,
    )
    .await?;
    let task = tokio::spawn(conn);
    let out = client.batch_execute(sql).await;
    drop(client);
    let _ = task.await;
    Ok(out?)
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> Res<T> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(f))
}

impl FreshDb {
    /// Creates the database of a [`PgTarget::Fresh`] (`None` for an
    /// existing one).
    pub fn create(target: &PgTarget) -> Res<Option<FreshDb>> {
        let PgTarget::Fresh { server, name } = target else {
            return Ok(None);
        };
        block_on(admin(server, &format!("CREATE DATABASE \"{name}\"")))?
            .map_err(|e| format!("cannot create the benchmark's database {name} on {server}: {e}"))?;
        eprintln!("[workload] created database {name} (dropped at the end)");
        Ok(Some(FreshDb {
            server: server.clone(),
            name: name.clone(),
        }))
    }
}

impl Drop for FreshDb {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        match block_on(admin(&self.server, &sql)) {
            Ok(Ok(())) => eprintln!("[workload] dropped database {}", self.name),
            Ok(Err(e)) | Err(e) => eprintln!("[workload] cannot drop database {}: {e}", self.name),
        }
    }
}

// `cargo bench` builds a bench with cfg(test) but without the test harness
// (benches/tests/workload.rs runs these): there, nothing here is used.
#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;

    #[test]
    fn by_default_a_fresh_database_is_created_never_peer() {
        let a = pg_target(None, None, 1).unwrap();
        let b = pg_target(None, None, 2).unwrap();
        let PgTarget::Fresh { server, name } = &a else {
            panic!("{a:?}")
        };
        assert_eq!(server, DEFAULT_PG_SERVER);
        assert_eq!(name, &format!("ckpt_bench_{}_00000001", std::process::id()));
        assert_ne!(a.url(), b.url());
        assert!(!a.url().ends_with("/peer"), "{}", a.url());
        // an empty flag or variable names nothing
        assert!(matches!(
            pg_target(Some(""), Some(""), 3).unwrap(),
            PgTarget::Fresh { .. }
        ));
        let on = pg_target(None, Some("postgresql://u@h:1/"), 4).unwrap();
        assert_eq!(
            on.url(),
            format!("postgresql://u@h:1/ckpt_bench_{}_00000004", std::process::id())
        );
    }

    fn databases(server: &str) -> Vec<String> {
        let out = std::process::Command::new("psql")
            .args([
                &format!("{server}/postgres"),
                "-Atc",
                "SELECT datname FROM pg_database ORDER BY 1",
            ])
            .output()
            .expect("psql");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn psql(url: &str, sql: &str) -> String {
        let out = std::process::Command::new("psql")
            .args([url, "-v", "ON_ERROR_STOP=1", "-Atc", sql])
            .output()
            .expect("psql");
        assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The postgres worker on the default target (a tiny workload) leaves a
    /// database named `peer` (the old default, which it dropped the tables
    /// of) as it was, sentinel rows in its `checkpoints` table included, and
    /// leaves no database behind. Needs the server at
    /// `CHECKPOINTER_PG_URL` (fails without it).
    #[test]
    fn a_default_run_touches_no_database_it_did_not_create() {
        let server = std::env::var("CHECKPOINTER_PG_URL").unwrap_or_else(|_| DEFAULT_PG_SERVER.into());
        let server = server.trim_end_matches('/').to_owned();
        let before = databases(&server);
        let peer = format!("{server}/peer");
        let created_peer = !before.iter().any(|d| d == "peer");
        if created_peer {
            psql(&format!("{server}/postgres"), "CREATE DATABASE peer");
            psql(
                &peer,
                "CREATE TABLE checkpoints (sentinel text); INSERT INTO checkpoints VALUES ('kept')",
            );
        }
        let snapshot = |url: &str| {
            psql(
                url,
                "SELECT string_agg(c.oid::text || ':' || c.relname, ',' ORDER BY c.oid) FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')",
            )
        };
        let peer_before = snapshot(&peer);
        let (url, fresh) = pg_database(None, Some(&server)).unwrap();
        assert!(fresh.is_some() && !url.ends_with("/peer"), "{url}");
        let args = super::super::Args {
            savers: "postgres".into(),
            threads: 2,
            steps: 3,
            random_gets: 2,
            global_filters: 1,
            repeats: 1,
            pg_url: Some(url.clone()),
            no_floors: false,
            ..super::super::Args::default()
        };
        let ran = super::super::worker(&args, "postgres");
        drop(fresh);
        let after = databases(&server);
        let peer_after = snapshot(&peer);
        // read without failing: the database goes first
        let sentinel = std::process::Command::new("psql")
            .args([&peer, "-Atc", "SELECT sentinel FROM checkpoints"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        if created_peer {
            psql(&format!("{server}/postgres"), "DROP DATABASE peer");
        }
        ran.unwrap();
        assert_eq!(peer_after, peer_before, "the peer database changed");
        if created_peer {
            assert_eq!(sentinel.ok().as_deref(), Some("kept"), "the sentinel row is gone");
        }
        let name = url.rsplit('/').next().unwrap();
        assert!(!after.iter().any(|d| d == name), "{name} was left behind");
    }

    #[test]
    fn only_a_named_database_is_used_as_it_is() {
        let url = "postgresql://postgres@127.0.0.1:5432/peer";
        assert_eq!(pg_target(Some(url), None, 1).unwrap(), PgTarget::Existing(url.into()));
        assert!(pg_target(None, Some("postgresql://postgres@h:5432/peer"), 1).is_err());
        assert!(pg_target(None, Some("postgresql://h?sslmode=disable"), 1).is_err());
    }
}
