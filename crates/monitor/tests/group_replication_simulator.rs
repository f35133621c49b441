//! SIMULATOR, not MySQL: MySQL 8 (and so Group Replication) cannot be
//! installed on these machines. Each "member" here is a small scripted fake
//! server that logs sextant's monitor in, answers its ping and its query of
//! performance_schema.replication_group_members with member states the test
//! sets, and answers everything else with OK. The monitor, the group's
//! writer selection and the read eligibility under test are sextant's real
//! code.

mod sim;
use parking_lot::Mutex;
use sextant_backend::{Group, Role, Server, Topology};
use sextant_monitor::{watch, Settings, GROUP_REPLICATION_QUERY};
use sextant_protocol::packets::{coltype, write_simple_ok, write_text_resultset};
use sim::{login, pool_settings, read_packet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What one member reports about itself: its own row of
/// replication_group_members and how many members its view can reach.
#[derive(Clone)]
struct View {
    state: &'static str,
    role: &'static str,
    reachable: u32,
    total: u32,
}

type Script = Arc<Mutex<Option<View>>>;

fn view(state: &'static str, role: &'static str, reachable: u32, total: u32) -> Option<View> {
    Some(View {
        state,
        role,
        reachable,
        total,
    })
}

async fn member(listener: TcpListener, script: Script, queries: Arc<Mutex<Vec<String>>>) {
    loop {
        let Ok((s, _)) = listener.accept().await else {
            return;
        };
        let script = script.clone();
        let queries = queries.clone();
        tokio::spawn(async move {
            let _ = serve(s, script, queries).await;
        });
    }
}

async fn serve(mut s: TcpStream, script: Script, queries: Arc<Mutex<Vec<String>>>) -> Option<()> {
    login(&mut s, 7).await?;
    let mut out = Vec::new();
    loop {
        let p = read_packet(&mut s).await?;
        out.clear();
        match p.first() {
            Some(0x01) => return Some(()), // COM_QUIT
            Some(0x03) => {
                let q = String::from_utf8_lossy(&p[1..]).to_string();
                queries.lock().push(q.clone());
                if q == GROUP_REPLICATION_QUERY {
                    let rows: Vec<Vec<Option<String>>> = script
                        .lock()
                        .iter()
                        .map(|v| {
                            vec![
                                Some(v.state.into()),
                                Some(v.role.into()),
                                Some(v.reachable.to_string()),
                                Some(v.total.to_string()),
                            ]
                        })
                        .collect();
                    let cols = [
                        ("MEMBER_STATE", coltype::VAR_STRING),
                        ("MEMBER_ROLE", coltype::VAR_STRING),
                        ("reachable", coltype::LONGLONG),
                        ("total", coltype::LONGLONG),
                    ];
                    write_text_resultset(&mut out, 1, &cols, &rows, false, 2);
                } else if q.starts_with("SELECT @@character_set_client") {
                    let cols = [
                        ("a", coltype::VAR_STRING),
                        ("b", coltype::VAR_STRING),
                        ("c", coltype::VAR_STRING),
                        ("d", coltype::VAR_STRING),
                    ];
                    let row = ["utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_0900_ai_ci"]
                        .map(|v| Some(v.to_string()))
                        .to_vec();
                    write_text_resultset(&mut out, 1, &cols, &[row], false, 2);
                } else {
                    write_simple_ok(&mut out, 1, 2);
                }
            }
            _ => write_simple_ok(&mut out, 1, 2), // COM_PING and the rest
        }
        s.write_all(&out).await.ok()?;
    }
}

struct Cluster {
    group: Arc<Group>,
    scripts: Vec<Script>,
    queries: Arc<Mutex<Vec<String>>>,
}

async fn cluster(initial: [Option<View>; 3]) -> Cluster {
    let settings = pool_settings(Duration::from_secs(1));
    let queries = Arc::new(Mutex::new(Vec::new()));
    let mut servers = Vec::new();
    let mut scripts = Vec::new();
    for (i, v) in initial.into_iter().enumerate() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let script: Script = Arc::new(Mutex::new(v));
        tokio::spawn(member(l, script.clone(), queries.clone()));
        let role = if i == 0 { Role::Primary } else { Role::Replica };
        servers.push(Arc::new(Server::new(
            &addr,
            "gr",
            role,
            1,
            settings.clone(),
        )));
        scripts.push(script);
    }
    let primary = servers.remove(0);
    let group = Arc::new(Group::with_topology(
        "gr",
        primary,
        servers,
        0,
        Topology::GroupReplication,
        Duration::ZERO,
    ));
    let s = Settings {
        interval: Duration::from_millis(100),
        user: "monitor".into(),
        password: "x".into(),
        heartbeat: false,
        max_lag_ms: 1000,
        instance_id: 1,
    };
    for m in &group.members {
        tokio::spawn(watch(m.clone(), group.clone(), s.clone()));
    }
    Cluster {
        group,
        scripts,
        queries,
    }
}

impl Cluster {
    fn set(&self, views: [Option<View>; 3]) {
        for (s, v) in self.scripts.iter().zip(views) {
            *s.lock() = v;
        }
    }

