//! The administrative face of the keys of a `RedisSaver` opened by
//! `redis://…`, `rediss://…` or a comma-separated cluster list (see
//! [`crate::OpenOptions`] for the query parameters).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::backend::Conn;
use super::{check_url, error, keys, RedisSaver, DEFAULT_KEY_PREFIX};
use crate::import::{ImportMode, ThreadImport};
use crate::open::{admin_names, percent_decode, OpenOptions, SaverAdmin, StorageSize};
use crate::secret::{is_secret_name, redact, Secrets};
use crate::space::{refuse_rewrite, ReclaimOptions, ReclaimReport, SpaceUsage};
use crate::{Error, Result};

/// A parsed Redis store URL: the node URLs for the `redis` client (without
/// our parameters), the key prefix and the PEM files of a TLS connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RedisUrl {
    nodes: Vec<String>,
    cluster: bool,
    prefix: String,
    ca: Option<PathBuf>,
    client: Option<(PathBuf, PathBuf)>,
}

/// The parameters the `redis` client reads itself, by URL kind.
fn passed_on(base: &str, name: &str) -> bool {
    let unix = ["unix:", "redis+unix:", "valkey+unix:"]
        .iter()
        .any(|s| base.to_ascii_lowercase().starts_with(s));
    name == "protocol" || (unix && matches!(name, "db" | "user" | "pass"))
}

/// Where a comma starts the next node URL of a cluster list.
fn split_nodes(url: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in url.match_indices(',') {
        let next = url.get(i.saturating_add(1)..).unwrap_or_default().to_ascii_lowercase();
        if next.starts_with("redis://") || next.starts_with("rediss://") {
            out.push(url.get(start..i).unwrap_or_default());
            start = i.saturating_add(1);
        }
    }
    out.push(url.get(start..).unwrap_or_default());
    out
}

/// Parses a Redis store URL, without connecting.
///
/// # Errors
/// [`Error::InvalidInput`], the URL masked: a malformed node URL, an
/// unknown or repeated-and-different parameter, `cert` without `key`, TLS
/// files with `redis://`, a bad prefix.
pub(crate) fn parse(url: &str) -> Result<RedisUrl> {
    let bad = |why: &str| Error::invalid(format!("bad Redis URL {}: {why}", redact(url)));
    let texts = split_nodes(url);
    let mut ours: [Option<String>; 4] = Default::default();
    let names = ["prefix", "ca", "cert", "key"];
    let mut nodes = Vec::new();
    for text in &texts {
        let (base, query) = text.split_once('?').unwrap_or((text, ""));
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            if let Some(at) = names.iter().position(|n| *n == name) {
                let value = percent_decode(value)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| bad(&format!("bad {name} value")))?;
                match &ours[at] {
                    Some(seen) if *seen != value => {
                        return Err(bad(&format!("the nodes give different {name} values")))
                    }
                    _ => ours[at] = Some(value),
                }
            } else if passed_on(base, name) || is_secret_name(name) {
                // a credential in the query is refused by check_url, with why
                rest.push(pair);
            } else {
                let shown = if name.len() <= 32 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    format!("`{name}`")
                } else {
                    "a parameter".to_owned()
                };
                return Err(bad(&format!(
                    "unknown query parameter {shown} (known: prefix, ca, cert, key, protocol)"
                )));
            }
        }
        let node = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        check_url(&node)?;
        nodes.push(node);
    }
    let [prefix, ca, cert, key] = ours;
    let client = match (cert, key) {
        (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
        (None, None) => None,
        _ => return Err(bad("cert= and key= go together (a client certificate and its key)")),
    };
    let ca = ca.map(PathBuf::from);
    if (ca.is_some() || client.is_some()) && !texts.iter().all(|t| super::tls::is_tls(t)) {
        return Err(bad("ca=, cert= and key= are for TLS: write rediss://"));
    }
    let prefix = prefix.unwrap_or_else(|| DEFAULT_KEY_PREFIX.to_owned());
    if prefix.contains(['{', '}']) {
        return Err(bad("the prefix must be non-empty, without `{` or `}`"));
    }
    Ok(RedisUrl {
        cluster: nodes.len() > 1,
        nodes,
        prefix,
        ca,
        client,
    })
}

/// The PEM files' contents: the CA's, and the client certificate's and key's.
type Pems = (Option<Vec<u8>>, Option<(Vec<u8>, Vec<u8>)>);

fn read_pems(url: &RedisUrl) -> Result<Pems> {
    let read = |path: &PathBuf, what: &str| {
        std::fs::read(path).map_err(|e| Error::NotFound {
            what: format!("cannot read the {what} {}: {e}", path.display()),
        })
    };
    let ca = url.ca.as_ref().map(|p| read(p, "CA file")).transpose()?;
    let client = match &url.client {
        Some((cert, key)) => Some((read(cert, "client certificate")?, read(key, "client key")?)),
        None => None,
    };
    Ok((ca, client))
}

