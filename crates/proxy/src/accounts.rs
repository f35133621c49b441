//! The server accounts sextant logs in with, and what each can reach
//! beyond its own schemas (`sextant_monitor::grants`): an application
//! account that can write sextant's own tables or end other sessions is
//! reported, at start, on reload (a log warning each) and by the admin
//! port's `SHOW ACCOUNTS`.

use crate::runtime::Runtime;
use crate::shared::Shared;
use sextant_backend::Flavor;

/// One configured user's server account and what it can reach.
pub struct Account {
    pub user: String,
    pub server_account: String,
    /// What sextant itself uses it for ("" for an application account).
    pub own: String,
    /// What it reaches that an application account should not; None: its
    /// grants could not be read (the reason).
    pub reach: Result<Vec<String>, String>,
}

/// Every configured user's server account, its grants read on the
/// primary of the user's group.
pub async fn audit(rt: &Runtime) -> Vec<Account> {
    let own_xa = rt.config.xa_account().map(|(u, _)| u);
    let monitor = rt.config.monitor.user.clone().or_else(|| {
        rt.config
            .users
            .first()
            .map(|u| u.backend_user().to_string())
    });
    let mut out = Vec::new();
    for u in &rt.config.users {
        let account = u.backend_user().to_string();
        let mut roles = Vec::new();
        if monitor.as_deref() == Some(account.as_str()) {
            roles.push("monitor");
        }
        if own_xa.as_deref() == Some(account.as_str()) {
            roles.push("transaction decisions");
        }
        let reach = grants_of(rt, rt.config.group_for(u), &account, u.backend_password())
            .await
            .map(|g| {
                let mut r = sextant_monitor::grants::reach(&g);
                if !roles.is_empty() {
                    r.push(format!(
                        "is also sextant's own account ({}): give [monitor] and [xa] a user of their own",
                        roles.join(", ")
                    ));
                }
                r
            });
        out.push(Account {
            user: u.name.clone(),
            server_account: account,
            own: roles.join(", "),
            reach,
        });
    }
    out
}

async fn grants_of(
    rt: &Runtime,
    group: &str,
    user: &str,
    password: &str,
) -> Result<Vec<String>, String> {
    let g = rt
        .pool
        .groups
        .get(group)
        .ok_or_else(|| format!("no group {group}"))?;
    let primary = g
        .primary()
        .ok_or_else(|| format!("group {group} has no primary now"))?;
    let mut c = primary
        .acquire(
            user,
            password,
            Flavor::new(0, crate::frontend::DEFAULT_CHARSET),
        )
        .await
        .map_err(|e| e.to_string())?;
    let rows = c.query_internal("SHOW GRANTS").await;
    primary.release(c);
    let rows = rows.map_err(|e| e.to_string())?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect())
}

/// Logs a warning for each account that reaches too far (at start and
/// after a reload).
pub async fn warn(shared: &Shared) {
    let rt = shared.runtime();
    let accounts = audit(&rt).await;
    *shared.accounts.lock() = Some(as_table(&accounts));
    for a in accounts {
        match &a.reach {
            Ok(r) if r.is_empty() => {}
            Ok(r) => tracing::warn!(
                user = %a.user,
                account = %a.server_account,
                "the server account of user {:?} reaches beyond its own schemas: {}; grant it its own schemas only (docs/security.md)",
                a.user,
                r.join("; ")
            ),
            Err(e) => {
                tracing::info!(user = %a.user, "the grants of user {:?}'s server account could not be read: {e}", a.user)
            }
        }
    }
}

/// `SHOW ACCOUNTS` as a table.
pub async fn table(shared: &Shared) -> sextant_admin::Table {
    let rt = shared.runtime();
    let t = as_table(&audit(&rt).await);
    *shared.accounts.lock() = Some(t.clone());
    t
}

fn as_table(accounts: &[Account]) -> sextant_admin::Table {
    let rows = accounts
        .iter()
        .map(|a| {
            let reach = match &a.reach {
                Ok(r) if r.is_empty() => "its own schemas only".to_string(),
                Ok(r) => r.join("; "),
                Err(e) => format!("grants not read: {e}"),
            };
            vec![
                Some(a.user.clone()),
                Some(a.server_account.clone()),
                Some(a.own.clone()),
                Some(reach),
            ]
        })
        .collect();
    sextant_admin::Table {
        columns: ["user", "server_account", "sextant_uses_it_for", "reaches"]
            .map(String::from)
            .to_vec(),
        rows,
    }
}
