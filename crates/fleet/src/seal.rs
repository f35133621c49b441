//! Proof that a member of the fleet wrote a value: every member record and
//! intent is stored as `sx1:<mac>:<value>`, the MAC an HMAC-SHA256 under
//! the fleet's shared secret (`[cluster] secret`) of the key and the
//! value. Whoever can write to etcd but does not hold the secret cannot
//! add a member (whose admin address peers would call), change a setting
//! or push a config: such values are ignored, and listed as ignored.
//! Binding the key stops a value being moved under another key (another
//! member's id, another intent).

use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "sx1:";

/// The fleet's secret, ready to seal and open values.
#[derive(Clone)]
pub struct Seal {
    secret: Vec<u8>,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(..)")
    }
}

impl Seal {
    pub fn new(secret: &str) -> Seal {
        Seal {
            secret: secret.as_bytes().to_vec(),
        }
    }

    fn mac(&self, key: &str, value: &[u8]) -> Hmac<Sha256> {
        // Any key length is accepted by HMAC.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        m.update(key.as_bytes());
        m.update(&[0]);
        m.update(value);
        m
    }

    /// `value` as stored under `key`.
    pub fn seal(&self, key: &str, value: &str) -> String {
        let tag = self.mac(key, value.as_bytes()).finalize().into_bytes();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        format!("{PREFIX}{hex}:{value}")
    }

    /// The value stored under `key`, if a holder of the secret sealed it
    /// there.
    pub fn open<'a>(&self, key: &str, stored: &'a [u8]) -> Option<&'a str> {
        let s = std::str::from_utf8(stored).ok()?;
        let rest = s.strip_prefix(PREFIX)?;
        let (hex, value) = rest.split_once(':')?;
        if hex.len() != 64 {
            return None;
        }
        let tag: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
            .collect::<Option<_>>()?;
        // Compared in constant time.
        self.mac(key, value.as_bytes())
            .verify_slice(&tag)
            .ok()
            .map(|()| value)
    }

    /// A secret derived for one purpose (peer logins): knowing it reveals
    /// nothing of the secret or of what it seals.
    pub fn derive(&self, purpose: &str) -> String {
        let tag = self
            .mac("derive", purpose.as_bytes())
            .finalize()
            .into_bytes();
        tag.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_secrets_holder_seals() {
        let s = Seal::new("fleet secret 1234");
        let k = "/sextant/f/members/a";
        let v = s.seal(k, "{\"id\":\"a\"}");
        assert_eq!(s.open(k, v.as_bytes()), Some("{\"id\":\"a\"}"));
        // Another key, another secret, a changed value, no seal at all.
        assert_eq!(s.open("/sextant/f/members/b", v.as_bytes()), None);
        assert_eq!(Seal::new("another secret").open(k, v.as_bytes()), None);
        let forged = v.replace("\"a\"", "\"z\"");
        assert_eq!(s.open(k, forged.as_bytes()), None);
        assert_eq!(s.open(k, b"{\"id\":\"a\"}"), None);
        assert_eq!(s.open(k, b"sx1:zz:x"), None);
        assert_ne!(s.derive("peer"), s.derive("other"));
        assert_eq!(s.derive("peer").len(), 64);
    }
}
