//! One instance decides a group's failover for the whole fleet: it holds
//! the group's leader key under its membership lease (another instance
//! takes the key once that lease expires), and records each new term with
//! a compare-and-swap. An instance that cannot reach etcd, or whose lease
//! may have expired, is never the one.

use crate::{causes, Fleet, FleetError};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

/// A group's term as the fleet recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub term: u64,
    pub primary: String,
    /// The key's revision (the base of the next compare-and-swap).
    pub revision: i64,
}

impl Fleet {
    /// Whether this instance performs group `group`'s failovers: it holds
    /// the group's leader key (claimed now if no live instance does).
    /// Err: etcd did not answer, or this instance's lease may have
    /// expired; either way it must not fail over on its own.
    pub async fn lead_failover(&self, group: &str) -> Result<bool, FleetError> {
        if !self.holds_lease() {
            return Err(FleetError::Unreachable {
                endpoints: self.settings.endpoints.join(","),
                reason: "this instance's membership lease is not surely alive".into(),
            });
        }
        let mut c = self.client().await?;
        let lease = self.lease_id(&mut c).await?;
        let key = self.keys.failover_leader(group);
        let value = self.settings.seal.seal(&key, &self.settings.id);
        let put = || {
            TxnOp::put(
                key.as_str(),
                value.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )
        };
        let free = Txn::new()
            .when([Compare::version(key.as_str(), CompareOp::Equal, 0)])
            .and_then([put()])
            .or_else([TxnOp::get(key.as_str(), None)]);
        let resp = c
            .txn(free)
            .await
            .map_err(|e| self.unreachable(causes(&e)))?;
        self.reachable();
        if resp.succeeded() {
            tracing::info!(
                group,
                "this instance now performs the group's failovers for the fleet"
            );
            return Ok(true);
        }
        let holder = resp.op_responses().into_iter().find_map(|r| match r {
            etcd_client::TxnOpResponse::Get(g) => g.kvs().first().map(|kv| {
                (
                    self.settings
                        .seal
                        .open(&key, kv.value())
                        .map(str::to_string),
                    kv.lease(),
                    kv.mod_revision(),
                )
            }),
            _ => None,
        });
        match holder {
            // Ours, under this lease.
            Some((Some(id), l, _)) if id == self.settings.id && l == lease => Ok(true),
            // Written by someone without the fleet's secret: no member
            // holds it, so it is taken over (it would otherwise keep every
            // instance from failing the group over).
            Some((None, _, rev)) => {
                self.note_ignored(&key, true);
                let take = Txn::new()
                    .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, rev)])
                    .and_then([put()]);
                let resp = c
                    .txn(take)
                    .await
                    .map_err(|e| self.unreachable(causes(&e)))?;
                if resp.succeeded() {
                    self.note_ignored(&key, false);
                    tracing::warn!(
                        group,
                        "the group's failover leader key held a value no member sealed: taken over"
                    );
                }
                Ok(resp.succeeded())
            }
            _ => Ok(false),
        }
    }

    /// The instance that holds group `group`'s leader key, if any.
    pub async fn failover_leader(&self, group: &str) -> Result<Option<String>, FleetError> {
        let key = self.keys.failover_leader(group);
        Ok(self.get_opened(&key).await?.and_then(|(v, _)| v))
    }

    /// Group `group`'s newest term as the fleet recorded it (a value not
    /// sealed with the fleet's secret is ignored).
    pub async fn failover_term(&self, group: &str) -> Result<Option<Term>, FleetError> {
        let key = self.keys.failover_term(group);
        let Some((opened, revision)) = self.get_opened(&key).await? else {
            return Ok(None);
        };
        // A value no member sealed (or that does not read) counts as term
        // 0 at its revision: ignored, and overwritten by the next record.
        let term = opened.and_then(|v| {
            let (term, primary) = v.split_once(' ')?;
            Some((term.parse().ok()?, primary.to_string()))
        });
        let (term, primary) = term.unwrap_or((0, String::new()));
        Ok(Some(Term {
            term,
            primary,
            revision,
        }))
    }

    /// Records term `term` of group `group` (primary `primary`) if the
    /// key is still at revision `base` (0: not there) and this instance
    /// still holds the group's leader key. Whether it was written.
    pub async fn record_failover_term(
        &self,
        group: &str,
        term: u64,
        primary: &str,
        base: i64,
    ) -> Result<bool, FleetError> {
        let mut c = self.client().await?;
        let key = self.keys.failover_term(group);
        let leader = self.keys.failover_leader(group);
        let lease = self.lease_id(&mut c).await?;
        let value = self.settings.seal.seal(&key, &format!("{term} {primary}"));
        let txn = Txn::new()
            .when([
                Compare::mod_revision(key.as_str(), CompareOp::Equal, base),
                Compare::lease(leader.as_str(), CompareOp::Equal, lease),
            ])
            .and_then([TxnOp::put(key.as_str(), value, None)]);
        let resp = c.txn(txn).await.map_err(|e| self.unreachable(causes(&e)))?;
        self.reachable();
        Ok(resp.succeeded())
    }
}
