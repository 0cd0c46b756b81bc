//! TLS of `RedisSaver`: `rediss://` URLs, with the `redis-tls` feature
//! (rustls, ring provider, webpki roots or a private CA).

/// Whether `url` asks for TLS (`rediss://`, `valkeys://`, the scheme in any
/// case).
pub(crate) fn is_tls(url: &str) -> bool {
    url.get(..9).is_some_and(|s| s.eq_ignore_ascii_case("rediss://"))
        || url.get(..10).is_some_and(|s| s.eq_ignore_ascii_case("valkeys://"))
}

#[cfg(feature = "redis-tls")]
pub(crate) use self::pem::TlsPem;

#[cfg(feature = "redis-tls")]
mod pem {
    use redis::{ClientTlsConfig, TlsCertificates};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    use super::is_tls;
    use crate::error::{Error, Result};
    use crate::secret::redact;

    /// The PEM certificates given to the builder.
    #[derive(Clone, Default)]
    pub(crate) struct TlsPem {
        /// The CAs to trust instead of the webpki roots.
        pub(crate) root_ca: Option<Vec<u8>>,
        /// A client certificate chain and its private key (mutual TLS).
        pub(crate) client: Option<(Vec<u8>, Vec<u8>)>,
    }

    impl TlsPem {
        /// The certificates for the `redis` crate, checked (`None`: the
        /// webpki roots and no client certificate). Installs ring as the
        /// process's rustls provider when a URL asks for TLS and none is
        /// installed.
        pub(crate) fn certificates(&self, urls: &[&str]) -> Result<Option<TlsCertificates>> {
            if urls.iter().any(|u| is_tls(u)) {
                install_ring();
            }
            if self.root_ca.is_none() && self.client.is_none() {
                return Ok(None);
            }
            if let Some(url) = urls.iter().find(|u| !is_tls(u)) {
                return Err(Error::invalid(format!(
                    "RedisSaver: TLS certificates are given but {} is not a rediss:// URL",
                    redact(url)
                )));
            }
            if let Some(pem) = &self.root_ca {
                certificates_in(pem, "the TLS root CA")?;
            }
            if let Some((chain, key)) = &self.client {
                certificates_in(chain, "the TLS client certificate")?;
                // the parser's message names the PEM section, never the key
                PrivateKeyDer::from_pem_slice(key).map_err(|e| {
                    Error::invalid(format!("RedisSaver: the TLS client key is not a PEM private key: {e}"))
                })?;
            }
            Ok(Some(TlsCertificates {
                client_tls: self.client.clone().map(|(client_cert, client_key)| ClientTlsConfig {
                    client_cert,
                    client_key,
                }),
                root_cert: self.root_ca.clone(),
            }))
        }
    }

    /// Checks that `pem` holds one or more certificates.
    fn certificates_in(pem: &[u8], what: &str) -> Result<()> {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::invalid(format!("RedisSaver: {what} is not PEM: {e}")))?;
        if certs.is_empty() {
            return Err(Error::invalid(format!(
                "RedisSaver: {what} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            )));
        }
        Ok(())
    }

    /// The `redis` crate builds its rustls configuration from the process's
    /// default provider, which rustls picks by itself only when exactly one
    /// provider is compiled in: ring is installed when none is, so a
    /// dependency enabling aws-lc-rs too does not make TLS panic.
    fn install_ring() {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // another thread may install one first; either serves
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn certificates_are_checked() {
            let none = TlsPem::default();
            assert!(none.certificates(&["rediss://h"]).unwrap().is_none());
            let junk = TlsPem {
                root_ca: Some(b"not a certificate".to_vec()),
                client: None,
            };
            let err = junk.certificates(&["rediss://h"]).unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
            assert!(err.to_string().contains("no PEM certificate"), "{err}");
            let err = junk.certificates(&["redis://:hunter2@h"]).unwrap_err();
            assert!(err.to_string().contains("not a rediss:// URL"), "{err}");
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tls_urls_are_recognized() {
        assert!(super::is_tls("rediss://h:6380"));
        assert!(super::is_tls("REDISS://h"));
        assert!(!super::is_tls("redis://h"));
        assert!(!super::is_tls("rediss:/h"));
    }
}
