//! What a layout must respect of the model it splits: the constraints
//! Megatron-LM and transformers enforce, checked once before any
//! arithmetic, so an impossible layout is refused rather than priced.
//!
//! - tensor parallelism splits attention heads: tp divides the query heads
//!   (Megatron: `num_attention_heads % tensor_model_parallel_size == 0`)
//!   and the key/value heads, or is a multiple of them, each key/value head
//!   then being replicated on tp / kv_heads ranks (noted, see [`notes`]);
//! - pipeline stages each hold at least one layer: pp <= layers;
//! - expert parallelism splits whole experts: ep divides the routed
//!   experts, and a dense model has none to split;
//! - sequence parallelism splits activations across the tensor-parallel
//!   ranks: it needs tp > 1 (Megatron switches it off at tp 1);
//! - and, before any layout, attention must be able to run: the key/value
//!   heads divide the query heads (a config.json that breaks this still
//!   builds in transformers, and `trainmem params` counts it).
//!
//! What the model does not reveal (heads of a bare `--params`, the layers
//! of a checkpoint whose names show none) is not checked.

use super::{Layout, Parallelism};
use crate::error::{Error, Result};
use crate::model::{Model, Role};

/// The largest head count whose divisors an error lists one by one.
const LISTED_DIVISORS_UP_TO: u64 = 4096;

/// The sizes of a model that a layout must fit, as far as they are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Splittable {
    /// Query heads, when the architecture is known.
    pub heads: Option<u64>,
    /// Key/value heads, when the architecture is known.
    pub kv_heads: Option<u64>,
    /// Decoder layers, when known (from the architecture or tensor names).
    pub layers: Option<u64>,
    /// Routed experts per MoE layer: `Some(0)` for a model known to be
    /// dense, `None` when unknown (a bare `--params`, fused experts whose
    /// count no name or config gives).
    pub experts: Option<u64>,
}

impl Splittable {
    /// What `model` reveals of its heads, layers and experts.
    pub fn of(model: &Model) -> Splittable {
        Splittable::with_layout(model, &Layout::of(model))
    }

    /// [`Splittable::of`] with the model's layout already read.
    pub fn with_layout(model: &Model, layout: &Layout) -> Splittable {
        let dimensions = model.dimensions.as_ref();
        let has_experts = model.tensors.iter().any(|t| t.role == Role::Experts);
        let experts = match dimensions.and_then(|d| d.experts.as_ref()) {
            Some(mixture) => Some(mixture.experts),
            None if layout.experts > 0 => Some(layout.experts),
            None if model.shapes_known && !has_experts => Some(0),
            None => None,
        };
        // A state-space model (Mamba) has no attention heads to split.
        let attention = dimensions.filter(|d| d.state_space.is_none());
        Splittable {
            heads: attention.map(|d| d.heads),
            kv_heads: attention.map(|d| d.kv_heads),
            layers: dimensions
                .map(|d| d.layers)
                .or((layout.layers > 0).then_some(layout.layers)),
            experts,
        }
    }
}

/// Refuses a layout the model cannot be split by.
pub fn check(model: &Model, layout: &Parallelism, sequence_parallel: bool) -> Result<()> {
    check_sizes(
        &model.name,
        &Splittable::of(model),
        layout,
        sequence_parallel,
    )
}

