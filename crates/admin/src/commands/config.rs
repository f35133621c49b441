//! `SHOW CONFIG`: the running config (the file as last loaded, with any
//! admin SET applied), one key a row. Passwords are never shown.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};
use sextant_config::{file_name as name, Config};

pub struct ShowConfig;

impl AdminCommand for ShowConfig {
    fn syntax(&self) -> &'static str {
        "SHOW CONFIG"
    }
    fn help(&self) -> &'static str {
        "the running config, one key a row (passwords hidden)"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "CONFIG"]).then(|| {
            Answer::Table(Table {
                columns: vec!["key".into(), "value".into()],
                rows: rows(ctx.config)
                    .into_iter()
                    .map(|(k, v)| vec![Some(k), Some(v)])
                    .collect(),
            })
        })
    }
}

fn opt(v: &Option<impl ToString>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

const HIDDEN: &str = "(hidden)";

pub(crate) fn rows(c: &Config) -> Vec<(String, String)> {
    let mut r: Vec<(String, String)> = Vec::new();
    let mut put = |k: String, v: String| r.push((k, v));
    let p = &c.proxy;
    put("proxy.listen".into(), p.listen.to_string());
    put("proxy.threads".into(), p.threads.to_string());
    put(
        "proxy.max_connections".into(),
        p.max_connections.to_string(),
    );
    put(
        "proxy.max_allowed_packet".into(),
        p.max_allowed_packet.to_string(),
    );
    put(
        "proxy.handshake_timeout_ms".into(),
        p.handshake_timeout_ms.to_string(),
    );
    put(
        "proxy.shutdown_timeout_ms".into(),
        p.shutdown_timeout_ms.to_string(),
    );
    put(
        "proxy.idle_in_transaction_timeout_ms".into(),
        p.idle_in_transaction_timeout_ms.to_string(),
    );
    put(
        "proxy.max_failed_logins".into(),
        p.max_failed_logins.to_string(),
    );
    put(
        "proxy.max_prepared_statements".into(),
        p.max_prepared_statements.to_string(),
    );
    put("proxy.default_group".into(), opt(&p.default_group));
    put("proxy.server_version".into(), opt(&p.server_version));
    put("proxy.tls_cert".into(), opt(&p.tls_cert));
    put(
        "proxy.tls_self_signed".into(),
        p.tls_self_signed.to_string(),
    );
    put("proxy.require_tls".into(), p.require_tls.to_string());
    put(
        "proxy.auth_plugin".into(),
        match p.auth_plugin {
            sextant_config::AuthPlugin::NativePassword => "mysql_native_password",
            sextant_config::AuthPlugin::CachingSha2Password => "caching_sha2_password",
        }
        .into(),
    );
    put("proxy.sha2_full_auth".into(), name(&p.sha2_full_auth));
    if let Some(a) = &c.admin {
        put("admin.listen".into(), a.listen.to_string());
        put("admin.http_listen".into(), opt(&a.http_listen));
        put("admin.user".into(), a.user.clone());
        put("admin.password".into(), HIDDEN.into());
    }
    put("log.format".into(), name(&c.log.format));
    put("log.level".into(), c.log.level.clone());
    put("log.slow_query_ms".into(), c.log.slow_query_ms.to_string());
    for k in sextant_config::Routing::KEYS {
        put(format!("routing.{k}"), c.routing.get(k).unwrap_or_default());
    }
    let m = &c.monitor;
    put("monitor.enabled".into(), m.enabled.to_string());
    put("monitor.interval_ms".into(), m.interval_ms.to_string());
    put("monitor.heartbeat".into(), m.heartbeat.to_string());
    put("monitor.user".into(), opt(&m.user));
    for (g, s) in &c.groups {
        let k = |key: &str| format!("groups.{g}.{key}");
        put(k("primary"), s.primary.to_string());
        let replicas: Vec<String> = s
            .replicas
            .iter()
            .map(|r| format!("{} (weight {})", r.addr, r.weight))
            .collect();
        put(k("replicas"), replicas.join(", "));
        put(k("topology"), name(&s.topology));
        put(k("primary_weight"), s.primary_weight.to_string());
        put(k("pool_max"), s.pool_max.to_string());
        put(k("pool_min"), s.pool_min.to_string());
        put(k("connect_timeout_ms"), s.connect_timeout_ms.to_string());
        put(k("idle_timeout_ms"), s.idle_timeout_ms.to_string());
        put(k("pool_wait_ms"), s.pool_wait_ms.to_string());
        put(k("query_timeout_ms"), s.query_timeout_ms.to_string());
        put(k("max_replica_lag_ms"), s.max_replica_lag_ms.to_string());
        put(k("primary_wait_ms"), s.primary_wait_ms().to_string());
        put(k("pipeline_depth"), s.pipeline().to_string());
        put(k("tls"), s.tls.to_string());
    }
    for u in &c.users {
        let k = |key: &str| format!("users.{}.{key}", u.name);
        put(k("password"), HIDDEN.into());
        put(k("backend_user"), u.backend_user().to_string());
        put(k("default_group"), c.group_for(u).to_string());
        put(k("require_tls"), u.require_tls.to_string());
        put(k("max_connections"), u.max_connections.to_string());
        put(k("connection_admin"), u.connection_admin.to_string());
    }
    if let Some(l) = &c.layout {
        put("sharding.groups".into(), l.groups.join(", "));
        put("xa.log_dir".into(), c.xa.log_dir.clone());
        put("xa.instance_id".into(), opt(&c.xa.instance_id));
        put(
            "xa.recover_interval_ms".into(),
            c.xa.recover_interval_ms.to_string(),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_password_is_shown() {
        let c = sextant_config::Config::parse(
            "[admin]\nuser = \"admin\"\npassword = \"adm-secret\"\n[[users]]\nname = \"app\"\npassword = \"app-secret\"\nbackend_password = \"be-secret\"\n[groups.main]\nprimary = \"127.0.0.1:3306\"\nreplicas = [{ addr = \"127.0.0.1:3307\", weight = 3 }]\n",
            "x.toml",
        )
        .unwrap();
        let rows = super::rows(&c);
        let text: String = rows.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        assert!(!text.contains("secret"), "{text}");
        assert!(text.contains("users.app.password=(hidden)"));
        assert!(text.contains("groups.main.replicas=127.0.0.1:3307 (weight 3)"));
        assert!(text.contains("routing.balance=round_robin"));
    }
}
