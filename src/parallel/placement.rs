//! Which part of each tensor the most loaded accelerator holds, and on which
//! pipeline stages, under tensor, expert and pipeline parallelism.
//!
//! Tensor parallelism follows Megatron-LM's layers
//! (`megatron/core/tensor_parallel/layers.py`): query/key/value, gate/up and
//! fc1-style projections are column-parallel (output dimension split),
//! output/down/fc2-style projections row-parallel (input dimension split, bias
//! replicated), token embeddings and the output head vocabulary-parallel,
//! norms and routers replicated. Uneven splits round up (the largest shard);
//! Megatron also pads the vocabulary to a multiple of 128 × tp
//! (`make_vocab_size_divisible_by`). Pipeline stages hold ceil(L / pp)
//! consecutive layers; the first also holds the embeddings, the last the
//! final norm and the output head (and, when the head is tied, a copy of the
//! token embedding, as Megatron keeps one for the output layer).

use super::layout::{expert_of, is_token_embedding, layer_of};
use super::{Framework, Layout, Parallelism};
use crate::error::Result;
use crate::model::{Role, Shape, Tensor};

/// Megatron's `make_vocab_size_divisible_by` default.
const VOCAB_DIVISIBLE_BY: u64 = 128;

/// Name fragments of row-parallel projections (input dimension split).
const ROW_PARALLEL: &[&str] = &[
    "o_proj",
    "down_proj",
    "c_proj",
    "out_proj",
    "dense_4h_to_h",
    "fc2",
    "w2",
    "wo.",
    "attention.dense.",
    "self_attention.dense.",
    "attn.dense.",
];

/// Where one tensor lives on the most loaded accelerator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The shape of the part it holds.
    pub shape: Shape,
    /// The pipeline stages holding it.
    pub stages: Vec<u64>,
    /// Whether it is an expert weight (sharded over the expert-data-parallel group).
    pub expert: bool,
}

/// How a tensor splits across tensor-parallel ranks.
enum Split {
    Replicated,
    Dim(usize),
    Vocab,
}

/// What placement reads of a tensor's name, read once per model: a layout
/// search places every tensor under thousands of layouts, and parsing names
/// was most of that work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameFacts {
    /// Its decoder layer (`layers.N.`), if any.
    pub layer: Option<u64>,
    /// Its expert (`experts.N.`), if any.
    pub expert: Option<u64>,
    /// Whether it is a row-parallel projection (input dimension split).
    pub row_parallel: bool,
    /// Whether it is the token embedding.
    pub token_embedding: bool,
}

impl NameFacts {
    /// The facts of `tensor`'s name.
    pub fn of(tensor: &Tensor) -> NameFacts {
        let name = tensor.name.as_str();
        NameFacts {
            layer: layer_of(name),
            expert: expert_of(name),
            row_parallel: ROW_PARALLEL.iter().any(|fragment| name.contains(fragment)),
            token_embedding: is_token_embedding(tensor),
        }
    }
}

/// The part of `tensor` the most loaded rank holds, or `None` when that rank
/// holds none of it (an expert placed on another expert-parallel rank).
pub fn place(
    tensor: &Tensor,
    layout: &Layout,
    parallelism: &Parallelism,
) -> Result<Option<Placement>> {
    place_named(tensor, &NameFacts::of(tensor), layout, parallelism)
}

/// [`place`] with the tensor's name already read.
pub fn place_named(
    tensor: &Tensor,
    facts: &NameFacts,
    layout: &Layout,
    parallelism: &Parallelism,
) -> Result<Option<Placement>> {
    let mut dims = tensor.shape.dims().to_vec();
    let expert = tensor.role == Role::Experts;
    if expert && parallelism.expert > 1 {
        match facts.expert {
            // Per-expert tensors: rank 0 holds experts 0 .. ceil(E / ep).
            Some(index) => {
                if index >= layout.experts.div_ceil(parallelism.expert) {
                    return Ok(None);
                }
            }
            // Fused [E, ...] stacks split along the expert dimension.
            None => split_dim(&mut dims, 0, parallelism.expert),
        }
    }
    let tensor_parallel = parallelism.tensor;
    match split(tensor, facts, layout) {
        Split::Replicated => {}
        Split::Dim(dim) => split_dim(&mut dims, dim, tensor_parallel),
        Split::Vocab => {
            if let Some(vocab) = dims.first_mut() {
                let multiple = match parallelism.framework {
                    Framework::Megatron => VOCAB_DIVISIBLE_BY * tensor_parallel,
                    _ => tensor_parallel,
                };
                *vocab = vocab.div_ceil(multiple) * multiple / tensor_parallel;
            }
        }
    }
    let stages = stages(tensor, facts, layout, parallelism.pipeline, &mut dims);
    Ok(Some(Placement {
        shape: Shape::new(dims)?,
        stages,
        expert,
    }))
}

fn split_dim(dims: &mut [u64], dim: usize, degree: u64) {
    if let Some(size) = dims.get_mut(dim) {
        *size = size.div_ceil(degree);
    }
}