/// [`check`] with the model's sizes already read (`name` for the messages).
pub fn check_sizes(
    name: &str,
    sizes: &Splittable,
    layout: &Parallelism,
    sequence_parallel: bool,
) -> Result<()> {
    check_sequence_parallel(layout.tensor, sequence_parallel)?;
    let sizes = *sizes;
    if let (Some(heads), Some(kv_heads)) = (sizes.heads, sizes.kv_heads)
        && (kv_heads == 0 || !heads.is_multiple_of(kv_heads))
    {
        return Err(Error::InvalidConfig {
            key: "num_key_value_heads".to_string(),
            problem: format!(
                "`{kv_heads}` does not divide the {heads} attention heads: transformers builds such a model but its attention (`repeat_kv`) cannot run, so it cannot train; accepted: {}",
                divisors(heads)
            ),
        });
    }
    let tp = layout.tensor;
    if let Some(heads) = sizes.heads
        && !heads.is_multiple_of(tp)
    {
        return Err(invalid(
            format!("--tp {tp} with {heads} attention heads"),
            format!(
                "tensor parallelism splits the attention heads, so tp must divide them (Megatron: num_attention_heads % tensor_model_parallel_size == 0); accepted: {}",
                divisors(heads)
            ),
        ));
    }
    if let Some(kv_heads) = sizes.kv_heads
        && kv_heads > 0
        && !kv_heads.is_multiple_of(tp)
        && !tp.is_multiple_of(kv_heads)
    {
        return Err(invalid(
            format!("--tp {tp} with {kv_heads} key/value heads"),
            format!(
                "tensor parallelism splits the key/value heads too, so tp must divide them, or be a multiple of them (each key/value head then replicated); accepted: {} or a multiple of {kv_heads}",
                divisors(kv_heads)
            ),
        ));
    }
    if let Some(layers) = sizes.layers
        && layout.pipeline > layers
    {
        return Err(invalid(
            format!("--pp {} with {layers} layers", layout.pipeline),
            format!(
                "every pipeline stage holds at least one layer; accepted: 1 to {layers} stages"
            ),
        ));
    }
    match sizes.experts {
        Some(0) if layout.expert > 1 => Err(invalid(
            format!("--ep {}", layout.expert),
            format!(
                "{name} is dense: expert parallelism splits the experts of a mixture-of-experts model; accepted: --ep 1"
            ),
        )),
        Some(experts) if experts > 0 && !experts.is_multiple_of(layout.expert) => Err(invalid(
            format!("--ep {} with {experts} experts", layout.expert),
            format!(
                "expert parallelism gives each rank whole experts, so ep must divide them; accepted: {}",
                divisors(experts)
            ),
        )),
        _ => Ok(()),
    }
}

/// Refuses `--sequence-parallel` without tensor parallelism to split the
/// sequence over.
pub fn check_sequence_parallel(tensor: u64, sequence_parallel: bool) -> Result<()> {
    if sequence_parallel && tensor < 2 {
        return Err(invalid(
            format!("--sequence-parallel with --tp {tensor}"),
            "sequence parallelism splits activations across the tensor-parallel ranks (Megatron switches it off without them); add --tp 2 or more, or drop --sequence-parallel".to_string(),
        ));
    }
    Ok(())
}

/// Refuses virtual pipeline stages the layers cannot fill: Megatron's
/// interleaved schedule gives each of the pp ranks v model chunks of equal
/// layers (`megatron/training/arguments.py`: the layers per pipeline stage
/// must divide by `num_layers_per_virtual_pipeline_stage`), so the layers
/// must divide by pp x v. Without a known layer count pp x v is held to
/// [`super::MAX_PIPELINE_STAGES`], as pp alone is: every chunk holds at
/// least one layer.
pub fn check_virtual_stages(layers: Option<u64>, pipeline: u64, virtual_stages: u64) -> Result<()> {
    let virtual_stages = virtual_stages.max(1);
    if virtual_stages == 1 {
        return Ok(());
    }
    let chunks = pipeline.checked_mul(virtual_stages);
    let shown =
        |layers: &str| format!("--pp {pipeline} with --virtual-stages {virtual_stages}{layers}");
    match (layers, chunks) {
        (Some(layers), Some(chunks)) if layers.is_multiple_of(chunks) => Ok(()),
        (Some(layers), _) => Err(invalid(
            shown(&format!(" on {layers} layers")),
            format!(
                "the interleaved schedule gives each of the {pipeline} pipeline ranks v chunks of equal layers, so pp x v = {} must divide the {layers} layers; accepted: {}",
                chunks.map_or_else(|| "more than 2^64".to_string(), |c| c.to_string()),
                if pipeline > 0 && layers.is_multiple_of(pipeline) {
                    format!("--virtual-stages {}", divisors(layers / pipeline))
                } else {
                    format!("a --pp that divides the {layers} layers")
                }
            ),
        )),
        (None, Some(chunks)) if chunks <= super::MAX_PIPELINE_STAGES => Ok(()),
        (None, _) => Err(invalid(
            shown(""),
            format!(
                "every virtual stage holds at least one layer: at most {} pp x virtual stages",
                super::MAX_PIPELINE_STAGES
            ),
        )),
    }
}

