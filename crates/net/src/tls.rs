//! TLS configurations (rustls with the ring provider) and RSA for
//! caching_sha2_password's key exchange.

use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;
use thiserror::Error;

/// A TLS or RSA set-up that failed, saying which file or key and why.
#[derive(Debug, Error)]
pub enum NetError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Pem { path: String, what: String },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("{0}: not a host name or address to verify")]
    ServerName(String),
    #[error("RSA: {0}")]
    Rsa(String),
}

fn pem_err(path: &str, what: impl std::fmt::Display) -> NetError {
    NetError::Pem {
        path: path.to_string(),
        what: what.to_string(),
    }
}

/// A cipher suite under OpenSSL's name: TLS 1.3 suites keep the IANA
/// name, TLS 1.2 ones are spelled like ECDHE-RSA-AES128-GCM-SHA256.
pub fn openssl_name(suite: rustls::CipherSuite) -> String {
    let iana = format!("{suite:?}");
    if let Some(rest) = iana.strip_prefix("TLS13_") {
        return format!("TLS_{rest}");
    }
    let Some(rest) = iana.strip_prefix("TLS_") else {
        return iana;
    };
    let (kx, cipher) = rest.split_once("_WITH_").unwrap_or((rest, ""));
    let cipher = cipher
        .replace("AES_128_", "AES128-")
        .replace("AES_256_", "AES256-")
        .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305")
        .replace('_', "-");
    format!("{}-{cipher}", kx.replace('_', "-"))
}

/// The suites sextant offers, as OpenSSL lists them (`Ssl_cipher_list`).
pub fn offered_suites() -> String {
    provider()
        .cipher_suites
        .iter()
        .map(|s| openssl_name(s.suite()))
        .collect::<Vec<_>>()
        .join(":")
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem(path: &str, what: &'static str) -> Result<Vec<u8>, NetError> {
    std::fs::read(path).map_err(|source| NetError::Read {
        what,
        path: path.to_string(),
        source,
    })
}

pub fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let pem = read_pem(path, "certificate file")?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(path, format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(pem_err(path, "no certificate found"));
    }
    Ok(certs)
}

pub fn load_key(path: &str) -> Result<PrivateKeyDer<'static>, NetError> {
    let pem = read_pem(path, "private key file")?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| pem_err(path, format!("not a PEM private key: {e}")))?
        .ok_or_else(|| pem_err(path, "no private key found"))
}

/// TLS to clients, with the given certificate chain and key.
pub fn server_config(cert: &str, key: &str) -> Result<Arc<rustls::ServerConfig>, NetError> {
    let c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| NetError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(load_certs(cert)?, load_key(key)?)
        .map_err(|e| pem_err(&format!("{cert} / {key}"), e))?;
    Ok(Arc::new(c))
}

/// TLS to clients with a self-signed certificate made now (for "localhost"
/// and the host's name): clients that ask for TLS get it; clients that
/// verify the server's certificate need a configured one.
pub fn self_signed_server_config() -> Result<Arc<rustls::ServerConfig>, NetError> {
    let mut names = vec!["localhost".to_string(), "sextant".to_string()];
    if let Ok(h) = std::fs::read_to_string("/etc/hostname") {
        let h = h.trim();
        if !h.is_empty() {
            names.push(h.to_string());
        }
    }
    let ck = rcgen::generate_simple_self_signed(names).map_err(|e| NetError::Tls(e.to_string()))?;
    let cert = ck.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        ck.key_pair.serialize_der(),
    ));
    let c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| NetError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .map_err(|e| NetError::Tls(e.to_string()))?;
    Ok(Arc::new(c))
}

/// TLS to servers: verified against `ca` when given, otherwise encrypted
/// without authenticating the server.
pub fn client_config(ca: Option<&str>) -> Result<Arc<rustls::ClientConfig>, NetError> {
    let b = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| NetError::Tls(e.to_string()))?;
    let c = match ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in load_certs(path)? {
                roots.add(cert).map_err(|e| pem_err(path, e))?;
            }
            b.with_root_certificates(roots).with_no_client_auth()
        }
        None => b
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
            .with_no_client_auth(),
    };
    Ok(Arc::new(c))
}

