//! [`PostgresSaverBuilder`]: where the connections come from, the pool
//! they are kept in, and the timeouts that bound them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, QueueMode, RecyclingMethod, Runtime};

use super::conn::Inner;
use super::conn::StatementMode;
use super::PostgresSaver;
use crate::error::{Error, Result};
use crate::secret::redact;
use crate::serde::{JsonPlusSerializer, Serializer};
use crate::setters::setters;

/// The default of [`PostgresSaverBuilder::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

enum Source {
    Url(String),
    Config(Box<tokio_postgres::Config>),
    Pool(Pool),
}

/// Builds a [`PostgresSaver`] from a URL, a `tokio_postgres::Config` or an
/// existing pool: [`open`](Self::open)`.await` returns it ready to use
/// (connected, tables created or migrated); [`build`](Self::build) is the
/// sync variant that does no I/O now, and the caller runs
/// [`setup`](PostgresSaver::setup).
///
/// ```no_run
/// # async fn demo(pool: checkpointer::postgres::deadpool_postgres::Pool) -> checkpointer::Result<()> {
/// use checkpointer::postgres::PostgresSaver;
/// let saver = PostgresSaver::builder()
///     .url("postgresql://app@db.internal:5432/app")
///     .max_connections(8)
///     .open()
///     .await?;
/// // on a pool the application already has
/// let shared = PostgresSaver::builder().pool(pool).open().await?;
/// # Ok(())
/// # }
/// ```
///
/// Without I/O now (sync code, or a role that may not run migrations):
///
/// ```
/// use checkpointer::postgres::{PostgresSaver, StatementMode};
/// let saver = PostgresSaver::builder()
///     .url("postgresql://app@db.internal:6432/app")
///     .statement_mode(StatementMode::Unnamed) // behind PgBouncer
///     .max_connections(8)
///     .build()
///     .unwrap(); // no connection is made until the first call
/// ```
#[must_use]
pub struct PostgresSaverBuilder {
    source: Option<Source>,
    max_connections: usize,
    mode: StatementMode,
    serde: Arc<dyn Serializer>,
    connect_timeout: Duration,
    wait_timeout: Option<Duration>,
    call_timeout: Option<Duration>,
    statement_timeout: Option<Duration>,
    keepalives_idle: Option<Duration>,
    keepalives_interval: Option<Duration>,
    keepalives_retries: Option<u32>,
    tcp_user_timeout: Option<Duration>,
    group_commit: bool,
    fill_from_parent: bool,
    #[cfg(feature = "postgres-tls")]
    tls: Option<rustls::ClientConfig>,
    retention: Option<(crate::retention::RetentionPolicy, Duration)>,
}

impl fmt::Debug for PostgresSaverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Some(Source::Url(url)) => Some(redact(url)),
            // tokio_postgres's Config Debug masks its password itself
            Some(Source::Config(config)) => Some(format!("{config:?}")),
            Some(Source::Pool(_)) => Some("pool".to_owned()),
            None => None,
        };
        f.debug_struct("PostgresSaverBuilder")
            .field("source", &source)
            .field("max_connections", &self.max_connections)
            .field("mode", &self.mode)
            .field("connect_timeout", &self.connect_timeout)
            .field("wait_timeout", &self.wait_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("keepalives_idle", &self.keepalives_idle)
            .field("keepalives_interval", &self.keepalives_interval)
            .field("keepalives_retries", &self.keepalives_retries)
            .field("tcp_user_timeout", &self.tcp_user_timeout)
            .field("group_commit", &self.group_commit)
            .field("fill_from_parent", &self.fill_from_parent)
            .finish_non_exhaustive()
    }
}

impl Default for PostgresSaverBuilder {
    fn default() -> Self {
        PostgresSaverBuilder {
            source: None,
            max_connections: 16,
            mode: StatementMode::default(),
            serde: Arc::new(JsonPlusSerializer),
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Some(Duration::from_secs(30)),
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            statement_timeout: None,
            keepalives_idle: None,
            keepalives_interval: None,
            keepalives_retries: None,
            tcp_user_timeout: None,
            group_commit: true,
            fill_from_parent: true,
            #[cfg(feature = "postgres-tls")]
            tls: None,
            retention: None,
        }
    }
}