/// Refuses sequence parallelism over a sequence the tensor-parallel ranks
/// cannot split evenly: Megatron-core scatters the activations along the
/// sequence (`_split_along_first_dim` in
/// `megatron/core/tensor_parallel/mappings.py`: "First dimension of the
/// tensor should be divisible by tensor parallel size"), so each
/// context-parallel rank's S / cp positions must divide by tp.
pub fn check_sequence_split(
    tensor: u64,
    context: u64,
    seq_len: Option<u64>,
    sequence_parallel: bool,
) -> Result<()> {
    let (true, Some(seq)) = (sequence_parallel && tensor > 1, seq_len) else {
        return Ok(());
    };
    let positions = seq / context.max(1);
    if positions.is_multiple_of(tensor) {
        return Ok(());
    }
    let per_rank = if context > 1 {
        format!(" (its {positions} positions per context-parallel rank)")
    } else {
        String::new()
    };
    let step = tensor.saturating_mul(context.max(1));
    Err(invalid(
        format!("--sequence-parallel with --tp {tensor} and --seq-len {seq}"),
        format!(
            "sequence parallelism splits the sequence{per_rank} across the tensor-parallel ranks, which Megatron-core requires to divide evenly; accepted: a sequence length that is a multiple of {step}, such as {} or {}",
            (seq / step).max(1).saturating_mul(step),
            (seq / step).saturating_add(1).saturating_mul(step)
        ),
    ))
}

/// Refuses context parallelism over a sequence it cannot split, or over an
/// attention it does not replace.
///
/// * The load-balanced split cuts each sequence into 2·cp chunks, rank r
///   taking chunks r and 2·cp - 1 - r: torch's `_HeadTailLoadBalancer`
///   (`torch/distributed/tensor/experimental/_context_parallel/_load_balancer.py`,
///   `_generate_indices`: `if seq_length % (world_size * 2) != 0: raise
///   AssertionError`) and Megatron-core's `get_batch_on_this_cp_rank`
///   (`2 * cp_size` chunks of the sequence), so the sequence must be a
///   multiple of 2·cp.
/// * Ring attention replaces the fused attention ops (torch dispatches
///   `_scaled_dot_product_flash_attention`, `_efficient_attention` and
///   `_cudnn_attention` to the ring; Transformer Engine its fused
///   attention): eager attention's matmul and softmax are not split.
pub fn check_context_parallel(cp: u64, seq_len: Option<u64>, eager: bool) -> Result<()> {
    if cp <= 1 {
        return Ok(());
    }
    if eager {
        return Err(invalid(
            format!("--cp {cp} with --attention eager"),
            "ring attention replaces the fused attention kernels (sdpa, flash); eager attention's matmul and softmax are not split over the sequence: use --attention sdpa or flash".to_string(),
        ));
    }
    let chunks = cp.saturating_mul(2);
    match seq_len {
        Some(seq) if !seq.is_multiple_of(chunks) => Err(invalid(
            format!("--seq-len {seq} with --cp {cp}"),
            format!(
                "the load-balanced ring splits each sequence into 2 × cp = {chunks} chunks (torch's _HeadTailLoadBalancer, Megatron's get_batch_on_this_cp_rank), so the sequence must be a multiple of {chunks}; nearest: {} or {}",
                (seq / chunks).max(1) * chunks,
                (seq / chunks + 1) * chunks
            ),
        )),
        _ => Ok(()),
    }
}

/// How a layout that frameworks accept but trainmem prices approximately
/// is priced: tp above the key/value heads.
pub fn notes(model: &Model, layout: &Parallelism) -> Vec<String> {
    // One rank holds every key/value head: nothing to say, and no need to
    // read the model's layout (a search asks this of every estimate).
    if layout.tensor <= 1 {
        return Vec::new();
    }
    let sizes = Splittable::of(model);
    match sizes.kv_heads {
        Some(kv_heads) if kv_heads > 0 && layout.tensor > kv_heads => vec![format!(
            "tp {} exceeds the {kv_heads} key/value heads: each key/value head is replicated on {} ranks (Megatron-core instead requires tp to divide them); trainmem splits k and v evenly, so a rank's key/value weights and activations are slightly under-counted",
            layout.tensor,
            layout.tensor / kv_heads
        )],
        _ => Vec::new(),
    }
}

fn invalid(value: String, reason: String) -> Error {
    Error::InvalidValue {
        what: "parallel layout",
        value,
        reason,
    }
}