/// The server name to verify for a `host:port` address.
pub fn server_name(addr: &str) -> Result<ServerName<'static>, NetError> {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|_| NetError::ServerName(host.to_string()))
}

#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Encrypts the password for caching_sha2_password full authentication
/// without TLS: RSA-OAEP (SHA-1) of (password + NUL) XOR nonce, with the key
/// the server sent as PEM (SubjectPublicKeyInfo, or PKCS#1).
pub fn sha2_rsa_encrypt(pem: &[u8], password: &[u8], nonce: &[u8]) -> Result<Vec<u8>, NetError> {
    let text =
        std::str::from_utf8(pem).map_err(|_| NetError::Rsa("public key is not text".into()))?;
    let text = text.trim_end_matches('\0');
    let key = RsaPublicKey::from_public_key_pem(text)
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(text))
        .map_err(|e| NetError::Rsa(format!("cannot read the server's public key: {e}")))?;
    let data = sextant_protocol::auth::xor_with_nonce(password, nonce);
    key.encrypt(&mut rand::thread_rng(), Oaep::new::<sha1::Sha1>(), &data)
        .map_err(|e| NetError::Rsa(format!("encryption failed: {e}")))
}

/// The server side of the same exchange.
pub struct RsaKeys {
    private: RsaPrivateKey,
    pub public_pem: String,
}

impl RsaKeys {
    pub fn from_pem(pem: &str) -> Result<RsaKeys, NetError> {
        let private = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem))
            .map_err(|e| NetError::Rsa(format!("not an RSA private key in PEM: {e}")))?;
        Self::from_private(private)
    }

    pub fn generate(bits: usize) -> Result<RsaKeys, NetError> {
        let private = RsaPrivateKey::new(&mut rand::thread_rng(), bits)
            .map_err(|e| NetError::Rsa(e.to_string()))?;
        Self::from_private(private)
    }

    fn from_private(private: RsaPrivateKey) -> Result<RsaKeys, NetError> {
        let public_pem = RsaPublicKey::from(&private)
            .to_public_key_pem(rsa::pkcs8::LineEnding::LF)
            .map_err(|e| NetError::Rsa(e.to_string()))?;
        Ok(RsaKeys {
            private,
            public_pem,
        })
    }

    /// Recovers the password from what a client sent, or None.
    pub fn decrypt_password(&self, ciphertext: &[u8], nonce: &[u8]) -> Option<Vec<u8>> {
        let plain = self
            .private
            .decrypt(Oaep::new::<sha1::Sha1>(), ciphertext)
            .ok()?;
        // XOR is its own inverse; the result ends with the NUL.
        let mut p = sextant_protocol::auth::xor_with_nonce(&plain, nonce);
        p.pop(); // the NUL xor_with_nonce appended
        if p.last() == Some(&0) {
            p.pop();
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_under_openssl_names() {
        use rustls::CipherSuite as S;
        assert_eq!(
            openssl_name(S::TLS13_AES_256_GCM_SHA384),
            "TLS_AES_256_GCM_SHA384"
        );
        assert_eq!(
            openssl_name(S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
            "ECDHE-RSA-AES128-GCM-SHA256"
        );
        assert_eq!(
            openssl_name(S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
            "ECDHE-ECDSA-CHACHA20-POLY1305"
        );
    }

    const TEST_KEY: &str = include_str!("../testdata/rsa_test_key.pem");

    #[test]
    fn rsa_round_trip_like_a_mysql8_client() {
        let keys = RsaKeys::from_pem(TEST_KEY).unwrap();
        let nonce: Vec<u8> = (1..=20).collect();
        let ct = sha2_rsa_encrypt(keys.public_pem.as_bytes(), b"s3cret", &nonce).unwrap();
        assert_eq!(ct.len(), 256);
        assert_eq!(keys.decrypt_password(&ct, &nonce).unwrap(), b"s3cret");
        assert!(keys.decrypt_password(&ct, &[9; 20]).unwrap() != b"s3cret");
        assert!(keys.decrypt_password(b"garbage", &nonce).is_none());
    }

    #[test]
    fn server_names() {
        assert!(server_name("127.0.0.1:3306").is_ok());
        assert!(server_name("db.example.com:3306").is_ok());
        assert!(server_name("[::1]:3306").is_ok());
    }
}
