//! The fleet's store against a real etcd (Debian's etcd-server, started
//! by scripts/lab): compare-and-swap on the revision an instance saw, and
//! a watch that resumes after etcd restarts without losing a change.

use sextant_fleet::{Change, Fleet, FleetError, Intent, Report, Settings};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

struct Etcd {
    dir: PathBuf,
    endpoint: String,
}

fn lab(what: &str, dir: &PathBuf) {
    lab_with(what, dir, &[]);
}

/// scripts/lab `what` with etcd options (kept for its restarts).
fn lab_with(what: &str, dir: &PathBuf, etcd_options: &[String]) {
    lab_with_flags(what, dir, etcd_options, &[]);
}

fn lab_with_flags(what: &str, dir: &PathBuf, etcd_options: &[String], flags: &[&str]) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(root.join("scripts/lab"));
    cmd.args([what, "--base-port", "auto", "--dir"])
        .arg(dir)
        .args(flags);
    for o in etcd_options {
        cmd.arg("--etcd-option").arg(o);
    }
    let out = cmd.output().expect("scripts/lab");
    assert!(
        out.status.success(),
        "scripts/lab {what} (is etcd-server installed? scripts/deps installs it): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Etcd {
    /// scripts/lab --etcd-tls: clients must show a certificate of the
    /// lab's CA (DIR/tls).
    fn start_tls(tag: &str) -> Etcd {
        let etcd = Self::launch(tag, &["--etcd-tls"], |_| Vec::new());
        assert!(etcd.endpoint.starts_with("https://"), "{}", etcd.endpoint);
        etcd
    }

    fn start(tag: &str) -> Etcd {
        Self::start_with(tag, |_| Vec::new())
    }

    /// With etcd options made from its directory (created first).
    fn start_with(tag: &str, options: impl FnOnce(&PathBuf) -> Vec<String>) -> Etcd {
        Self::launch(tag, &[], options)
    }

    /// scripts/lab etcd-start with these flags and etcd options.
    fn launch(tag: &str, flags: &[&str], options: impl FnOnce(&PathBuf) -> Vec<String>) -> Etcd {
        let dir =
            std::env::temp_dir().join(format!("sextant-fleet-etcd-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let options = options(&dir);
        lab_with_flags("etcd-start", &dir, &options, flags);
        let env = std::fs::read_to_string(dir.join("etcd.env")).unwrap();
        let endpoint = env
            .lines()
            .find_map(|l| l.strip_prefix("ETCD_ENDPOINT="))
            .unwrap()
            .to_string();
        Etcd { dir, endpoint }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        lab("stop", &self.dir);
    }
}

fn join(
    etcd: &Etcd,
    fleet: &str,
    id: &str,
) -> (Arc<Fleet>, tokio::sync::mpsc::UnboundedReceiver<Change>) {
    join_as(etcd, fleet, id, None)
}

fn join_as(
    etcd: &Etcd,
    fleet: &str,
    id: &str,
    user: Option<(String, String)>,
) -> (Arc<Fleet>, tokio::sync::mpsc::UnboundedReceiver<Change>) {
    Fleet::start(
        Settings {
            endpoints: vec![etcd.endpoint.clone()],
            name: fleet.into(),
            id: id.into(),
            user,
            ca_file: None,
            cert_and_key: None,
            lease_ttl: Duration::from_secs(2),
            seal: sextant_fleet::Seal::new("etcd-test-secret-0123"),
        },
        Arc::new(Report::default),
    )
}

async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Change>) -> Change {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a change within 10 s")
        .expect("the channel open")
}

#[tokio::test]
async fn a_change_based_on_a_revision_no_longer_current_is_refused() {
    let etcd = Etcd::start("cas");
    let (a, mut ra) = join(&etcd, "cas", "a");
    let (b, mut rb) = join(&etcd, "cas", "b");
    let i = Intent::Routing("read_primary_percent".into());
    let r1 = a.set(&i, "10", None).await.expect("the first change");
    assert_eq!(next(&mut ra).await.revision, r1);
    assert_eq!(next(&mut rb).await.value.as_deref(), Some("10"));
    // b writes on the revision it saw: fine. a still holds r1 as seen
    // until its watch brings b's: a write on r1 is refused, not applied.
    let r2 = b
        .set(&i, "20", Some(r1))
        .await
        .expect("b's change on what it saw");
    let e = a.set(&i, "30", Some(r1)).await.unwrap_err();
    match e {
        FleetError::Conflict { seen, current, .. } => {
            assert_eq!((seen, current), (r1, r2));
        }
        e => panic!("{e}"),
    }
    assert_eq!(next(&mut ra).await.value.as_deref(), Some("20"));
    // A first write of something that exists is refused too (base 0).
    assert!(matches!(
        a.set(&i, "40", Some(0)).await,
        Err(FleetError::Conflict { .. })
    ));
    // Membership: both listed.
    for _ in 0..100 {
        if a.members().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ids: Vec<String> = a.members().into_iter().map(|m| m.id).collect();
    assert_eq!(ids, ["a", "b"]);
    // b leaves: its record goes at once, not when its lease would expire.
    b.leave().await;
    for _ in 0..100 {
        if a.members().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(a.members().len(), 1, "b still listed after leaving");
}

#[tokio::test]
async fn changes_made_while_an_instance_lost_etcd_arrive_once_it_answers_again() {
    let etcd = Etcd::start("resume");
    let (a, mut ra) = join(&etcd, "resume", "a");
    let i = Intent::Backend("127.0.0.1:3307".into());
    a.set(&i, "maintenance", None).await.unwrap();
    assert_eq!(next(&mut ra).await.value.as_deref(), Some("maintenance"));
    lab("etcd-stop", &etcd.dir);
    let e = a.set(&i, "online", None).await.unwrap_err();
    assert!(matches!(e, FleetError::Unreachable { .. }), "{e}");
    assert!(!a.store().reachable);
    lab("etcd-start", &etcd.dir);
    // Another instance changes it while a's watch is still reconnecting.
    let (b, _rb) = join(&etcd, "resume", "b");
    let mut done = false;
    for _ in 0..100 {
        match b.set(&i, "offline", None).await {
            Ok(_) => {
                done = true;
                break;
            }
            Err(FleetError::Conflict { .. }) => {
                // b had not seen a's value yet; it will.
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(done, "b could not write once etcd returned");
    let c = next(&mut ra).await;
    assert_eq!((c.intent, c.value.as_deref()), (i, Some("offline")));
    assert!(a.store().reachable);
}

/// Turns etcd's authentication on, with a root user.
async fn auth_on(etcd: &Etcd) {
    let mut c = etcd_client::Client::connect([etcd.endpoint.as_str()], None)
        .await
        .unwrap();
    let _ = c.role_add("root").await;
    c.user_add("root", "rootpw", None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.auth_enable().await.unwrap();
}

/// etcd with JWT tokens that live 2 s: once this instance's has expired,
/// it logs in again, and its changes and watch go on.
#[tokio::test]
async fn an_expired_jwt_is_renewed_by_logging_in_again() {
    let etcd = Etcd::start_with("jwt", |dir| {
        let key = dir.join("jwt.key");
        let public = dir.join("jwt.pub");
        for args in [
            vec![
                "genrsa".into(),
                "-out".into(),
                key.display().to_string(),
                "2048".into(),
            ],
            vec![
                "rsa".into(),
                "-in".into(),
                key.display().to_string(),
                "-pubout".into(),
                "-out".into(),
                public.display().to_string(),
            ],
        ] {
            let ok = Command::new("openssl").args(&args).output().unwrap();
            assert!(ok.status.success(), "openssl {args:?}");
        }
        vec![format!(
            "--auth-token=jwt,pub-key={},priv-key={},sign-method=RS256,ttl=2s",
            public.display(),
            key.display()
        )]
    });
    auth_on(&etcd).await;
    let (a, mut ra) = join_as(&etcd, "jwt", "a", Some(("root".into(), "rootpw".into())));
    let i = Intent::Routing("read_primary_percent".into());
    a.set(&i, "10", None).await.unwrap();
    assert_eq!(next(&mut ra).await.value.as_deref(), Some("10"));
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut last = None;
    for _ in 0..100 {
        match a.set(&i, "20", None).await {
            Ok(_) => {
                last = None;
                break;
            }
            Err(e) => last = Some(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, None, "no change within 10 s of the token's expiry");
    assert_eq!(next(&mut ra).await.value.as_deref(), Some("20"));
}

/// etcd with authentication on forgets its simple tokens when it
/// restarts: an instance whose token is refused logs in again, and its
/// changes and watch go on (before, every call failed with "invalid auth
/// token" until sextant restarted).
#[tokio::test]
async fn a_token_etcd_forgot_is_renewed_by_logging_in_again() {
    let etcd = Etcd::start("auth");
    auth_on(&etcd).await;
    let (a, mut ra) = join_as(&etcd, "auth", "a", Some(("root".into(), "rootpw".into())));
    let i = Intent::Backend("127.0.0.1:3307".into());
    a.set(&i, "maintenance", None).await.unwrap();
    assert_eq!(next(&mut ra).await.value.as_deref(), Some("maintenance"));
    lab("etcd-stop", &etcd.dir);
    lab("etcd-start", &etcd.dir);
    let mut last = None;
    for _ in 0..100 {
        match a.set(&i, "online", None).await {
            Ok(_) => {
                last = None;
                break;
            }
            Err(e) => last = Some(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, None, "no change within 10 s of etcd's restart");
    let c = next(&mut ra).await;
    assert_eq!((c.intent, c.value.as_deref()), (i, Some("online")));
    assert!(a.store().reachable);
}

fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn join_tls(
    etcd: &Etcd,
    fleet: &str,
    ca: &std::path::Path,
    cert_and_key: Option<(&std::path::Path, &std::path::Path)>,
) -> Arc<Fleet> {
    Fleet::start(
        Settings {
            endpoints: vec![etcd.endpoint.clone()],
            name: fleet.into(),
            id: "tls".into(),
            user: None,
            ca_file: Some(ca.display().to_string()),
            cert_and_key: cert_and_key
                .map(|(c, k)| (c.display().to_string(), k.display().to_string())),
            lease_ttl: Duration::from_secs(2),
            seal: sextant_fleet::Seal::new("etcd-test-secret-0123"),
        },
        Arc::new(Report::default),
    )
    .0
}

async fn error_of(f: Arc<Fleet>) -> String {
    match f
        .set(&Intent::Routing("read_primary_percent".into()), "20", None)
        .await
    {
        Ok(_) => panic!("a change went through"),
        Err(e) => e.to_string(),
    }
}

/// etcd over TLS that asks for each client's certificate (scripts/lab
/// --etcd-tls): with the lab's CA and a client certificate it signed,
/// changes go through; each way it can fail names the file to look at and
/// says why, where etcd's client says only "transport error".
#[tokio::test]
async fn etcd_over_tls_works_and_each_certificate_problem_is_named() {
    let etcd = Etcd::start_tls("tls");
    let t = etcd.dir.join("tls");
    let i = Intent::Routing("read_primary_percent".into());
    let (ca, cert, key) = (
        t.join("ca.pem"),
        t.join("client.pem"),
        t.join("client-key.pem"),
    );

    let good = join_tls(&etcd, "tls", &ca, Some((&cert, &key)));
    good.set(&i, "10", None).await.expect("a change over TLS");

    // Another CA, and a certificate of its own as a client's.
    openssl(
        &t,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=not the lab CA",
            "-keyout",
            "other-key.pem",
            "-out",
            "other.pem",
        ],
    );
    let no_cert = error_of(join_tls(&etcd, "tls", &ca, None)).await;
    assert!(
        no_cert.contains("set [cluster] cert_file and key_file"),
        "{no_cert}"
    );
    let other_ca = t.join("other.pem");
    let wrong_ca = error_of(join_tls(&etcd, "tls", &other_ca, Some((&cert, &key)))).await;
    assert!(
        wrong_ca.contains(&format!(
            "etcd's certificate is not signed by the CA in [cluster] ca_file {}",
            other_ca.display()
        )),
        "{wrong_ca}"
    );
    let stranger = error_of(join_tls(
        &etcd,
        "tls",
        &ca,
        Some((&other_ca, &t.join("other-key.pem"))),
    ))
    .await;
    assert!(
        stranger.contains(&format!(
            "refused this instance's certificate, [cluster] cert_file {}",
            other_ca.display()
        )),
        "{stranger}"
    );
    // A file that is not what it should be is named before any handshake.
    let not_pem = error_of(join_tls(&etcd, "tls", &ca, Some((&key, &key)))).await;
    assert!(
        not_pem.contains(&format!(
            "[cluster] cert_file {}: no PEM CERTIFICATE",
            key.display()
        )),
        "{not_pem}"
    );
}
