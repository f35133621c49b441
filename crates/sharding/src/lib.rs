//! Sharding layout: which group holds which rows.
//!
//! A [`Layout`] says, for every table sextant may see, where it lives: a
//! sharded table is spread over the groups of its vdb by its shard key
//! ([`placement`]), a single table lives in one group, a global table has
//! a full copy in every group, and a table nobody listed follows the
//! layout's rule for unlisted tables. Layouts come from Cetus's own files
//! ([`cetus`]), read as they are, and are validated before use: a layout
//! that could put a row nowhere, or in two places, is refused with the
//! file, line and key at fault.

pub mod analyze;
pub mod cetus;
pub mod columns;
pub mod constructs;
pub mod dates;
mod error;
pub mod fingerprint;
pub mod grouping;
mod layout;
pub mod merge;
pub mod placement;
pub mod route;
pub mod session;

pub use error::LayoutError;
pub use fingerprint::Lit;
pub use layout::{
    KeyType, Layout, Method, Partition, Placement, Sequence, ShardedTable, Unlisted, Vdb,
    MAX_GROUPS,
};
pub use route::{Route, Router};