/// Whether the layout marker of `prefix` is there, asked on a connection
/// of its own that writes nothing (the saver's open writes a missing one).
async fn has_marker(url: &RedisUrl, pems: &Pems, secrets: &Secrets) -> Result<bool> {
    let fail = |e: ::redis::RedisError| error::storage(e, "open", true, secrets);
    let marker = keys::Keys {
        prefix: url.prefix.clone(),
    }
    .marker();
    let timeout = Duration::from_secs(10);
    let get = ::redis::cmd("GET").arg(&marker).clone();
    let found: Option<String> = if url.cluster {
        #[cfg_attr(not(feature = "redis-tls"), allow(unused_mut))]
        let mut builder = ::redis::cluster::ClusterClientBuilder::new(url.nodes.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout);
        #[cfg(feature = "redis-tls")]
        if let Some(certs) = certificates(pems) {
            builder = builder.certs(certs);
        }
        let mut conn = builder
            .build()
            .map_err(fail)?
            .get_async_connection()
            .await
            .map_err(fail)?;
        get.query_async(&mut conn).await.map_err(fail)?
    } else {
        let node = url.nodes.first().map(String::as_str).unwrap_or_default();
        #[cfg(feature = "redis-tls")]
        let client = match certificates(pems) {
            Some(certs) => ::redis::Client::build_with_tls(node, certs),
            None => ::redis::Client::open(node),
        };
        #[cfg(not(feature = "redis-tls"))]
        let client = ::redis::Client::open(node);
        let config = ::redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let mut conn = client
            .map_err(fail)?
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(fail)?;
        get.query_async(&mut conn).await.map_err(fail)?
    };
    let _ = pems;
    Ok(found.is_some())
}

#[cfg(feature = "redis-tls")]
fn certificates(pems: &Pems) -> Option<::redis::TlsCertificates> {
    let (ca, client) = pems;
    if ca.is_none() && client.is_none() {
        return None;
    }
    Some(::redis::TlsCertificates {
        client_tls: client.as_ref().map(|(cert, key)| ::redis::ClientTlsConfig {
            client_cert: cert.clone(),
            client_key: key.clone(),
        }),
        root_cert: ca.clone(),
    })
}

/// Opens the keys of `url`'s prefix as `options` say: not creating, the
/// layout marker must be there and nothing is written.
pub(crate) async fn open(url: &str, options: &OpenOptions) -> Result<Arc<dyn SaverAdmin>> {
    let parsed = parse(url)?;
    let name = redact(url);
    let pems = read_pems(&parsed)?;
    #[cfg(not(feature = "redis-tls"))]
    if pems.0.is_some() || pems.1.is_some() {
        return Err(Error::invalid(format!(
            "{name} gives TLS certificates: build checkpointer with the `redis-tls` feature"
        )));
    }
    let secrets = Secrets::of(url);
    if !options.creates() && !has_marker(&parsed, &pems, &secrets).await? {
        return Err(Error::storage(
            "redis",
            false,
            format!(
                "{name} has no checkpoint store under key prefix {:?}: no RedisSaver wrote there \
                 (check the database number and the ?prefix= of the URL, default {DEFAULT_KEY_PREFIX})",
                parsed.prefix
            ),
        ));
    }
    let mut builder = RedisSaver::builder().key_prefix(parsed.prefix.clone());
    if let Some(serializer) = &options.serializer {
        builder = builder.serializer(serializer.clone());
    }
    if let Some(ttl) = options.ttl {
        builder = builder.ttl(ttl);
    }
    builder = if parsed.cluster {
        builder.cluster(parsed.nodes.clone())
    } else {
        builder.url(parsed.nodes.first().cloned().unwrap_or_default())
    };
    #[cfg(feature = "redis-tls")]
    {
        let (ca, client) = pems;
        if let Some(ca) = ca {
            builder = builder.tls_root_ca_pem(ca);
        }
        if let Some((cert, key)) = client {
            builder = builder.tls_client_cert_pem(cert, key);
        }
    }
    let saver = builder.open().await?;
    Ok(Arc::new(RedisAdmin {
        saver: Arc::new(saver),
        name,
        secrets,
        read_only: options.reads_only(),
    }))
}

#[derive(Debug)]
struct RedisAdmin {
    saver: Arc<RedisSaver>,
    name: String,
    secrets: Secrets,
    /// Opened read-only: `reclaim_space` (a sweep) is refused.
    read_only: bool,
}

impl RedisAdmin {
    fn conn(&self) -> Conn {
        self.saver.engine.backend().conn.clone()
    }

    fn failed(&self, e: ::redis::RedisError) -> Error {
        error::storage(e, "admin", true, &self.secrets)
    }
}

