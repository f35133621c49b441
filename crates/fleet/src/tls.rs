//! What a failed TLS handshake with etcd means, in terms of the files an
//! operator set. etcd's client reports every such failure as a transport
//! error whose cause is rustls's name for it (`UnknownIssuer`, an alert
//! `BadCertificate` from etcd); an operator needs to know which of
//! `[cluster] ca_file`, `cert_file` and `key_file` to look at.

/// A sentence naming the file at fault, when `reason` (an error and its
/// causes) is a TLS failure of the kind it knows; None otherwise.
pub(crate) fn advice(
    reason: &str,
    ca_file: Option<&str>,
    cert_file: Option<&str>,
) -> Option<String> {
    let ca = ca_file?;
    let has = |s: &str| reason.contains(s);
    // Our side refused etcd's certificate.
    if has("UnknownIssuer") || has("BadSignature") {
        return Some(format!(
            "etcd's certificate is not signed by the CA in [cluster] ca_file {ca}"
        ));
    }
    if has("NotValidForName") {
        return Some(
            "etcd's certificate does not name the host of the endpoint (its subjectAltName)"
                .to_string(),
        );
    }
    if has("Expired") {
        return Some("etcd's certificate has expired (or is not valid yet)".to_string());
    }
    // etcd refused ours (an alert from the server).
    if has("alert: BadCertificate")
        || has("alert: CertificateRequired")
        || has("alert: UnknownCA")
        || has("alert: UnsupportedCertificate")
        || has("alert: CertificateUnknown")
    {
        return Some(match cert_file {
            None => "etcd asks for this instance's own certificate: set [cluster] cert_file and key_file (a certificate signed by a CA etcd trusts, --trusted-ca-file)".to_string(),
            Some(c) => format!(
                "etcd refused this instance's certificate, [cluster] cert_file {c} (is it signed by a CA etcd trusts, --trusted-ca-file, and made for client authentication?)"
            ),
        });
    }
    // Under TLS 1.3 the client's side of the handshake is over before
    // etcd checks its certificate: etcd's alert often loses the race with
    // its closing of the connection, which is all the client then sees.
    if has("connection closed") || has("broken pipe") {
        return Some(match cert_file {
            None => "etcd closed the connection; if just after the TLS handshake, it wants this instance's own certificate: set [cluster] cert_file and key_file".to_string(),
            Some(c) => format!(
                "etcd closed the connection; if just after the TLS handshake, it refused this instance's certificate, [cluster] cert_file {c}"
            ),
        });
    }
    if has("InvalidContentType") || has("CorruptMessage") {
        return Some(
            "the endpoint does not answer in TLS: is it etcd's https address?".to_string(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::advice;

    /// Causes as etcd-client 0.x reports them against a real etcd
    /// (tests/etcd.rs `etcd_over_tls_works_and_each_certificate_problem_is_named`).
    const UNKNOWN_ISSUER: &str = "grpc request error: code: 'The service is currently unavailable', message: \"invalid peer certificate: UnknownIssuer\", source: tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }))";
    const REFUSED: &str = "grpc request error: code: 'Unknown error', message: \"transport error\", source: tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: InvalidData, error: \"received fatal alert: BadCertificate\" }))";

    #[test]
    fn each_failure_names_its_file() {
        let a = advice(UNKNOWN_ISSUER, Some("/etc/ca.pem"), Some("/etc/me.pem")).unwrap();
        assert!(a.contains("ca_file /etc/ca.pem"), "{a}");
        let a = advice(REFUSED, Some("/etc/ca.pem"), None).unwrap();
        assert!(a.contains("set [cluster] cert_file and key_file"), "{a}");
        let a = advice(REFUSED, Some("/etc/ca.pem"), Some("/etc/me.pem")).unwrap();
        assert!(a.contains("cert_file /etc/me.pem"), "{a}");
        assert_eq!(
            advice("connection refused", Some("/etc/ca.pem"), None),
            None
        );
        // Without TLS configured, nothing is a certificate's fault.
        assert_eq!(advice(UNKNOWN_ISSUER, None, None), None);
    }
}
