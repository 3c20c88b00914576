//! Tensor, sequence and pipeline parallelism: what one rank holds.
//!
//! Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
//! Transformer Models", Table 2. Tensor parallelism over t ranks splits
//! the heads, the MLP (and expert) width and the vocabulary: the tensors
//! between a column-parallel and a row-parallel linear (q, k, v, the
//! attention scores and output, the MLP intermediates, the logits) are
//! divided by t. The others (norm inputs, the inputs of column-parallel
//! linears, dropout masks on the hidden state) stay whole on every rank,
//! unless sequence parallelism splits them along the sequence. Splits
//! that do not divide evenly are rounded up: the largest rank counts.
//!
//! Formulas read sizes from a [`Rank`]: `tokens` and the split widths for
//! the tensor-parallel part, `sequence_tokens` for the rest, so that one
//! formula serves every layout.
//!
//! Pipeline parallelism over p stages with the 1F1B schedule and m
//! micro-batches per step: stage s runs min(p - s - 1, m) warm-up forwards
//! before its first backward, so it holds min(p - s, m) micro-batches of
//! its ceil(L / p) layers in flight (Megatron-core's
//! `forward_backward_pipelining_without_interleaving`: `num_warmup_microbatches
//! = min(pipeline_parallel_size - pipeline_parallel_rank - 1,
//! num_microbatches)`, then one more forward in the steady state). The
//! first stage holds the most, min(p, m); the last one micro-batch with the
//! output head and the loss.

use super::Workload;
use crate::architecture::{Dimensions, SharedExpert};
use crate::error::{Error, Result};

/// The sizes one micro-batch has on one tensor-parallel rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// Bytes per element of the activation dtype, P.
    pub element: u64,
    /// Bytes per element of the residual stream between the layers' blocks
    /// and of the norms over it: P, or the weights' under autocast (see
    /// `autocast.rs`).
    pub residual: u64,
    /// Bytes per element of what the MLP's projections produce, and of the
    /// gated MLP's intermediates and their gradients: P, or the residual's
    /// when the decoder's linears are bitsandbytes `Linear4bit`s, which
    /// return their output in their input's dtype (see `autocast.rs`).
    pub projected: u64,
    /// Bytes per element of what the residual stream's norms compute and
    /// return: the residual's, or fp32 where CUDA autocast runs the norm's
    /// op in fp32 (`layer_norm`, `rms_norm`; see `autocast.rs`).
    pub normed: u64,
    /// Autocast with CUDA's op lists: `pow` and `softmax` run in fp32 too.
    pub cuda_autocast: bool,
    /// Sequences B.
    pub batch: u64,
    /// Sequence length S (whole: attention needs every position), or its
    /// S / N positions under context parallelism over N ranks.
    pub seq: u64,
    /// B x S: the token count of tensor-parallel tensors.
    pub tokens: u64,
    /// B x ceil(S / t) under sequence parallelism, else B x S: the token
    /// count of the tensors tensor parallelism does not split.
    pub sequence_tokens: u64,
    /// Hidden size h (whole).
    pub hidden: u64,
    /// Query heads on this rank, ceil(a / t).
    pub heads: u64,
    /// Key/value heads on this rank, ceil(kv / t) (at least one: fewer
    /// heads than ranks are replicated).
    pub kv_heads: u64,
    /// Dense MLP width on this rank, ceil(f / t).
    pub intermediate: u64,
    /// One routed expert's width on this rank.
    pub expert_intermediate: u64,
    /// The shared expert's width on this rank.
    pub shared_intermediate: u64,
    /// Vocabulary on this rank (vocabulary-parallel output head).
    pub vocab: u64,
    /// Tensor-parallel degree t.
    pub tensor_parallel: u64,
}

#[cfg(test)]
impl Rank {
    /// The tiny Llama of the timeline fixtures (h 256, V 4096) on one rank.
    pub(crate) fn tiny_llama(batch: u64, seq: u64, dtype: crate::dtype::DType) -> Rank {
        let dims = Dimensions::generic(4, 256, 8, 4, 704, 4096).unwrap();
        let workload = Workload {
            dtype,
            ..Workload::new(batch, seq)
        };
        Rank::new(&dims, &workload).unwrap()
    }
}