    /// Waits (up to 2 s) until `ok` holds; returns how long it took.
    async fn until(&self, what: &str, ok: impl Fn(&Group) -> bool) -> Duration {
        let t = Instant::now();
        while !ok(&self.group) {
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "simulated group: not {what} within 2 s (primary {:?}, writers {}, usable {:?}, states {:?})",
                self.primary(),
                self.group.writer_count(),
                self.usable(),
                self.group
                    .members
                    .iter()
                    .map(|m| m.health.member_state())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        t.elapsed()
    }

    fn primary(&self) -> Option<usize> {
        let p = self.group.primary()?;
        self.group.members.iter().position(|m| Arc::ptr_eq(m, p))
    }

    fn usable(&self) -> Vec<bool> {
        self.group
            .members
            .iter()
            .map(|m| m.load().is_some())
            .collect()
    }
}

fn primary_is(c: &Cluster, i: usize) -> impl Fn(&Group) -> bool + '_ {
    move |_| c.primary() == Some(i) && c.group.writer_count() == 1
}

#[tokio::test]
async fn simulator_group_replication_single_primary_switch() {
    let c = cluster([
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
    ])
    .await;
    // Until the monitor has asked every member, the configured order
    // stands; wait for its answers to count.
    c.until("every member asked", |_| {
        c.queries
            .lock()
            .iter()
            .filter(|q| *q == GROUP_REPLICATION_QUERY)
            .count()
            >= 6
    })
    .await;
    assert_eq!(c.primary(), Some(0));
    assert_eq!(c.usable(), [true, true, true]);
    // The group elects member 1 (e.g. group_replication_set_as_primary).
    c.set([
        view("ONLINE", "SECONDARY", 3, 3),
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
    ]);
    let took = c
        .until("following the new primary", primary_is(&c, 1))
        .await;
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(c.group.members[0].role(), Role::Replica);
    assert_eq!(c.group.members[1].role(), Role::Primary);
}

#[tokio::test]
async fn simulator_group_replication_recovering_member_leaves_rotation() {
    let c = cluster([
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
    ])
    .await;
    c.until("up", |_| c.usable() == [true, true, true]).await;
    c.set([
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
        view("RECOVERING", "SECONDARY", 3, 3),
    ]);
    c.until("member 2 out", |_| c.usable() == [true, true, false])
        .await;
    assert_eq!(
        c.group.members[2].health.member_state().as_deref(),
        Some("RECOVERING")
    );
    // ERROR, and a member that left the group (no row of its own), too.
    c.set([
        view("ONLINE", "PRIMARY", 3, 3),
        view("ERROR", "SECONDARY", 3, 3),
        None,
    ]);
    c.until("members 1 and 2 out", |_| {
        c.usable() == [true, false, false]
    })
    .await;
    assert_eq!(c.primary(), Some(0));
    c.set([
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
    ]);
    c.until("all back", |_| c.usable() == [true, true, true])
        .await;
}

#[tokio::test]
async fn simulator_group_replication_minority_partition_is_not_used() {
    let c = cluster([
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
        view("ONLINE", "SECONDARY", 3, 3),
    ])
    .await;
    c.until("up", |_| c.primary() == Some(0)).await;
    // The network splits member 0 (the primary) from the others. In its own
    // view it is still ONLINE and PRIMARY but reaches 1 of 3 members; the
    // majority (members 1 and 2) elects member 2.
    c.set([
        view("ONLINE", "PRIMARY", 1, 3),
        view("ONLINE", "SECONDARY", 2, 3),
        view("ONLINE", "PRIMARY", 2, 3),
    ]);
    c.until("writes on the majority's primary", primary_is(&c, 2))
        .await;
    assert_eq!(c.usable(), [false, true, true]);
    assert!(c.group.members[0]
        .health
        .member_state()
        .as_deref()
        .is_some_and(|s| s.starts_with("minority partition")));
    // An even split has no majority anywhere: no writes, no reads.
    c.set([
        view("ONLINE", "PRIMARY", 1, 2),
        view("ONLINE", "SECONDARY", 1, 2),
        None,
    ]);
    c.until("no primary", |g| g.primary().is_none()).await;
    assert_eq!(c.usable(), [false, false, false]);
}

#[tokio::test]
async fn simulator_group_replication_multi_primary_hashes_schemas() {
    let c = cluster([
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "PRIMARY", 3, 3),
        view("ONLINE", "PRIMARY", 3, 3),
    ])
    .await;
    c.until("three writers", |g| g.writer_count() == 3).await;
    let mut per_member = [0; 3];
    for i in 0..300 {
        let schema = format!("tenant_{i}");
        let w = c.group.writer_for(schema.as_bytes()).unwrap();
        let idx = c
            .group
            .members
            .iter()
            .position(|m| Arc::ptr_eq(m, w))
            .unwrap();
        per_member[idx] += 1;
    }
    assert!(
        per_member.iter().all(|&n| n > 50),
        "schemas spread over the members: {per_member:?}"
    );
    // One member goes RECOVERING: its schemas move to the others.
    c.set([
        view("ONLINE", "PRIMARY", 3, 3),
        view("RECOVERING", "PRIMARY", 3, 3),
        view("ONLINE", "PRIMARY", 3, 3),
    ]);
    c.until("two writers", |g| g.writer_count() == 2).await;
    for i in 0..300 {
        let w = c
            .group
            .writer_for(format!("tenant_{i}").as_bytes())
            .unwrap();
        assert!(!Arc::ptr_eq(w, &c.group.members[1]));
    }
}