impl PostgresSaverBuilder {
    setters! {
        /// Connect with a `postgresql://` URL (or a `key=value` connection
        /// string). Its password never appears in errors or `Debug` output (see
        /// [`crate::secret::redact`]).
        pub fn url(url: impl Into<String>) => source = Some(Source::Url(url.into()));

        /// Connect with a `tokio_postgres::Config`.
        pub fn config(config: tokio_postgres::Config) => source = Some(Source::Config(Box::new(config)));

        /// Use an existing pool (shared with the rest of the application). The
        /// pool's own size, connect and wait timeouts and TLS settings apply
        /// (this builder's `max_connections`, `connect_timeout`, `wait_timeout`
        /// and `tls` are ignored); the call and statement timeouts still apply.
        /// [`open`](Self::open) runs the migrations over one of its connections;
        /// [`build`](Self::build) takes none.
        pub fn pool(pool: Pool) => source = Some(Source::Pool(pool));

        /// The most connections the saver's pool opens (default 16).
        pub fn max_connections(n: usize) => max_connections = n.max(1);

        /// How statements are sent (default [`StatementMode::Prepared`]).
        pub fn statement_mode(mode: StatementMode) => mode = mode;

        /// The serializer of channel values and writes (default
        /// [`JsonPlusSerializer`]).
        pub fn serializer(serde: Arc<dyn Serializer>) => serde = serde;

        /// How long opening a connection may take (default 10 s).
        pub fn connect_timeout(timeout: Duration) => connect_timeout = timeout;

        /// How long a call waits for a free connection when all are busy
        /// (default 30 s; `None` waits indefinitely).
        pub fn wait_timeout(timeout: Option<Duration>) => wait_timeout = timeout;

        /// The longest one call may take, from asking the pool for a connection
        /// to the last row (default [`DEFAULT_CALL_TIMEOUT`], 60 s; `None` waits
        /// indefinitely). See [Timeouts](super#timeouts).
        pub fn call_timeout(timeout: Option<Duration>) => call_timeout = timeout;

        /// Group commit of `put` and `put_writes` (default on): writes that
        /// arrive while another is in flight are sent together, in one
        /// transaction and one round trip, so concurrent writers share one WAL
        /// flush; each write still succeeds or fails alone, and is acknowledged
        /// only once its transaction committed. A write with none in flight is
        /// sent at once, alone. Turn it off behind a pooler that refuses
        /// multi-statement transactions (PgBouncer `pool_mode = statement`), or
        /// to spread very large concurrent puts over several server processes
        /// (a group's statements run one after another on one connection).
        pub fn group_commit(on: bool) => group_commit = on;

        /// Whether `put` keeps, for a channel the checkpoint gives a version but
        /// no value and `new_versions` does not name, the inline value the
        /// parent holds at that version (default `true`: a caller may pass only
        /// the values that changed). With `false` the checkpoint's values are
        /// stored exactly as given, as Python's `PostgresSaver` stores them:
        /// what a drop-in for Python's saver (the `langgraph-checkpoint-rs`
        /// package) needs for identical rows.
        ///
        /// ```
        /// # use checkpointer::postgres::PostgresSaver;
        /// let builder = PostgresSaver::builder().fill_from_parent(false);
        /// # let _ = builder;
        /// ```
        pub fn fill_from_parent(fill: bool) => fill_from_parent = fill;

        /// The server-side `statement_timeout` of the saver's connections, sent
        /// as a startup option (default `None`: the server's setting). A
        /// statement it cancels fails with a retryable [`Error::Storage`]
        /// (SQLSTATE 57014); nothing of it was committed. Poolers that refuse
        /// startup options (PgBouncer without `ignore_startup_parameters =
        /// options`) need it set on the role or database instead (`ALTER ROLE
        /// … SET statement_timeout = …`).
        pub fn statement_timeout(timeout: Option<Duration>) => statement_timeout = timeout;

        /// Idle time before the first TCP keepalive probe (the connection string's
        /// `keepalives_idle`, else the system's two hours).
        pub fn keepalives_idle(idle: Duration) => keepalives_idle = Some(idle);

        /// Time between unanswered TCP keepalive probes (`keepalives_interval`).
        pub fn keepalives_interval(interval: Duration) => keepalives_interval = Some(interval);

        /// Unanswered TCP keepalive probes before the connection is dropped
        /// (`keepalives_retries`).
        pub fn keepalives_retries(retries: u32) => keepalives_retries = Some(retries);

        /// How long sent data may stay unacknowledged before the system drops
        /// the connection (`tcp_user_timeout`, Linux only; default the system's,
        /// about 15 minutes). A connection abandoned by a [`call_timeout`](Self::call_timeout)
        /// while its request was in flight is closed in the background once
        /// this expires.
        pub fn tcp_user_timeout(timeout: Duration) => tcp_user_timeout = Some(timeout);

        /// Connect over TLS (rustls) with this client configuration, as the
        /// URL's `sslmode` asks (`prefer` by default, `require`, `disable`).
        #[cfg(feature = "postgres-tls")]
        pub fn tls(config: rustls::ClientConfig) => tls = Some(config);
    }

