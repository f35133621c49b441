//! The fleet's intents, delivered in revision order: those already there
//! first, then each change as etcd reports it. A watch that ends (etcd
//! restarted, the network dropped) starts again from the revision after
//! the last one delivered; one whose history etcd compacted away reads
//! every intent again and delivers what differs.

use crate::{Change, Fleet};
use etcd_client::{EventType, GetOptions, WatchOptions};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

pub(crate) async fn run(fleet: Arc<Fleet>, tx: UnboundedSender<Change>) {
    let mut revision = 0i64;
    let mut synced = false;
    loop {
        if let Err(e) = follow(&fleet, &tx, &mut revision, &mut synced).await {
            fleet.unreachable(e);
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn follow(
    fleet: &Fleet,
    tx: &UnboundedSender<Change>,
    revision: &mut i64,
    synced: &mut bool,
) -> Result<(), String> {
    let mut c = fleet.client().await.map_err(|e| e.to_string())?;
    let prefix = fleet.keys.intents();
    if !*synced {
        let resp = c
            .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(|e| e.to_string())?;
        let mut present = Vec::new();
        for kv in resp.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let Some(intent) = fleet.keys.intent_of(&key) else {
                continue;
            };
            // A value no member sealed counts as none.
            let Some(value) = opened(fleet, &key, kv.value()) else {
                continue;
            };
            present.push(intent.clone());
            deliver(fleet, tx, intent, Some(value), kv.mod_revision());
        }
        let gone: Vec<_> = {
            let st = fleet.state.lock();
            st.seen
                .keys()
                .filter(|i| !present.contains(i))
                .cloned()
                .collect()
        };
        let at = resp.header().map_or(0, |h| h.revision());
        for intent in gone {
            deliver(fleet, tx, intent, None, at);
        }
        *revision = at;
        *synced = true;
        fleet.reachable();
    }
    let mut stream = c
        .watch(
            prefix.as_str(),
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(*revision + 1),
            ),
        )
        .await
        .map_err(|e| e.to_string())?;
    fleet.reachable();
    loop {
        let Some(resp) = stream.message().await.map_err(|e| e.to_string())? else {
            return Err("the watch ended".into());
        };
        if resp.compact_revision() > 0 || resp.canceled() {
            // The history from our revision on is gone: read everything.
            *synced = false;
            return Ok(());
        }
        for ev in resp.events() {
            let Some(kv) = ev.kv() else { continue };
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let Some(intent) = fleet.keys.intent_of(&key) else {
                continue;
            };
            let value = match ev.event_type() {
                EventType::Put => opened(fleet, &key, kv.value()),
                EventType::Delete => {
                    fleet.note_ignored(&key, false);
                    None
                }
            };
            deliver(fleet, tx, intent, value, kv.mod_revision());
            *revision = (*revision).max(kv.mod_revision());
        }
    }
}

/// An intent's value, if a member sealed it (else noted as ignored).
fn opened(fleet: &Fleet, key: &str, stored: &[u8]) -> Option<String> {
    let v = fleet.settings.seal.open(key, stored).map(str::to_string);
    fleet.note_ignored(key, v.is_none());
    v
}

/// Hands an intent to the instance, unless it already has that revision.
fn deliver(
    fleet: &Fleet,
    tx: &UnboundedSender<Change>,
    intent: crate::Intent,
    value: Option<String>,
    revision: i64,
) {
    {
        let mut st = fleet.state.lock();
        let same = match (&value, st.seen.get(&intent)) {
            (Some(v), Some((old, r))) => *r == revision && old == v,
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        match &value {
            Some(v) => {
                st.seen.insert(intent.clone(), (v.clone(), revision));
            }
            None => {
                st.seen.remove(&intent);
            }
        }
    }
    let _ = tx.send(Change {
        intent,
        value,
        revision,
    });
}