fn split(tensor: &Tensor, facts: &NameFacts, layout: &Layout) -> Split {
    let rank = tensor.shape.dims().len();
    match tensor.role {
        Role::Norm | Role::Router => Split::Replicated,
        Role::Embedding if facts.token_embedding => Split::Vocab,
        Role::Embedding => Split::Replicated,
        Role::OutputHead => Split::Vocab,
        Role::Other => Split::Dim(0),
        Role::Attention | Role::Mlp | Role::Experts => {
            let row = facts.row_parallel;
            // Linear weights are [out, in] ([in, out] for GPT-2's Conv1D);
            // fused expert stacks put the expert count first.
            let offset =
                usize::from(tensor.role == Role::Experts && rank == 3 && facts.expert.is_none());
            let (out_dim, in_dim) = if layout.transposed_linears {
                (1, 0)
            } else {
                (0, 1)
            };
            match (rank - offset, row) {
                (1, true) => Split::Replicated,
                (1, false) => Split::Dim(offset),
                (_, true) => Split::Dim(offset + in_dim),
                (_, false) => Split::Dim(offset + out_dim),
            }
        }
    }
}

/// The pipeline stages holding `tensor`; a flat `--params` vector is spread
/// evenly, so stage 0 holds ceil(N / pp) of it.
fn stages(
    tensor: &Tensor,
    facts: &NameFacts,
    layout: &Layout,
    pipeline: u64,
    dims: &mut [u64],
) -> Vec<u64> {
    let last = pipeline - 1;
    if pipeline == 1 {
        return vec![0];
    }
    if let (Some(layer), true) = (facts.layer, layout.layers > 0) {
        return vec![(layer / layout.layers.div_ceil(pipeline)).min(last)];
    }
    match tensor.role {
        Role::Embedding if facts.token_embedding && layout.tied_head => vec![0, last],
        Role::Embedding => vec![0],
        Role::OutputHead | Role::Norm => vec![last],
        Role::Other if layout.layers == 0 => {
            split_dim(dims, 0, pipeline);
            vec![0]
        }
        _ => vec![0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::{Framework, Parallelism};

    fn tensor(name: &str, dims: &[u64], role: Role) -> Tensor {
        Tensor::new(name, Shape::new(dims.to_vec()).unwrap(), role)
    }

    fn layout() -> Layout {
        Layout {
            layers: 32,
            experts: 8,
            transposed_linears: false,
            tied_head: false,
        }
    }

    fn placed(t: &Tensor, tp: u64, pp: u64, ep: u64, framework: Framework) -> Option<Placement> {
        let parallelism = Parallelism {
            gpus: tp * pp * ep,
            tensor: tp,
            pipeline: pp,
            expert: ep,
            framework,
            ..Parallelism::SINGLE
        };
        place(t, &layout(), &parallelism).unwrap()
    }

    #[test]
    fn column_and_row_parallel_projections() {
        let q = tensor(
            "model.layers.0.self_attn.q_proj.weight",
            &[4096, 4096],
            Role::Attention,
        );
        let o = tensor(
            "model.layers.0.self_attn.o_proj.weight",
            &[4096, 4096],
            Role::Attention,
        );
        let down = tensor(
            "model.layers.31.mlp.down_proj.weight",
            &[4096, 11008],
            Role::Mlp,
        );
        assert_eq!(
            placed(&q, 8, 1, 1, Framework::DeepSpeed)
                .unwrap()
                .shape
                .dims(),
            [512, 4096]
        );
        assert_eq!(
            placed(&o, 8, 1, 1, Framework::DeepSpeed)
                .unwrap()
                .shape
                .dims(),
            [4096, 512]
        );
        let down = placed(&down, 3, 4, 1, Framework::DeepSpeed).unwrap();
        assert_eq!(down.shape.dims(), [4096, 3670]);
        assert_eq!(down.stages, [3]);
    }

    #[test]
    fn vocabulary_is_padded_the_megatron_way() {
        let embedding = tensor("transformer.wte.weight", &[50257, 768], Role::Embedding);
        assert_eq!(
            placed(&embedding, 1, 1, 1, Framework::Megatron)
                .unwrap()
                .shape
                .dims(),
            [50304, 768]
        );
        assert_eq!(
            placed(&embedding, 2, 1, 1, Framework::Megatron)
                .unwrap()
                .shape
                .dims(),
            [25216, 768]
        );
        assert_eq!(
            placed(&embedding, 2, 1, 1, Framework::Fsdp2)
                .unwrap()
                .shape
                .dims(),
            [25129, 768]
        );
    }

    #[test]
    fn experts_split_across_expert_parallel_ranks() {
        let fused = tensor(
            "model.layers.0.mlp.experts.gate_up_proj",
            &[8, 28672, 4096],
            Role::Experts,
        );
        assert_eq!(
            placed(&fused, 2, 1, 4, Framework::DeepSpeed)
                .unwrap()
                .shape
                .dims(),
            [2, 14336, 4096]
        );
        let second = tensor(
            "model.layers.0.block_sparse_moe.experts.1.w1.weight",
            &[14336, 4096],
            Role::Experts,
        );
        let fifth = tensor(
            "model.layers.0.block_sparse_moe.experts.5.w1.weight",
            &[14336, 4096],
            Role::Experts,
        );
        assert!(placed(&second, 1, 1, 4, Framework::DeepSpeed).is_some());
        assert!(placed(&fifth, 1, 1, 4, Framework::DeepSpeed).is_none());
    }

    #[test]
    fn norms_replicate_and_heads_go_last() {
        let norm = tensor("model.norm.weight", &[4096], Role::Norm);
        let head = tensor("lm_head.weight", &[32000, 4096], Role::OutputHead);
        assert_eq!(
            placed(&norm, 8, 4, 1, Framework::DeepSpeed)
                .unwrap()
                .shape
                .dims(),
            [4096]
        );
        let head = placed(&head, 8, 4, 1, Framework::DeepSpeed).unwrap();
        assert_eq!(
            (head.shape.dims(), head.stages.as_slice()),
            ([4000, 4096].as_slice(), [3].as_slice())
        );
    }
}
