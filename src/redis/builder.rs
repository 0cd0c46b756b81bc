//! [`RedisSaverBuilder`]: the settings of a [`RedisSaver`], the URL checks
//! and the connection.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::backend::{Conn, Redis};
use super::keys::Keys;
use super::schema::check_marker;
use super::{error, tls, RedisSaver, Sweeper, TtlConfig, DEFAULT_KEY_PREFIX};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::saver::{op_span, traced};
use crate::secret::{is_secret_name, redact, Secrets};
use crate::serde::{JsonPlusSerializer, Serializer};
use crate::setters::setters;

/// Configures and opens a [`RedisSaver`].
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> checkpointer::Result<()> {
/// use std::time::Duration;
/// use checkpointer::redis::RedisSaver;
/// let saver = RedisSaver::builder()
///     .url("redis://127.0.0.1:6379/2")
///     .key_prefix("agents")
///     .response_timeout(Some(Duration::from_secs(10)))
///     .open()
///     .await?;
/// # drop(saver);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisSaverBuilder {
    url: Option<String>,
    cluster: Option<Vec<String>>,
    prefix: String,
    serde: Arc<dyn Serializer>,
    response_timeout: Option<Duration>,
    connection_timeout: Option<Duration>,
    ttl: Option<TtlConfig>,
    sweep_interval: Option<Option<Duration>>,
    #[cfg(feature = "redis-tls")]
    tls: tls::TlsPem,
    retention: crate::engine::retain::RetentionSchedule,
}

impl Default for RedisSaverBuilder {
    fn default() -> Self {
        RedisSaverBuilder {
            url: None,
            cluster: None,
            prefix: DEFAULT_KEY_PREFIX.to_owned(),
            serde: Arc::new(JsonPlusSerializer),
            response_timeout: Some(Duration::from_secs(60)),
            connection_timeout: Some(Duration::from_secs(10)),
            ttl: None,
            sweep_interval: None,
            #[cfg(feature = "redis-tls")]
            tls: tls::TlsPem::default(),
            retention: crate::engine::retain::RetentionSchedule::default(),
        }
    }
}

impl fmt::Debug for RedisSaverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RedisSaverBuilder");
        d.field("url", &self.url.as_deref().map(redact))
            .field(
                "cluster",
                &self
                    .cluster
                    .as_ref()
                    .map(|nodes| nodes.iter().map(|n| redact(n)).collect::<Vec<_>>()),
            )
            .field("key_prefix", &self.prefix)
            .field("serde", &self.serde)
            .field("response_timeout", &self.response_timeout)
            .field("connection_timeout", &self.connection_timeout)
            .field("ttl", &self.ttl)
            .field("sweep_interval", &self.sweep_interval);
        // whether certificates are set, never their bytes (a client key)
        #[cfg(feature = "redis-tls")]
        d.field("tls_root_ca", &self.tls.root_ca.is_some())
            .field("tls_client_cert", &self.tls.client.is_some());
        d.finish()
    }
}

impl RedisSaverBuilder {
    setters! {
        /// The server: `redis://[user:password@]host[:port][/db]`, or
        /// `rediss://…` for TLS (the `redis-tls` feature).
        pub fn url(url: impl Into<String>) => url = Some(url.into());
    }