    /// Connect over TLS trusting the Mozilla root certificates
    /// (`webpki-roots`), with the `ring` crypto provider.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if rustls cannot build the configuration.
    #[cfg(feature = "postgres-tls")]
    pub fn tls_with_webpki_roots(self) -> Result<Self> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid(format!("TLS configuration: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(self.tls(config))
    }

    /// Opens the saver, ready to use: builds it, connects and creates or
    /// migrates the tables ([`PostgresSaver::setup`]). A no-op on the schema
    /// when the migrations already ran (by this crate or by Python's saver).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a missing or malformed URL (as
    /// [`Self::build`]); [`Error::Storage`] when the server cannot be reached
    /// or the migrations fail (as [`PostgresSaver::setup`]). The URL's
    /// password never appears in them.
    pub async fn open(mut self) -> Result<PostgresSaver> {
        let retention = self.retention.take();
        if let Some((policy, _)) = &retention {
            policy.validate()?;
        }
        let saver = self.build()?;
        saver.setup().await?;
        if let Some((policy, every)) = retention {
            // detached: it ends once the saver is dropped
            drop(saver.engine.spawn_retention(policy, every)?);
        }
        Ok(saver)
    }

    /// Runs a retention policy every `every` in the background once the
    /// saver is open (see [`crate::retention`]), until every clone of the
    /// saver is dropped. A policy that does not validate fails `open`.
    pub fn retention(mut self, policy: crate::retention::RetentionPolicy, every: Duration) -> Self {
        self.retention = Some((policy, every));
        self
    }

    /// The sync, lazy variant of [`Self::open`]: builds the saver without
    /// any I/O. No connection is opened here (the first call opens one) and
    /// the tables are not created: run [`PostgresSaver::setup`] before using
    /// it on a fresh database. For sync code, or a role that may not run
    /// migrations.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a missing or malformed URL.
    pub fn build(mut self) -> Result<PostgresSaver> {
        let (pool, mode, call_timeout) = self.connection("PostgresSaverBuilder")?;
        Ok(PostgresSaver::over(Inner {
            pool,
            mode,
            serde: self.serde,
            lz4: tokio::sync::OnceCell::new(),
            call_timeout,
            group: self
                .group_commit
                .then(|| super::group::Group::new(super::group::DEFAULT_UNITS)),
            fill_from_parent: self.fill_from_parent,
        }))
    }

    /// The pool (made now, no connection opened), the statement mode and
    /// the call timeout, for the saver or another user of the same
    /// connection settings (`who` names it in the error).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a missing or malformed URL.
    pub(crate) fn connection(&mut self, who: &str) -> Result<(Pool, StatementMode, Option<Duration>)> {
        let pool = match self.source.take() {
            Some(Source::Pool(pool)) => pool,
            Some(Source::Url(url)) => {
                let config = super::parse_connection_string(&url)?;
                self.make_pool(config, self.max_connections)?
            }
            Some(Source::Config(config)) => self.make_pool(*config, self.max_connections)?,
            None => return Err(Error::invalid(format!("{who} needs a url, a config or a pool"))),
        };
        Ok((pool, self.mode, self.call_timeout))
    }

    fn make_pool(&self, mut config: tokio_postgres::Config, size: usize) -> Result<Pool> {
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(self.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("checkpointer");
        }
        config.keepalives(true);
        if let Some(idle) = self.keepalives_idle {
            config.keepalives_idle(idle);
        }
        if let Some(interval) = self.keepalives_interval {
            config.keepalives_interval(interval);
        }
        if let Some(retries) = self.keepalives_retries {
            config.keepalives_retries(retries);
        }
        if let Some(timeout) = self.tcp_user_timeout {
            config.tcp_user_timeout(timeout);
        }
        if let Some(timeout) = self.statement_timeout {
            let setting = format!("-c statement_timeout={}", timeout.as_millis());
            let options = match config.get_options() {
                Some(options) if !options.is_empty() => format!("{options} {setting}"),
                _ => setting,
            };
            config.options(options);
        }
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        #[cfg(feature = "postgres-tls")]
        let manager = match &self.tls {
            Some(tls) => Manager::from_config(
                config,
                tokio_postgres_rustls::MakeRustlsConnect::new(tls.clone()),
                manager_config,
            ),
            None => Manager::from_config(config, tokio_postgres::NoTls, manager_config),
        };
        #[cfg(not(feature = "postgres-tls"))]
        let manager = Manager::from_config(config, tokio_postgres::NoTls, manager_config);
        Pool::builder(manager)
            .max_size(size)
            // The most recently used connection first: its prepared
            // statements have their plans and its caches are warm, and
            // connections a burst opened stay idle until recycled.
            .queue_mode(QueueMode::Lifo)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(self.connect_timeout + Duration::from_secs(1)))
            .wait_timeout(self.wait_timeout)
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| Error::invalid(format!("cannot build the connection pool: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_refuses_bad_urls() {
        assert!(matches!(
            PostgresSaver::builder().url("postgresql://[::1").build(),
            Err(Error::InvalidInput { .. })
        ));
        assert!(matches!(
            PostgresSaver::builder().build(),
            Err(Error::InvalidInput { .. })
        ));
    }
}