/// `*`, `?`, `[`, `]` and `\` escaped for `SCAN MATCH`.
pub(super) fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[async_trait]
impl SaverAdmin for RedisAdmin {
    admin_names!("redis", "each thread is replaced whole, in one step");

    async fn identity(&self) -> Result<Option<String>> {
        let mut conn = self.conn();
        let prefix = self.saver.key_prefix();
        if let Conn::Cluster(_) = conn {
            // every node lists the same node ids
            let nodes: String = ::redis::cmd("CLUSTER")
                .arg("NODES")
                .query_async(&mut conn)
                .await
                .map_err(|e| self.failed(e))?;
            let mut ids: Vec<&str> = nodes.lines().filter_map(|l| l.split(' ').next()).collect();
            ids.sort_unstable();
            return Ok(Some(format!("redis cluster {} prefix {prefix}", ids.join(","))));
        }
        let info: String = ::redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await
            .map_err(|e| self.failed(e))?;
        let run_id = info
            .lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .unwrap_or_default()
            .trim();
        let db = ::redis::aio::ConnectionLike::get_db(&conn);
        Ok(Some(format!("redis {run_id} db {db} prefix {prefix}")))
    }

    /// The sum of `MEMORY USAGE` over the prefix's keys: its marker and
    /// `<prefix>:<layout>:{*`, found with `SCAN` in batches of about 1000
    /// keys, on the server or on each primary of a cluster. Every key of a
    /// prefix but its marker has a hash tag right after the layout version
    /// and prefixes hold no `{`, so no key of another prefix (`P:v2:x`'s
    /// `P:v2:x:v2:{…}` under `P`) matches.
    async fn storage_size(&self) -> Result<Option<StorageSize>> {
        let prefix = self.saver.key_prefix();
        let pattern = format!("{}:{}:{{*", glob_escape(prefix), keys::LAYOUT);
        let marker = format!("{prefix}:layout").into_bytes();
        let mut conn = self.conn();
        let bytes = match &conn {
            Conn::Single(_) => self.usage_on(&mut conn, None, &pattern, vec![marker]).await?,
            Conn::Cluster(_) => {
                // the marker, routed by its key; then each primary's keys
                let mut total: u64 = ::redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(&marker)
                    .query_async::<Option<u64>>(&mut conn)
                    .await
                    .map_err(|e| self.failed(e))?
                    .unwrap_or(0);
                for slot in self.primary_slots(&mut conn).await? {
                    let found = self.usage_on(&mut conn, Some(slot), &pattern, Vec::new()).await?;
                    total = total.saturating_add(found);
                }
                total
            }
        };
        Ok(Some(StorageSize { bytes, in_memory: true }))
    }

    async fn space_usage(&self) -> Result<Option<SpaceUsage>> {
        Ok(self.storage_size().await?.map(|size| SpaceUsage::whole("keys", size)))
    }

    /// Deleted keys are freed as they go; this sweeps the global index
    /// entries of expired threads, in batches of 256 threads.
    async fn reclaim_space(&self, options: ReclaimOptions) -> Result<ReclaimReport> {
        refuse_rewrite("redis", &options)?;
        if self.read_only {
            return Err(Error::Unsupported {
                operation: "reclaim_space",
                implementer: "a Redis store opened read-only",
            });
        }
        let before = self.space_usage().await?;
        let (mut removed, mut steps) = (0usize, 0u64);
        loop {
            let swept = self.saver.sweep_expired(256).await?;
            steps = steps.saturating_add(1);
            removed = removed.saturating_add(swept.removed);
            if swept.removed.saturating_add(swept.renewed) < 256 {
                break;
            }
        }
        Ok(ReclaimReport {
            before,
            after: self.space_usage().await?,
            steps,
            actions: vec![format!(
                "the index entries of {removed} expired thread(s) swept; deleted keys were freed as they went (UNLINK)"
            )],
        })
    }

    async fn import_thread(&self, thread: &ThreadImport, mode: ImportMode) -> Result<()> {
        self.saver.import_thread(thread, mode).await
    }
}

impl RedisAdmin {
    /// A pipeline run on the server, or on the primary serving `slot`.
    async fn run(
        &self,
        conn: &mut Conn,
        slot: Option<u16>,
        pipe: ::redis::Pipeline,
        count: usize,
    ) -> Result<Vec<::redis::Value>> {
        route(conn, slot, pipe, count).await.map_err(|e| self.failed(e))
    }