impl Rank {
    /// The per-rank sizes of `workload` on `dims`.
    pub fn new(dims: &Dimensions, workload: &Workload) -> Result<Rank> {
        let t = positive(workload.tensor_parallel, "--tensor-parallel")?;
        positive(workload.pipeline, "--pipeline-parallel")?;
        let batch = workload.micro_batch;
        // Context parallelism gives each rank S / N positions of every
        // sequence (see `context.rs`; S is checked to divide by 2N).
        let cp = positive(workload.context_parallel, "--cp")?;
        let seq = workload.seq_len.div_ceil(cp);
        let tokens = mul(batch, seq)?;
        let sequence_tokens = if workload.sequence_parallel {
            mul(batch, seq.div_ceil(t))?
        } else {
            tokens
        };
        let (expert, shared) = match &dims.experts {
            Some(moe) => (
                moe.intermediate,
                match moe.shared {
                    SharedExpert::None => 0,
                    SharedExpert::Plain { intermediate } | SharedExpert::Gated { intermediate } => {
                        intermediate
                    }
                },
            ),
            None => (0, 0),
        };
        Ok(Rank {
            element: workload.dtype.bytes(),
            residual: super::autocast::residual_element(workload),
            projected: super::autocast::projected_element(workload),
            normed: super::autocast::normed_element(dims, workload),
            cuda_autocast: super::autocast::cuda_lists(workload),
            batch,
            seq,
            tokens,
            sequence_tokens,
            hidden: dims.hidden,
            heads: dims.heads.div_ceil(t),
            kv_heads: dims.kv_heads.div_ceil(t),
            intermediate: dims.intermediate.div_ceil(t),
            expert_intermediate: expert.div_ceil(t),
            shared_intermediate: shared.div_ceil(t),
            vocab: dims.vocab.div_ceil(t),
            tensor_parallel: t,
        })
    }
}

/// A pipeline stage's share of the model and of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// Which stage, from 0.
    pub index: u64,
    /// Micro-batches whose activations it holds at once.
    pub in_flight: u64,
    /// Its first layer.
    pub first_layer: u64,
    /// How many layers it runs.
    pub layers: u64,
    /// Whether it holds the embeddings.
    pub embeddings: bool,
    /// Whether it holds the final norm, the output head and the loss.
    pub head: bool,
}

/// The stages that can be the most loaded under 1F1B with `stages` stages
/// of ceil(`layers` / `stages`) layers and `micro_batches` micro-batches
/// per step: the first (min(p, m) micro-batches in flight, the most) and
/// the last (one, with the output head and the loss); one stage when there
/// is no pipeline. A middle stage s holds min(p - s, m), no more than the
/// first of as many layers, so it is never the heaviest.
pub fn candidate_stages(layers: u64, stages: u64, micro_batches: u64) -> Vec<Stage> {
    if stages <= 1 {
        return vec![Stage {
            index: 0,
            in_flight: 1,
            first_layer: 0,
            layers,
            embeddings: true,
            head: true,
        }];
    }
    let per_stage = layers.div_ceil(stages);
    let last_first = per_stage.saturating_mul(stages - 1).min(layers);
    vec![
        Stage {
            index: 0,
            in_flight: in_flight(stages, 0, micro_batches),
            first_layer: 0,
            layers: per_stage.min(layers),
            embeddings: true,
            head: false,
        },
        Stage {
            index: stages - 1,
            in_flight: 1,
            first_layer: last_first,
            layers: layers - last_first,
            embeddings: false,
            head: true,
        },
    ]
}

/// Micro-batches stage `stage` of `stages` holds at once under 1F1B with
/// `micro_batches` per step: min(p - s, m), at least one.
pub fn in_flight(stages: u64, stage: u64, micro_batches: u64) -> u64 {
    stages.saturating_sub(stage).min(micro_batches).max(1)
}

fn positive(value: u64, flag: &'static str) -> Result<u64> {
    if value == 0 {
        Err(Error::InvalidValue {
            what: "parallelism",
            value: format!("{flag} 0"),
            reason: "must be at least 1".to_string(),
        })
    } else {
        Ok(value)
    }
}