    /// A Redis Cluster instead of one server: the URLs of some of its
    /// masters (`redis://[user:password@]host:port`, no database number;
    /// the client discovers the other nodes and follows slot moves). Each
    /// operation on a thread is one script on the thread's slot; the two
    /// global indexes share one slot (`docs/design.md`, *Redis layout*).
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> checkpointer::Result<()> {
    /// use checkpointer::redis::RedisSaver;
    /// let saver = RedisSaver::builder()
    ///     .cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000", "redis://10.0.0.3:7000"])
    ///     .key_prefix("agents")
    ///     .open()
    ///     .await?;
    /// # drop(saver);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cluster<S: Into<String>>(mut self, nodes: impl IntoIterator<Item = S>) -> Self {
        self.cluster = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    setters! {
        /// The prefix of every key (default [`DEFAULT_KEY_PREFIX`]): savers
        /// with different prefixes on one database do not see each other.
        pub fn key_prefix(prefix: impl Into<String>) => prefix = prefix.into();

        /// The serializer of every stored value (default [`JsonPlusSerializer`]).
        pub fn serializer(serde: Arc<dyn Serializer>) => serde = serde;

        /// How long one command may wait for its answer (default 60 s; `None`:
        /// forever). A write that times out may or may not have been applied.
        pub fn response_timeout(timeout: Option<Duration>) => response_timeout = timeout;

        /// Threads expire `ttl.default_ttl()` after their last write (or read,
        /// with [`TtlConfig::refresh_on_read`]): each write gives every key of
        /// the thread one deadline, in the same script, so a thread expires
        /// whole (checkpoints, values and pending writes together) and never
        /// leaves a key behind. Without a TTL (the default) threads live until
        /// deleted, and a write keeps whatever deadline the thread has.
        ///
        /// Savers sharing a key prefix should share the TTL setting: a saver
        /// without one writing a thread that has a deadline keeps the deadline,
        /// and the entries it adds to the global index are not swept.
        ///
        /// ```no_run
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() -> checkpointer::Result<()> {
        /// use checkpointer::redis::{RedisSaver, TtlConfig};
        /// let saver = RedisSaver::builder()
        ///     .url("redis://127.0.0.1:6379")
        ///     .ttl(TtlConfig::minutes(60.0).refresh_on_read(true))
        ///     .open()
        ///     .await?;
        /// # drop(saver);
        /// # Ok(())
        /// # }
        /// ```
        pub fn ttl(ttl: TtlConfig) => ttl = Some(ttl);

        /// How often a saver with a TTL removes expired threads from the
        /// global index ([`RedisSaver::sweep_expired`]) in a background task
        /// (default: the TTL, at most an hour; `None`: never, the caller
        /// sweeps). The task stops when the last clone of the saver is dropped.
        pub fn sweep_interval(interval: Option<Duration>) => sweep_interval = Some(interval);

        /// How long opening the connection may take (default 10 s).
        pub fn connection_timeout(timeout: Option<Duration>) => connection_timeout = timeout;

        /// Trusts the certificate authorities in `pem` (one or more PEM
        /// certificates) instead of the webpki roots: for a server whose
        /// certificate a private CA signed. The URLs must be `rediss://`.
        ///
        /// ```no_run
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() -> checkpointer::Result<()> {
        /// use checkpointer::redis::RedisSaver;
        /// let saver = RedisSaver::builder()
        ///     .url("rediss://10.0.0.5:6380")
        ///     .tls_root_ca_pem(std::fs::read("/etc/redis/ca.pem").expect("the CA"))
        ///     .open()
        ///     .await?;
        /// # drop(saver);
        /// # Ok(())
        /// # }
        /// ```
        #[cfg(feature = "redis-tls")]
        pub fn tls_root_ca_pem(pem: impl Into<Vec<u8>>) => tls.root_ca = Some(pem.into());
    }

    /// Mutual TLS: presents this client certificate chain and its private
    /// key (both PEM) to servers that ask for one (`tls-auth-clients`).
    /// The URLs must be `rediss://`; the key never appears in `Debug`
    /// output or errors.
    #[cfg(feature = "redis-tls")]
    pub fn tls_client_cert_pem(mut self, cert_chain: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.tls.client = Some((cert_chain.into(), key.into()));
        self
    }

    /// Connects, then writes the layout marker (`<prefix>:layout`) or
    /// checks the one stored.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] without a URL (or cluster nodes), with both,
    /// for a malformed one or an empty key prefix, for a `rediss://` URL
    /// without the `redis-tls` feature, for TLS certificates that are not
    /// PEM or given with a `redis://` URL; [`Error::Storage`] when the
    /// server cannot be reached (a failed TLS handshake, a certificate no
    /// trusted CA signed), or the marker names another layout. The URL's
    /// password never appears in them.
    pub async fn open(mut self) -> Result<RedisSaver> {
        let retention = std::mem::take(&mut self.retention);
        retention.check()?;
        let saver = traced(op_span("open", "", "", None), self.open_inner()).await?;
        retention.start(&saver.engine)?;
        Ok(saver)
    }

    crate::engine::retain::retention_option!();

    async fn open_inner(self) -> Result<RedisSaver> {
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(Error::invalid(
                "RedisSaver: the key prefix must be non-empty, without `{` or `}`",
            ));
        }
        let urls: Vec<&str> = self
            .url
            .iter()
            .chain(self.cluster.iter().flatten())
            .map(String::as_str)
            .collect();
        #[cfg(not(feature = "redis-tls"))]
        if let Some(url) = urls.iter().find(|u| tls::is_tls(u)) {
            return Err(Error::invalid(format!(
                "RedisSaver: {} asks for TLS (rediss://): build checkpointer with the `redis-tls` feature",
                redact(url)
            )));
        }
        for url in &urls {
            if let Some(why) = credential_in_query(url) {
                return Err(bad_url(url, &why));
            }
        }
        #[cfg(feature = "redis-tls")]
        let certs = self.tls.certificates(&urls)?;
        let (conn, shown, secrets) = match (self.url, self.cluster) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "RedisSaver: give either a URL or cluster nodes, not both",
                ))
            }
            (None, None) => return Err(Error::invalid("RedisSaver: no URL given")),
            (Some(url), None) => {
                let secrets = Secrets::of(&url);
                let bad = |e: ::redis::RedisError| bad_url(&url, &secrets.scrub(&e.to_string()));
                let client = ::redis::Client::open(url.as_str()).map_err(bad)?;
                #[cfg(feature = "redis-tls")]
                let client = match certs {
                    Some(certs) => ::redis::Client::build_with_tls(url.as_str(), certs).map_err(bad)?,
                    None => client,
                };
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_secs(2))
                    .set_response_timeout(self.response_timeout)
                    .set_connection_timeout(self.connection_timeout);
                let conn = ConnectionManager::new_with_config(client, config)
                    .await
                    .map_err(|e| error::storage(e, "open", true, &secrets))?;
                (Conn::Single(conn), redact(&url), secrets)
            }
            (None, Some(nodes)) => {
                if nodes.is_empty() {
                    return Err(Error::invalid("RedisSaver: no cluster node given"));
                }
                let secrets = Secrets::of_all(&nodes);
                let shown = nodes.iter().map(|n| redact(n)).collect::<Vec<_>>().join(",");
                let mut builder = ::redis::cluster::ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                    .retries(4)
                    .max_retry_wait(2000);
                if let Some(t) = self.response_timeout {
                    builder = builder.response_timeout(t);
                }
                if let Some(t) = self.connection_timeout {
                    builder = builder.connection_timeout(t);
                }
                #[cfg(feature = "redis-tls")]
                if let Some(certs) = certs {
                    builder = builder.certs(certs);
                }
                let client = builder
                    .build()
                    .map_err(|e| Error::invalid(format!("bad Redis URL {shown}: {}", secrets.scrub(&e.to_string()))))?;
                let conn = client
                    .get_async_connection()
                    .await
                    .map_err(|e| error::storage(e, "open", true, &secrets))?;
                (Conn::Cluster(conn), shown, secrets)
            }
        };
        let backend = Redis {
            conn,
            keys: Keys { prefix: self.prefix },
            serde: self.serde,
            secrets,
            ttl: self.ttl,
        };
        check_marker(&backend).await?;
        let engine = Engine::new(backend);
        let interval = match (self.ttl, self.sweep_interval) {
            (None, _) | (_, Some(None)) => None,
            (Some(_), Some(Some(every))) => Some(every),
            (Some(t), None) => Some(t.default_ttl.min(Duration::from_secs(3600))),
        };
        let sweeper = interval.map(|every| Arc::new(spawn_sweeper(&engine, every)));
        Ok(RedisSaver {
            engine,
            shown: shown.into(),
            _sweeper: sweeper,
        })
    }
}

