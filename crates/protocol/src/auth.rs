//! Password scrambles for mysql_native_password and caching_sha2_password,
//! and MariaDB's client_ed25519 signature.
//!
//! Both plugins answer a 20-byte server nonce without sending the password.
//! The proxy knows its users' clear passwords (from its config), so it can
//! both compute a scramble (as a client of the servers) and check one (as the
//! server its clients see).

use sha1::{Digest as _, Sha1};
use sha2::{Sha256, Sha512};

/// mysql_native_password: SHA1(pw) XOR SHA1(nonce || SHA1(SHA1(pw))).
pub fn native_scramble(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password);
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(nonce_20(nonce));
    h.update(stage2);
    let mix = h.finalize();
    stage1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

/// caching_sha2_password fast path:
/// SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) || nonce).
pub fn sha2_scramble(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let d1 = Sha256::digest(password);
    let d2 = Sha256::digest(d1);
    let mut h = Sha256::new();
    h.update(d2);
    h.update(nonce_20(nonce));
    let d3 = h.finalize();
    d1.iter().zip(d3.iter()).map(|(a, b)| a ^ b).collect()
}

/// The password XORed with the nonce, as caching_sha2_password expects it
/// before RSA encryption (full authentication without TLS).
pub fn xor_with_nonce(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    let nonce = nonce_20(nonce);
    let mut v = password.to_vec();
    v.push(0);
    if nonce.is_empty() {
        return v;
    }
    for (i, b) in v.iter_mut().enumerate() {
        *b ^= nonce[i % nonce.len()];
    }
    v
}

/// MariaDB's client_ed25519: an Ed25519 signature of the server's 32-byte
/// nonce, with the password hashed (SHA-512) as the secret key, as MariaDB's
/// own client computes it. The server stores only the public key.
pub fn ed25519_sign(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    let (secret, public) = ed25519_keys(password);
    ed25519_dalek::hazmat::raw_sign::<Sha512>(&secret, nonce, &public)
        .to_bytes()
        .to_vec()
}

/// The public key MariaDB stores for a password (`PASSWORD()` of the
/// ed25519 plugin, before base64).
pub fn ed25519_public_key(password: &[u8]) -> [u8; 32] {
    ed25519_keys(password).1.to_bytes()
}

fn ed25519_keys(
    password: &[u8],
) -> (
    ed25519_dalek::hazmat::ExpandedSecretKey,
    ed25519_dalek::VerifyingKey,
) {
    let az: [u8; 64] = Sha512::digest(password).into();
    // from_bytes clamps the scalar half, as MariaDB's crypto_sign does.
    let secret = ed25519_dalek::hazmat::ExpandedSecretKey::from_bytes(&az);
    let public = ed25519_dalek::VerifyingKey::from(&secret);
    (secret, public)
}

/// Checks a client_ed25519 answer: a valid signature of `nonce` by the
/// key of `password`.
pub fn verify_ed25519(password: &[u8], nonce: &[u8], response: &[u8]) -> bool {
    let Ok(sig) = ed25519_dalek::Signature::from_slice(response) else {
        return false;
    };
    let (_, public) = ed25519_keys(password);
    public.verify_strict(nonce, &sig).is_ok()
}

/// Servers send the nonce with a trailing NUL that is not part of it.
fn nonce_20(nonce: &[u8]) -> &[u8] {
    if nonce.len() > 20 {
        &nonce[..20]
    } else {
        nonce
    }
}

/// Constant-time comparison, so a timing side channel cannot reveal how much
/// of a scramble matched.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn verify_native(password: &[u8], nonce: &[u8], response: &[u8]) -> bool {
    ct_eq(&native_scramble(password, nonce), response)
}