    /// The sum of `MEMORY USAGE` over `extra` and the keys matching
    /// `pattern` on one node (see [`run`](Self::run)).
    async fn usage_on(
        &self,
        conn: &mut Conn,
        slot: Option<u16>,
        pattern: &str,
        mut extra: Vec<Vec<u8>>,
    ) -> Result<u64> {
        let mut total: u64 = 0;
        let mut cursor: u64 = 0;
        loop {
            let mut scan = ::redis::pipe();
            scan.cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000);
            let reply = self.run(conn, slot, scan, 1).await?.into_iter().next();
            let (next, mut found): (u64, Vec<Vec<u8>>) = self.parse(reply.unwrap_or(::redis::Value::Nil))?;
            found.append(&mut extra);
            if !found.is_empty() {
                let mut pipe = ::redis::pipe();
                for k in &found {
                    pipe.cmd("MEMORY").arg("USAGE").arg(k);
                }
                for size in self.run(conn, slot, pipe, found.len()).await? {
                    let size: Option<u64> = self.parse(size)?;
                    total = total.saturating_add(size.unwrap_or(0));
                }
            }
            if next == 0 {
                return Ok(total);
            }
            cursor = next;
        }
    }

    fn parse<T: ::redis::FromRedisValue>(&self, v: ::redis::Value) -> Result<T> {
        ::redis::from_redis_value(v).map_err(|e| self.failed(e.into()))
    }

    /// One slot of each primary of the cluster.
    async fn primary_slots(&self, conn: &mut Conn) -> Result<Vec<u16>> {
        primary_slots(conn).await.map_err(|e| self.failed(e))
    }
}

/// A pipeline run on the server, or on the primary serving `slot`.
pub(super) async fn route(
    conn: &mut Conn,
    slot: Option<u16>,
    pipe: ::redis::Pipeline,
    count: usize,
) -> ::redis::RedisResult<Vec<::redis::Value>> {
    use ::redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
    match (conn, slot) {
        (Conn::Cluster(c), Some(slot)) => {
            let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
            c.route_pipeline(pipe, 0, count, route).await
        }
        (conn, _) => pipe.query_async::<Vec<::redis::Value>>(conn).await,
    }
}

/// One slot of each primary of the cluster (`CLUSTER SLOTS`: each range
/// names its primary first).
pub(super) async fn primary_slots(conn: &mut Conn) -> ::redis::RedisResult<Vec<u16>> {
    use ::redis::Value as V;
    let ranges: Vec<V> = ::redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await?;
    let mut seen = Vec::new();
    let mut slots = Vec::new();
    for range in ranges {
        let V::Array(parts) = range else { continue };
        let (Some(V::Int(start)), Some(V::Array(primary))) = (parts.first(), parts.get(2)) else {
            continue;
        };
        let node = primary.get(..2).map(<[V]>::to_vec);
        let Ok(slot) = u16::try_from(*start) else { continue };
        if !seen.contains(&node) {
            seen.push(node);
            slots.push(slot);
        }
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        assert_eq!(
            parse("redis://:pw@h:6380/2?prefix=my%20app&protocol=resp3").unwrap(),
            RedisUrl {
                nodes: vec!["redis://:pw@h:6380/2?protocol=resp3".to_owned()],
                cluster: false,
                prefix: "my app".to_owned(),
                ca: None,
                client: None,
            }
        );
        assert_eq!(
            parse("rediss://:pw@h:6380/2?prefix=p&ca=/etc/my%20ca.pem&cert=c.pem&key=c.key").unwrap(),
            RedisUrl {
                nodes: vec!["rediss://:pw@h:6380/2".to_owned()],
                cluster: false,
                prefix: "p".to_owned(),
                ca: Some(PathBuf::from("/etc/my ca.pem")),
                client: Some((PathBuf::from("c.pem"), PathBuf::from("c.key"))),
            }
        );
        assert_eq!(parse("redis://h").unwrap().prefix, "ckpt");
        let cluster = parse("redis://h:7000,redis://h:7001?prefix=p").unwrap();
        assert_eq!(cluster.nodes, ["redis://h:7000", "redis://h:7001"]);
        assert!(cluster.cluster);
        assert_eq!(cluster.prefix, "p");
        // more in the CLI's store tests and tests/api/open.rs
        for bad in [
            "redis://h?prefix=",
            "rediss://h?key=/c.key",
            "redis://h?bogus=1",
            "redis://h:1?prefix=a,redis://h:2?prefix=b",
            "redis://h?prefix=%zz",
        ] {
            assert!(matches!(parse(bad), Err(Error::InvalidInput { .. })), "{bad}");
        }
    }

    #[test]
    fn passwords_are_masked() {
        for url in [
            "redis://:secret@h:port",
            "redis://:secret@h?ca=ca.pem",
            "redis://:secret@h?bogus=1",
            "redis://:secret@h/0?password=secret",
        ] {
            let e = parse(url).unwrap_err().to_string();
            assert!(!e.contains("secret"), "{e}");
        }
        let e = parse("redis://:secret@h?ca=ca.pem").unwrap_err().to_string();
        assert!(e.contains("rediss://"), "{e}");
    }
}
