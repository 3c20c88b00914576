//! What a plan searched and found: the cluster, the capacity and headroom,
//! the ranked layouts and the notes, as every front door hands it to
//! `render::plan`.

use super::Outcome;
use crate::estimate::Capacity;
use crate::units::Bytes;

/// What `plan` searched and found.
pub struct Found {
    pub model: String,
    pub gpus: u64,
    pub nodes: u64,
    pub capacity: Capacity,
    pub headroom_basis_points: u64,
    /// The capacity less the headroom.
    pub usable: Bytes,
    /// The user's `estimate` flags less the layout's, which every row's
    /// command starts with.
    pub base_flags: Vec<String>,
    pub outcome: Outcome,
    pub notes: Vec<String>,
}
