//! `trainmem plan`: every layout a cluster can train a model with, priced
//! by the step timeline's peak and the step-time model, best first.
//!
//! A layout ([`Layout`]) is what a launch command chooses: the framework
//! and its sharding, the tensor-, pipeline-, context- and expert-parallel
//! degrees, sequence parallelism, offload, recomputation, the micro-batch
//! and the accumulation. [`space`] enumerates the layouts the frameworks
//! accept and the model can be split by; [`search`] prices each with
//! [`crate::estimate::Pricer`] (the peak `estimate` gives, to the byte) and
//! [`crate::step_time::price`], keeps those whose peak leaves the headroom
//! asked for, and ranks them.
//!
//! Two prunings keep a search of 100,000 layouts under a second, both
//! exact: a layout whose states alone (weights, master weights, optimizer
//! states, resident gradient buffers and the overhead) exceed the capacity
//! cannot fit with any micro-batch, and on one layout a larger micro-batch
//! never peaks lower while the accumulation stays above 1 (or at 1). A test
//! checks that the pruned search keeps exactly what the exhaustive one does.
//!
//! The work is bounded before it starts ([`budget`]): a search whose axes
//! open more than [`WORK_BUDGET`] layouts x layers is refused with the
//! axes to fix.

mod budget;
mod found;
mod search;
mod space;

pub use budget::{WORK_BUDGET, Work};
pub use found::Found;
pub use search::{MOST_RESERVE_SIMULATIONS, Outcome, Row, search};
pub use space::{Allow, Axes, Layout, Sharding, divisors};

use crate::estimate::Setup;
use crate::parallel::Framework;

/// What to search: the model's base setups and the axes.
pub struct Request<'a> {
    /// The setup of every flag the user gave, one per framework searched
    /// (the framework decides how the precision recipe is kept).
    pub bases: Vec<(Framework, Setup)>,
    /// The axes and their allowed values.
    pub axes: Axes,
    /// Bytes a layout may use: the capacity less the headroom.
    pub usable: crate::units::Bytes,
    /// The capacity: a shown row's reserved memory must fit it.
    pub capacity: crate::units::Bytes,
    /// Rows to show, each confirmed on reserved memory.
    pub top: usize,
    /// Worker threads (`--jobs`); 1 searches on the calling thread.
    pub jobs: usize,
    /// Whether to prune (off only to check the pruning).
    pub prune: bool,
    /// The model.
    pub model: &'a crate::model::Model,
}
