//! The work a plan may do, counted before the search starts.
//!
//! A layout is priced by replaying its stages' layers (the first stage's
//! ceil(L / p) layers for each micro-batch in flight, at most L, and the
//! last stage's), and each parallel structure's per-stage states are priced
//! once by walking the model's tensors, a few per layer. Both cost about
//! the model's layer count L, so a search costs (structures + layouts) x L
//! "layer-pricings", whatever the model. [`bound`] counts that product
//! from the axes alone, before pricing anything: every layout the axes
//! open counts, pruned or not, so the search never does more than it says.

use super::space::{Axes, Structure, batches, kernels, recompute_modes};
use crate::error::{Error, Result};
use crate::units::Count;

/// The most layer-pricings a plan may do: 2^26, about 67 million.
///
/// The README's largest named search, llama-3.1-70b (80 layers) on 512
/// H100s at Llama 3's global batch (`--global-batch 4096 --seq-len 4096`)
/// with `--allow all`, opens 348,420 layouts on 930 structures: 27.9
/// million layer-pricings; without `--allow all`, 11.8 million. 2^26
/// leaves the largest a margin of 2.4 and refuses what the issue met: a
/// 1,024-layer Llama on 1,024 GPUs with `--allow all` opens 425,472
/// layouts (437 million layer-pricings), a 1,024-layer DeepSeek-V3 on
/// 4,096 GPUs 4.45 million (4.6 billion).
pub const WORK_BUDGET: u64 = 1 << 26;

/// What a search over some axes may cost: its structures and layouts, each
/// priced at the model's layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    /// Parallel structures whose states are priced.
    pub structures: u64,
    /// Layouts (a structure with a workload) priced.
    pub layouts: u64,
    /// The model's layers (1 when unknown): what one pricing replays.
    pub layers: u64,
}

impl Work {
    /// (structures + layouts) x layers, saturating.
    pub fn layer_pricings(&self) -> u64 {
        self.structures
            .saturating_add(self.layouts)
            .saturating_mul(self.layers.max(1))
    }
}

/// The most a search of `structures` on `axes` can price: every structure
/// once, and every layout its framework's recomputation, loss kernels,
/// sequence parallelism and batches open.
pub(super) fn bound(axes: &Axes, structures: &[Structure], layers: u64) -> Work {
    let mut work = Work {
        layers: layers.max(1),
        ..Work::default()
    };
    for structure in structures {
        let framework = structure.sharding.framework;
        let sequence_parallel = if structure.tensor > 1 {
            axes.sequence_parallel.len()
        } else {
            1
        };
        let choices = (sequence_parallel as u64)
            .saturating_mul(recompute_modes(framework, &axes.recompute).len() as u64)
            .saturating_mul(kernels(framework, axes).len() as u64);
        let batches = batches(axes, structure.data(axes.gpus)).len() as u64;
        work.structures = work.structures.saturating_add(1);
        work.layouts = work.layouts.saturating_add(choices.saturating_mul(batches));
    }
    work
}

/// Refuses `work` past [`WORK_BUDGET`], naming the axes that open the
/// most values, which a flag (or a narrower `--allow`) would fix.
pub(super) fn check(axes: &Axes, work: &Work) -> Result<()> {
    let spent = work.layer_pricings();
    if spent <= WORK_BUDGET {
        return Ok(());
    }
    let mut open: Vec<(&str, usize)> = [
        ("--pp", axes.pipeline.len()),
        ("--tp", axes.tensor.len()),
        ("--cp", axes.context.len()),
        ("--ep", axes.expert.len()),
        ("--zero or --fsdp", axes.shardings.len()),
        ("--recompute", axes.recompute.len()),
        ("--loss", axes.loss.len()),
        ("--offload", axes.offload.len()),
        ("--sequence-parallel", axes.sequence_parallel.len()),
        (
            "--micro-batch",
            if axes.global_batch.is_none() {
                axes.micro_batches.len()
            } else {
                1
            },
        ),
    ]
    .into_iter()
    .filter(|(_, values)| *values > 1)
    .collect();
    // The widest first; ties keep the order above (the parallel degrees).
    open.sort_by_key(|(_, values)| std::cmp::Reverse(*values));
    let widest: Vec<String> = open
        .iter()
        .take(MOST_NAMED)
        .map(|(flag, values)| format!("{flag} ({values} values open)"))
        .collect();
    let fix = if widest.is_empty() {
        "give fewer GPUs or a shallower model".to_string()
    } else {
        format!("fix {}, or --allow fewer axes", widest.join(" or "))
    };
    Err(Error::InvalidValue {
        what: "plan",
        value: format!(
            "{} layouts on {} structures x {} layers",
            Count(work.layouts).grouped(),
            Count(work.structures).grouped(),
            Count(work.layers).grouped()
        ),
        reason: format!(
            "pricing them costs {} layer-pricings, more than a plan's budget of {}; {fix}",
            Count(spent).grouped(),
            Count(WORK_BUDGET).grouped()
        ),
    })
}

/// How many of the widest axes a refusal names.
const MOST_NAMED: usize = 2;
