//! `[admin]`: the admin port and the HTTP port.

use crate::Addr;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    #[serde(default = "default_admin_listen")]
    pub listen: Addr,
    /// HTTP: /metrics (Prometheus), /healthz, /readyz, /api/..., and the
    /// status page at /. Off unless set.
    #[serde(default)]
    pub http_listen: Option<Addr>,
    pub user: String,
    /// A password (see [`secret`] for the forms it may take).
    #[serde(deserialize_with = "crate::secrets::secret")]
    pub password: String,
}

pub(crate) fn default_admin_listen() -> Addr {
    Addr("127.0.0.1:6032".into())
}