/// mysql_native_password against the stored hash SHA1(SHA1(pw)) (the 40
/// hex digits after `*` in mysql.user), as a server checks it: the
/// response XOR SHA1(nonce || hash) must be a SHA1(pw) whose SHA1 is the
/// hash.
pub fn verify_native_hash(hash_hex: &str, nonce: &[u8], response: &[u8]) -> bool {
    let mut stage2 = [0u8; 20];
    let hex = hash_hex.strip_prefix('*').unwrap_or(hash_hex).as_bytes();
    if hex.len() != 40 || response.len() != 20 {
        return false;
    }
    for (i, pair) in hex.chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => stage2[i] = (h * 16 + l) as u8,
            _ => return false,
        }
    }
    let mut h = Sha1::new();
    h.update(nonce_20(nonce));
    h.update(stage2);
    let mix = h.finalize();
    let stage1: Vec<u8> = response
        .iter()
        .zip(mix.iter())
        .map(|(a, b)| a ^ b)
        .collect();
    ct_eq(&Sha1::digest(&stage1), &stage2)
}

pub fn verify_sha2(password: &[u8], nonce: &[u8], response: &[u8]) -> bool {
    ct_eq(&sha2_scramble(password, nonce), response)
}

#[cfg(test)]
mod tests {
    #[test]
    fn native_hash_checks_what_the_password_checks() {
        // mysql.user's hash of "pass" (SELECT PASSWORD('pass')).
        let hash = "*196BDEDE2AE4F84CA44C47D54D78478C7E2BD7B7";
        let nonce = b"0123456789abcdefghij";
        let right = super::native_scramble(b"pass", nonce);
        assert!(super::verify_native_hash(hash, nonce, &right));
        assert!(super::verify_native_hash(
            &hash.to_lowercase(),
            nonce,
            &right
        ));
        let wrong = super::native_scramble(b"pasS", nonce);
        assert!(!super::verify_native_hash(hash, nonce, &wrong));
        assert!(!super::verify_native_hash(hash, nonce, &[]));
        assert!(!super::verify_native_hash("*196BDEDE", nonce, &right));
    }

    #[test]
    fn ed25519_matches_mariadb() {
        // mysql.global_priv's authentication_string for
        // IDENTIFIED VIA ed25519 USING PASSWORD('secret'), MariaDB 10.11.
        let stored = "648814444520e4f56043a2ec9215e63be7992d2d270bc6dee873e36164786096";
        let hex: String = ed25519_public_key(b"secret")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, stored);
        let nonce = [7u8; 32];
        let sig = ed25519_sign(b"secret", &nonce);
        assert_eq!(sig.len(), 64);
        assert!(verify_ed25519(b"secret", &nonce, &sig));
        assert!(!verify_ed25519(b"secreT", &nonce, &sig));
        assert!(!verify_ed25519(b"secret", &[8u8; 32], &sig));
        assert!(!verify_ed25519(b"secret", &nonce, &sig[..63]));
    }

    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // Vectors computed independently with Python's hashlib from the
    // definitions in the MySQL source (sql/auth/password.cc and
    // sha2_password_common.cc) for nonce 0x01..0x14 and password "secret".
    const NONCE: [u8; 20] = [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
    ];

    #[test]
    fn native_vector() {
        assert_eq!(native_scramble(b"secret", &NONCE), hex(NATIVE_SECRET_HEX),);
        // Trailing NUL on the nonce is ignored.
        let mut n = NONCE.to_vec();
        n.push(0);
        assert_eq!(native_scramble(b"secret", &n), hex(NATIVE_SECRET_HEX));
        assert!(native_scramble(b"", &NONCE).is_empty());
    }

    #[test]
    fn sha2_vector() {
        assert_eq!(sha2_scramble(b"secret", &NONCE), hex(SHA2_SECRET_HEX));
        assert!(verify_sha2(b"secret", &NONCE, &hex(SHA2_SECRET_HEX)));
        assert!(!verify_sha2(b"Secret", &NONCE, &hex(SHA2_SECRET_HEX)));
    }

    #[test]
    fn xor_nonce_wraps() {
        let v = xor_with_nonce(b"pw", &[0xff, 0x0f]);
        assert_eq!(v, vec![b'p' ^ 0xff, b'w' ^ 0x0f, 0xff]);
    }

    pub const NATIVE_SECRET_HEX: &str = include_str!("../testdata/native_secret.hex");
    pub const SHA2_SECRET_HEX: &str = include_str!("../testdata/sha2_secret.hex");
}
