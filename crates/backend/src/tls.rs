//! TLS configurations (rustls with the ring provider) and RSA for
//! caching_sha2_password's key exchange.

use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem(path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {path}: {e}"))
}

pub fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem(path, "certificate file")?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{path}: not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path}: no certificate found"));
    }
    Ok(certs)
}

pub fn load_key(path: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_pem(path, "private key file")?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| format!("{path}: not a PEM private key: {e}"))?
        .ok_or_else(|| format!("{path}: no private key found"))
}

/// TLS to clients, with the given certificate chain and key.
pub fn server_config(cert: &str, key: &str) -> Result<Arc<rustls::ServerConfig>, String> {
    let c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(load_certs(cert)?, load_key(key)?)
        .map_err(|e| format!("{cert} / {key}: {e}"))?;
    Ok(Arc::new(c))
}

/// TLS to servers: verified against `ca` when given, otherwise encrypted
/// without authenticating the server.
pub fn client_config(ca: Option<&str>) -> Result<Arc<rustls::ClientConfig>, String> {
    let b = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let c = match ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in load_certs(path)? {
                roots.add(cert).map_err(|e| format!("{path}: {e}"))?;
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
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| format!("{host}: {e}"))
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
pub fn sha2_rsa_encrypt(pem: &[u8], password: &[u8], nonce: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "public key is not text".to_string())?;
    let text = text.trim_end_matches('\0');
    let key = RsaPublicKey::from_public_key_pem(text)
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(text))
        .map_err(|e| format!("cannot read the server's public key: {e}"))?;
    let data = sextant_protocol::auth::xor_with_nonce(password, nonce);
    key.encrypt(&mut rand::thread_rng(), Oaep::new::<sha1::Sha1>(), &data)
        .map_err(|e| format!("RSA encryption failed: {e}"))
}

/// The server side of the same exchange.
pub struct RsaKeys {
    private: RsaPrivateKey,
    pub public_pem: String,
}

impl RsaKeys {
    pub fn from_pem(pem: &str) -> Result<RsaKeys, String> {
        let private = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem))
            .map_err(|e| format!("not an RSA private key in PEM: {e}"))?;
        Self::from_private(private)
    }

    pub fn generate(bits: usize) -> Result<RsaKeys, String> {
        let private =
            RsaPrivateKey::new(&mut rand::thread_rng(), bits).map_err(|e| e.to_string())?;
        Self::from_private(private)
    }

    fn from_private(private: RsaPrivateKey) -> Result<RsaKeys, String> {
        let public_pem = RsaPublicKey::from(&private)
            .to_public_key_pem(rsa::pkcs8::LineEnding::LF)
            .map_err(|e| e.to_string())?;
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