/// Sweeps every `every` while a saver sharing the engine is alive.
fn spawn_sweeper(engine: &Engine<Redis>, every: Duration) -> Sweeper {
    // a failed sweep is retried at the next tick; a sweep removes 512
    // threads at most, the rest wait for the next
    let task = engine.every(&tokio::runtime::Handle::current(), every, |backend| async move {
        let _ = traced(op_span("sweep", "", "", None), backend.sweep(512)).await;
    });
    Sweeper(task.abort_handle())
}

/// The error for a URL that cannot be used, `why` free of its secrets.
fn bad_url(url: &str, why: &str) -> Error {
    Error::invalid(format!("bad Redis URL {}: {why}", redact(url)))
}

/// Checks a Redis URL as [`RedisSaverBuilder::open`] reads it, without
/// connecting: its form, and no credential in its query, which the `redis`
/// client would ignore (`redis://host/0?password=…`; a password goes in the
/// user info, `redis://[user]:PASSWORD@host`; a `redis+unix://` URL's
/// `pass=` is read).
///
/// ```
/// use checkpointer::redis::check_url;
/// assert!(check_url("redis://:s3cret@127.0.0.1:6379/0").is_ok());
/// let e = check_url("redis://127.0.0.1/0?password=s3cret").unwrap_err();
/// assert!(e.to_string().contains("`password`") && !e.to_string().contains("s3cret"), "{e}");
/// let e = check_url("redis://:s3cret/x@127.0.0.1/0").unwrap_err();
/// assert!(!e.to_string().contains("s3cret"), "{e}");
/// ```
///
/// # Errors
/// [`Error::InvalidInput`], the URL masked ([`crate::secret::redact`]).
pub fn check_url(url: &str) -> Result<()> {
    if let Some(why) = credential_in_query(url) {
        return Err(bad_url(url, &why));
    }
    ::redis::Client::open(url).map_err(|e| bad_url(url, &Secrets::of(url).scrub(&e.to_string())))?;
    Ok(())
}

/// Why the query of `url` is refused: a parameter named like a credential
/// (`password`, `token`, `auth`…), which the `redis` client does not read
/// (but a `pass` on a unix socket URL, which it does).
fn credential_in_query(url: &str) -> Option<String> {
    let (base, query) = url.split_once('?')?;
    let base = base.to_ascii_lowercase();
    let unix = ["unix:", "redis+unix:", "valkey+unix:"]
        .iter()
        .any(|s| base.starts_with(s));
    let query = query.split('#').next().unwrap_or_default();
    for param in query.split('&') {
        let key = param.split_once('=').map_or(param, |(k, _)| k);
        if !is_secret_name(key) || (unix && key == "pass") {
            continue;
        }
        let plain = key.len() <= 32 && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let name = if plain {
            format!("`{key}`")
        } else {
            "a parameter".to_owned()
        };
        return Some(format!(
            "the query holds {name}, named like a credential, which the redis client does not read: \
             give the password in the user info, percent-encoded (redis://[USER]:PASSWORD@HOST)"
        ));
    }
    None
}