fn mul(a: u64, b: u64) -> Result<u64> {
    a.checked_mul(b)
        .ok_or_else(|| Error::overflow("the tokens of a micro-batch"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Attention;

    fn workload(t: u64, sequence_parallel: bool) -> Workload {
        Workload {
            attention: Attention::Eager,
            tensor_parallel: t,
            sequence_parallel,
            ..Workload::new(4, 2048)
        }
    }

    /// Megatron's GPT block as Korthikanti et al. list it (2-byte
    /// activations, 1-byte dropout masks, f = 4h), written with a rank's
    /// sizes: replicated tensors use `sequence_tokens`, split ones `tokens`
    /// and the rank's heads and width.
    fn megatron_gpt_block(rank: &Rank, head_dim: u64) -> u64 {
        let (s, b) = (rank.seq, rank.batch);
        let (n, t) = (rank.sequence_tokens, rank.tokens);
        let (h, a, f) = (rank.hidden, rank.heads, rank.intermediate);
        let attention_replicated = 2 * n * h + n * h; // QKV input, output dropout mask
        let attention_split = 2 * 2 * t * a * head_dim // Q, K
            + 2 * b * a * s * s // softmax output
            + b * a * s * s // attention dropout mask
            + 2 * b * a * s * s + 2 * t * a * head_dim // dropout output, V
            + 2 * t * a * head_dim; // output projection input
        let mlp_replicated = 2 * n * h + n * h; // fc1 input, dropout mask
        let mlp_split = 2 * t * f + 2 * t * f; // GeLU input, fc2 input
        let norms = 2 * n * h + 2 * n * h;
        attention_replicated + attention_split + mlp_replicated + mlp_split + norms
    }

    /// Table 2 of Korthikanti et al. (2022), per layer, in bytes.
    fn table_2(s: u64, b: u64, h: u64, a: u64, t: u64, sequence_parallel: bool) -> u64 {
        let sbh = s * b * h;
        let attention = 5 * a * s * s * b; // 5as/h x sbh
        if sequence_parallel {
            (34 * sbh + attention) / t
        } else {
            10 * sbh + (24 * sbh + attention) / t
        }
    }

    fn gpt_dims(hidden: u64, heads: u64) -> Dimensions {
        Dimensions::generic(24, hidden, heads, heads, 4 * hidden, 51200).unwrap()
    }

    #[test]
    fn tensor_and_sequence_parallel_division_matches_table_2() {
        let (h, a) = (4096, 32);
        let dims = gpt_dims(h, a);
        for t in [1, 2, 4, 8] {
            for sequence_parallel in [false, true] {
                let rank = Rank::new(&dims, &workload(t, sequence_parallel)).unwrap();
                assert_eq!(
                    megatron_gpt_block(&rank, h / a),
                    table_2(2048, 4, h, a, t, sequence_parallel),
                    "t = {t}, sequence parallel {sequence_parallel}"
                );
            }
        }
    }

    #[test]
    fn uneven_splits_round_up() {
        let dims = Dimensions::generic(2, 4096, 32, 8, 11008, 32003).unwrap();
        let mut uneven = workload(3, true);
        uneven.seq_len = 1000;
        let rank = Rank::new(&dims, &uneven).unwrap();
        assert_eq!(rank.heads, 11);
        assert_eq!(rank.kv_heads, 3);
        assert_eq!(rank.intermediate, 3670);
        assert_eq!(rank.vocab, 10668);
        assert_eq!(rank.sequence_tokens, 4 * 334);
        assert_eq!(rank.tokens, 4000);
        let rank = Rank::new(&dims, &workload(16, false)).unwrap();
        assert_eq!(rank.kv_heads, 1, "fewer kv heads than ranks are replicated");
    }

    #[test]
    fn first_stage_holds_p_micro_batches_of_its_layers() {
        // Table 2's pipeline rule: L/p layers x p micro-batches = L layers.
        let stages = candidate_stages(24, 4, 8);
        assert_eq!(stages[0].layers * stages[0].in_flight, 24);
        assert!(stages[0].embeddings && !stages[0].head);
        assert_eq!(
            (stages[1].index, stages[1].first_layer, stages[1].layers),
            (3, 18, 6)
        );
        assert_eq!(stages[1].in_flight, 1);
        assert!(stages[1].head);
        // Uneven: ceil(10 / 4) = 3 layers, the last stage runs what is left.
        let stages = candidate_stages(10, 4, 4);
        assert_eq!((stages[0].layers, stages[0].in_flight), (3, 4));
        assert_eq!((stages[1].first_layer, stages[1].layers), (9, 1));
        // More stages than layers: empty stages hold nothing.
        let stages = candidate_stages(2, 4, 4);
        assert_eq!((stages[0].layers, stages[1].layers), (1, 0));
        assert_eq!(candidate_stages(7, 1, 1)[0].layers, 7);
    }

    #[test]
    fn stages_hold_only_the_micro_batches_a_step_has() {
        // Megatron-core's warm-up: min(p - s - 1, m) forwards, then one more.
        for (m, first) in [(1, 1), (2, 2), (3, 3), (4, 4), (32, 4)] {
            let stages = candidate_stages(24, 4, m);
            assert_eq!(stages[0].in_flight, first, "m = {m}");
            assert_eq!(stages[1].in_flight, 1, "m = {m}");
        }
        assert_eq!(in_flight(32, 0, 4), 4);
        assert_eq!(in_flight(32, 30, 4), 2);
        assert_eq!(in_flight(32, 31, 64), 1);
        assert_eq!(in_flight(32, 0, 0), 1);
    }

    #[test]
    fn zero_degrees_are_refused() {
        let dims = gpt_dims(64, 4);
        assert!(Rank::new(&dims, &workload(0, false)).is_err());
        let mut no_stages = workload(1, false);
        no_stages.pipeline = 0;
        assert!(Rank::new(&dims, &no_stages).is_err());
    }
}