/// The divisors of `n`, listed (`1, 2, 4, 8`) when `n` is small enough.
fn divisors(n: u64) -> String {
    if n > LISTED_DIVISORS_UP_TO {
        return format!("a divisor of {n}");
    }
    (1..=n)
        .filter(|d| n.is_multiple_of(*d))
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_parallel_needs_a_sequence_of_2_cp_chunks_and_fused_attention() {
        assert!(check_context_parallel(4, Some(8192), false).is_ok());
        assert!(check_context_parallel(1, Some(8191), true).is_ok());
        let error = check_context_parallel(4, Some(8188), false)
            .unwrap_err()
            .to_string();
        assert!(error.contains("multiple of 8"), "{error}");
        assert!(error.contains("8184 or 8192"), "{error}");
        assert!(check_context_parallel(2, Some(4096), true).is_err());
        assert!(check_context_parallel(2, None, false).is_ok());
    }
    use crate::architecture::Dimensions;
    use crate::units::Count;

    fn llama(heads: u64, kv_heads: u64, layers: u64) -> Model {
        let mut model = Model::flat(Count(7_000_000_000));
        model.dimensions =
            Some(Dimensions::generic(layers, heads * 128, heads, kv_heads, 11008, 32000).unwrap());
        model
    }

    fn layout(tp: u64, pp: u64, ep: u64) -> Parallelism {
        Parallelism {
            gpus: tp * pp * ep,
            tensor: tp,
            pipeline: pp,
            expert: ep,
            ..Parallelism::SINGLE
        }
    }

    fn reason(model: &Model, layout: &Parallelism) -> String {
        match check(model, layout, false) {
            Err(Error::InvalidValue { reason, .. }) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn tp_must_divide_the_heads() {
        let model = llama(32, 32, 32);
        assert!(reason(&model, &layout(64, 1, 1)).contains("accepted: 1, 2, 4, 8, 16, 32"));
        assert!(check(&model, &layout(8, 1, 1), false).is_ok());
        assert!(reason(&model, &layout(3, 1, 1)).contains("num_attention_heads"));
    }

    #[test]
    fn tp_above_the_key_value_heads_replicates_them_with_a_note() {
        let model = llama(32, 8, 32);
        assert!(check(&model, &layout(16, 1, 1), false).is_ok());
        assert_eq!(notes(&model, &layout(16, 1, 1)).len(), 1);
        assert!(notes(&model, &layout(8, 1, 1)).is_empty());
        let odd = llama(36, 12, 32);
        assert!(reason(&odd, &layout(9, 1, 1)).contains("key/value heads"));
    }

    #[test]
    fn pp_cannot_exceed_the_layers() {
        let model = llama(32, 32, 32);
        assert!(reason(&model, &layout(1, 33, 1)).contains("accepted: 1 to 32 stages"));
        assert!(check(&model, &layout(1, 32, 1), false).is_ok());
    }

    #[test]
    fn ep_needs_experts_it_divides() {
        let dense = Model::from_tensors(
            "dense",
            "test",
            vec![crate::model::Tensor::new(
                "model.layers.0.mlp.up_proj.weight",
                crate::model::Shape::new(vec![8, 4]).unwrap(),
                Role::Mlp,
            )],
        );
        assert!(reason(&dense, &layout(1, 1, 2)).contains("is dense"));
        let mut moe = dense.clone();
        moe.tensors = (0..8)
            .map(|e| {
                crate::model::Tensor::new(
                    format!("model.layers.0.mlp.experts.{e}.up_proj.weight"),
                    crate::model::Shape::new(vec![8, 4]).unwrap(),
                    Role::Experts,
                )
            })
            .collect();
        assert!(reason(&moe, &layout(1, 1, 3)).contains("accepted: 1, 2, 4, 8"));
        assert!(check(&moe, &layout(1, 1, 4), false).is_ok());
        assert!(check(&Model::flat(Count(7)), &layout(1, 1, 3), false).is_ok());
    }

    #[test]
    fn sequence_parallel_needs_tensor_parallel() {
        let model = Model::flat(Count(7));
        assert!(check(&model, &layout(1, 1, 1), true).is_err());
        assert!(check(&model, &layout(2, 1, 1), true).is_ok());
    }
}
