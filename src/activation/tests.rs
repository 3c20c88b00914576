//! The activation formulas by hand, against the closed forms the fixtures
//! confirm.

use serde_json::json;

use super::*;
use crate::architecture::dimensions;
use crate::error::Error;

fn workload(micro_batch: u64, seq_len: u64, attention: Attention) -> Workload {
    Workload {
        attention,
        ..Workload::new(micro_batch, seq_len)
    }
}

fn layer(dims: &Dimensions, workload: &Workload) -> u64 {
    layer_bytes(dims, workload, &workload.platform.kernels(), 0)
        .unwrap()
        .0
}

/// Llama-2-7B's sizes.
fn llama_7b() -> Dimensions {
    Dimensions::generic(32, 4096, 32, 32, 11008, 32000).unwrap()
}

#[test]
fn a_llama_layer_on_cuda_with_flash_attention_by_hand() {
    // Per layer, bf16, T = B·S: two RMSNorms 2(4Th + 4T + 2Th), q/k/v's
    // input 2Th, the flash kernel's q, k, v, output 2T(2ad + 2kv·d) and
    // log-sum-exp 4BaS, the MLP's input 2Th and 4 x 2Tf.
    let dims = llama_7b();
    let (b, s) = (1, 4096);
    let (t, h, f, a, kv, d) = (b * s, 4096, 11008, 32, 32, 128);
    let expected = 2 * (4 * t * h + 4 * t + 2 * t * h)
        + 2 * t * h
        + 2 * t * (2 * a * d + 2 * kv * d)
        + 4 * b * a * s
        + 2 * t * h
        + 4 * 2 * t * f;
    assert_eq!(expected, 4096 * 186_504);
    assert_eq!(layer(&dims, &workload(b, s, Attention::Sdpa)), expected);
    assert_eq!(layer(&dims, &workload(b, s, Attention::Flash)), expected);
    // Eager: no log-sum-exp, the probabilities instead (fp32 softmax and
    // its bf16 copy, 6BaS²); o_proj saves a copy of the output, which
    // replaces the flash output it shared.
    let eager = layer(&dims, &workload(b, s, Attention::Eager));
    assert_eq!(eager, expected - 4 * b * a * s + 6 * b * a * s * s);
}

#[test]
fn the_whole_model_adds_embeddings_rotary_head_logits_and_loss() {
    let dims = llama_7b();
    let w = workload(2, 1024, Attention::Sdpa);
    let e = activations(&dims, &w).unwrap();
    let (t, s, h, v) = (2048u64, 1024u64, 4096u64, 32000u64);
    let per_layer = layer(&dims, &w);
    let outside = 8 * t + 2 * 2 * s * 128 + (4 * t * h + 4 * t + 2 * t * h) + 2 * t * h;
    assert_eq!(e.outside_layers.0, outside);
    assert_eq!(e.logits.0, 2 * t * v);
    assert_eq!(e.loss.0, 4 * t * v + 8 * t + 4);
    assert_eq!(e.total.0, 32 * per_layer + outside + 6 * t * v + 8 * t + 4);
    assert_eq!(e.backward_transient.0, 2 * 4 * t * v);
    let parts: u64 = e.layers.iter().map(|p| p.bytes.0).sum();
    assert_eq!(parts, 32 * per_layer);
    assert!(e.notes.iter().any(|n| n.contains("flash kernel")));
}

#[test]
fn selective_recompute_drops_the_probabilities_and_full_keeps_the_input() {
    let dims = llama_7b();
    let (b, s, t, h, a, d) = (1u64, 2048u64, 2048u64, 4096u64, 32u64, 128u64);
    let mut w = workload(b, s, Attention::Eager);
    let none = layer(&dims, &w);
    w.recompute = Recompute::Selective;
    let selective = layer(&dims, &w);
    // The core keeps only q, k, v (2T·a·d + 2·2T·kv·d); the o_proj input stays.
    let eager_core = 3 * 2 * t * a * d + 6 * b * a * s * s;
    assert_eq!(none - selective, eager_core - 3 * 2 * t * a * d);
    w.attention = Attention::Sdpa;
    let flash_selective = layer(&dims, &w);
    w.recompute = Recompute::None;
    assert_eq!(layer(&dims, &w) - flash_selective, 4 * b * a * s);
    w.recompute = Recompute::Full;
    assert_eq!(layer(&dims, &w), 2 * t * h);
    let e = activations(&dims, &w).unwrap();
    // The backward transient is the larger of the loss's gradients and
    // one rebuilt layer.
    w.recompute = Recompute::None;
    let rebuilt = layer(&dims, &w);
    assert_eq!(e.backward_transient.0, rebuilt.max(8 * t * 32000));
    assert!(e.layers.iter().all(|p| p.name == "layer inputs"));
}

#[test]
fn op_recompute_keeps_q_v_gate_down_and_the_kernel_output_by_hand() {
    let dims = llama_7b();
    let (b, s, t, h, f, a, kv, d) = (1u64, 2048u64, 2048u64, 4096u64, 11008u64, 32, 32, 128);
    let mut w = workload(b, s, Attention::Sdpa);
    let none = layer(&dims, &w);
    w.recompute = Recompute::Op;
    let op = layer(&dims, &w);
    // Input 2Th; q 2T·ad, v 2T·kv·d, gate 2Tf, down 2Th; sdpa output
    // 2T·ad and its fp32 log-sum-exp 4·B·a·S.
    let kept = 2 * t * h
        + 2 * t * a * d
        + 2 * t * kv * d
        + 2 * t * f
        + 2 * t * h
        + 2 * t * a * d
        + 4 * b * a * s;
    assert_eq!(op, kept);
    // Backward rebuilds the unrecomputed layer less what it shares with
    // the kept outputs (all but down's).
    let e = activations(&dims, &w).unwrap();
    let rebuilt = none - (kept - 2 * t * h - 2 * t * h);
    assert_eq!(e.backward_transient.0, rebuilt.max(8 * t * 32000));
    assert!(e.layers.iter().any(|p| p.name == "saved op outputs"));
    assert!(e.notes.iter().any(|n| n.contains("per-op policy")));
    assert_eq!(e.recompute, Recompute::Op);
}

#[test]
fn every_second_layer_checkpointed_keeps_half_the_layers_whole() {
    let dims = llama_7b();
    let mut w = workload(1, 2048, Attention::Sdpa);
    let none = layer(&dims, &w);
    w.recompute = Recompute::Full;
    let full = layer(&dims, &w);
    let all = activations(&dims, &w).unwrap();
    w.recompute_every = 2;
    let half = activations(&dims, &w).unwrap();
    // 16 of 32 layers whole; the rotary tables are saved again by the others.
    let rotary = 2 * 2 * 2048 * 128;
    assert_eq!(half.total.0, all.total.0 + 16 * (none - full) + rotary);
    assert_eq!(half.recompute_every, 2);
    assert!(half.notes.iter().any(|n| n.contains("recompute every 2")));
    assert_eq!(
        layer_bytes(&dims, &w, &w.platform.kernels(), 0).unwrap().0,
        none
    );
    assert_eq!(
        layer_bytes(&dims, &w, &w.platform.kernels(), 1).unwrap().0,
        full
    );
    // Only full checkpointing has an every-N-th-layer form.
    w.recompute = Recompute::Op;
    assert!(matches!(
        activations(&dims, &w),
        Err(Error::InvalidValue { .. })
    ));
}

#[test]
fn the_loss_modes_parse_and_refuse() {
    assert_eq!(Loss::parse("standard").unwrap(), Loss::Standard);
    assert_eq!(Loss::parse(" Chunked:8 ").unwrap(), Loss::Chunked(8));
    assert_eq!(Loss::parse("fused").unwrap(), Loss::Fused);
    assert_eq!(Loss::parse("shift-copy").unwrap(), Loss::ShiftCopy);
    assert_eq!(Loss::ShiftCopy.name(), "shift-copy");
    assert_eq!(Loss::Chunked(4).name(), "chunked:4");
    for bad in [
        "chunked:0",
        "chunked:x",
        "chunked:",
        "chunked:-1",
        "chunked:99999999",
    ] {
        assert!(
            matches!(Loss::parse(bad), Err(Error::InvalidValue { .. })),
            "{bad}"
        );
    }
    assert!(matches!(
        Loss::parse("chunked"),
        Err(Error::UnknownName {
            suggestion: Some(_),
            ..
        })
    ));
}

#[test]
fn chunked_and_fused_losses_shrink_the_loss_phase() {
    let dims = llama_7b();
    let mut w = workload(1, 4096, Attention::Sdpa);
    let standard = activations(&dims, &w).unwrap();
    w.loss = Loss::Chunked(8);
    let chunked = activations(&dims, &w).unwrap();
    let (t, v, h) = (4096u64, 32000u64, 4096u64);
    // The same log-softmax bytes (every chunk's), targets 8T instead of
    // the padded labels' 8(S + 1), eight total_weight scalars instead of
    // one; an eighth of the upcast and of the backward gradients.
    assert_eq!(chunked.total.0, standard.total.0 - 8 + 4 * 7);
    assert_eq!(chunked.schedule.logits_upcast.0, 4 * t * v / 8);
    assert_eq!(chunked.backward_transient.0, 8 * t * v / 8);
    w.loss = Loss::Fused;
    let fused = activations(&dims, &w).unwrap();
    assert_eq!(fused.logits, Bytes::ZERO);
    // No lm_head input saved: the head keeps only the final norm.
    assert_eq!(standard.schedule.head.0 - fused.schedule.head.0, 2 * t * h);
    assert_eq!(fused.loss.0, 2 * t * h + 2 * v * h + 4 * t + t);
    assert_eq!(fused.loss_function, Loss::Fused);
    // On CPU: cut-cross-entropy's compiled fallback keeps the shifted logits.
    w.platform = Platform::Cpu;
    let cpu = activations(&dims, &w).unwrap();
    assert_eq!(cpu.loss.0, 2 * (t - 1) * v + 12 * (t - 1));
    assert!(cpu.notes.iter().any(|n| n.contains("torch_compile")));
}

#[test]
fn tensor_and_sequence_parallel_divide_a_gpt2_block_like_table_2() {
    // Table 2: per layer R + D/t with tensor parallelism (R: norm
    // inputs, column-parallel inputs, hidden dropout masks; D: the rest),
    // (R + D)/t with sequence parallelism too.
    let dims = dimensions(&json!({
        "model_type": "gpt2", "n_embd": 1024, "n_head": 16, "n_layer": 4,
    }))
    .unwrap();
    let at = |t: u64, sequence_parallel: bool| {
        let mut w = workload(2, 1024, Attention::Eager);
        w.tensor_parallel = t;
        w.sequence_parallel = sequence_parallel;
        layer(&dims, &w)
    };
    let (one, two) = (at(1, false), at(2, false));
    let split = 2 * (one - two);
    let replicated = one - split;
    assert!(replicated > 0 && split > replicated);
    for t in [4, 8, 16] {
        assert_eq!(at(t, false), replicated + split / t, "t = {t}");
        assert_eq!(at(t, true), one / t, "t = {t} with sequence parallelism");
    }
}

#[test]
fn the_first_pipeline_stage_holds_p_micro_batches() {
    let dims = dimensions(&json!({
        "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
        "num_hidden_layers": 8, "intermediate_size": 512, "vocab_size": 1000,
    }))
    .unwrap();
    let mut w = workload(2, 128, Attention::Sdpa);
    let per_layer = layer(&dims, &w);
    w.pipeline = 4;
    w.micro_batches = 16;
    let e = activations(&dims, &w).unwrap();
    let layers: u64 = e.layers.iter().map(|p| p.bytes.0).sum();
    assert_eq!(layers, 4 * 2 * per_layer, "4 micro-batches of 2 layers");
    // A step of fewer micro-batches than stages holds only those.
    for m in [1, 2, 3] {
        let few = activations(
            &dims,
            &Workload {
                micro_batches: m,
                ..w.clone()
            },
        )
        .unwrap();
        let layers: u64 = few.layers.iter().map(|p| p.bytes.0).sum();
        assert_eq!(layers, m * 2 * per_layer, "{m} micro-batches of 2 layers");
    }
    assert_eq!(e.logits, Bytes::ZERO);
    assert!(e.notes.iter().any(|n| n.contains("stage 1 of 4")));
    // A huge vocabulary makes the last stage (logits, loss) the heaviest.
    let mut wide = dims.clone();
    wide.vocab = 4_000_000;
    let e = activations(&wide, &w).unwrap();
    assert!(e.logits > Bytes::ZERO);
    assert!(e.notes.iter().any(|n| n.contains("stage 4 of 4")));
}

#[test]
fn lora_adapters_keep_their_inputs_and_rank_r_outputs() {
    let dims = llama_7b();
    let (t, h, r) = (1024u64, 4096u64, 16u64);
    let mut w = workload(1, 1024, Attention::Sdpa);
    w.frozen_base = true;
    let frozen = layer(&dims, &w);
    w.adapted = vec!["q_proj".to_string(), "v_proj".to_string()];
    w.lora_rank = r;
    assert_eq!(layer(&dims, &w), frozen + 2 * t * h + 2 * 2 * t * r);
    w.adapted.push("down_proj".to_string());
    assert_eq!(
        layer(&dims, &w),
        frozen + 2 * t * h + 3 * 2 * t * r + 2 * t * 11008
    );
}

#[test]
fn cuda_masks_and_layer_norm_statistics_differ_from_cpu() {
    let dims = dimensions(&json!({
        "model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 1000,
    }))
    .unwrap();
    let mut w = workload(2, 64, Attention::Eager);
    let cuda = layer(&dims, &w);
    w.platform = Platform::Cpu;
    let cpu = layer(&dims, &w);
    let (b, s, t, h, a) = (2u64, 64u64, 128u64, 64u64, 4u64);
    // Two LayerNorms: fp32 statistics (+2 x 2 x 2T); three dropout
    // masks: 1 byte instead of 2 (-B·a·S² - 2 x T·h).
    assert_eq!(cuda + b * a * s * s + 2 * t * h, cpu + 2 * 2 * 2 * t);
}

#[test]
fn a_phi_layer_keeps_its_one_norm_output_once_for_both_blocks() {
    let dims = dimensions(&json!({
        "model_type": "phi", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 176, "num_hidden_layers": 2, "vocab_size": 1000,
    }))
    .unwrap();
    let (t, h, r) = (128u64, 64u64, 8u64);
    let mut w = workload(2, 64, Attention::Sdpa);
    w.platform = Platform::Cpu;
    // The fixture phi__base__bf16__sdpa__b2s64.
    assert_eq!(layer(&dims, &w), 342_528);
    w.frozen_base = true;
    let frozen = layer(&dims, &w);
    w.lora_rank = r;
    // An adapter on either block keeps the shared output; on both, still once.
    for adapted in [vec!["fc1"], vec!["q_proj"], vec!["q_proj", "fc1"]] {
        let adapters = adapted.len() as u64;
        w.adapted = adapted.into_iter().map(str::to_string).collect();
        assert_eq!(
            layer(&dims, &w),
            frozen + 2 * t * h + adapters * 2 * t * r,
            "{:?}",
            w.adapted
        );
    }
    let e = activations(&dims, &w).unwrap();
    assert!(e.notes.iter().any(|n| n.contains("one LayerNorm")));
}

#[test]
fn huge_sizes_overflow_instead_of_wrapping() {
    let dims = Dimensions::generic(1_000_000, 1 << 20, 1 << 10, 1 << 10, 1 << 22, 1 << 30).unwrap();
    let w = workload(1 << 20, 1 << 20, Attention::Eager);
    assert!(matches!(
        activations(&dims, &w),
        Err(Error::Overflow { .. })
    ));
}

#[test]
fn deepseek_on_cuda_uses_memory_efficient_attention() {
    let dims = dimensions(&json!({"model_type": "deepseek_v3", "num_hidden_layers": 4})).unwrap();
    let e = activations(&dims, &workload(1, 4096, Attention::Sdpa)).unwrap();
    assert!(
        e.notes.iter().any(|n| n.contains("memory-efficient")),
        "{:?}",
        e.notes
    );
    assert!(e.layers.iter().any(|p| p.name == "experts"));
}

#[test]
fn torchtitans_rms_norm_saves_less_on_cuda_and_its_fp32_normalized_tensor_on_cpu() {
    // bf16, T = B·S. transformers' LlamaRMSNorm saves 4Th + 4T + 2Th;
    // torchtitan's nn.RMSNorm on CUDA (the fused kernel) 2Th + 4T, on CPU
    // (decomposed) 4Th + 4T + 4Th: per norm -4Th on CUDA, +2Th on CPU,
    // for the two norms of each layer and the final one.
    let dims = llama_7b();
    let (t, h) = (2048u64, 4096u64);
    let norms = 2 * dims.layers + 1;
    let total = |implementation, platform| {
        let w = Workload {
            implementation,
            platform,
            ..workload(2, 1024, Attention::Sdpa)
        };
        activations(&dims, &w).unwrap().total.0
    };
    let (transformers, torchtitan) = (
        crate::architecture::Implementation::Transformers,
        crate::architecture::Implementation::Torchtitan,
    );
    assert_eq!(
        total(transformers, Platform::Cuda) - total(torchtitan, Platform::Cuda),
        norms * 4 * t * h
    );
    assert_eq!(
        total(torchtitan, Platform::Cpu) - total(transformers, Platform::Cpu),
        norms * 2 * t * h
    );
}

#[test]
fn autocast_keeps_the_residual_in_fp32_and_a_cast_per_linear() {
    // Under torch.autocast over fp32 weights (the `__amp-bf16__` CPU
    // fixtures): both RMSNorms return fp32 (4Th instead of 2Th each), and
    // q/k/v and gate/up each save their own bf16 cast of the norm's
    // output (3 and 2 copies of 2Th instead of one each): 10Th per layer.
    let dims = llama_7b();
    let (b, s, h) = (1u64, 4096u64, 4096u64);
    let t = b * s;
    let bf16 = workload(b, s, Attention::Sdpa);
    let amp = Workload {
        weights_dtype: crate::dtype::DType::Fp32,
        autocast: true,
        ..bf16.clone()
    };
    assert_eq!(layer(&dims, &amp), layer(&dims, &bf16) + 10 * t * h);
    // Full recomputation keeps the layer's fp32 input.
    let full = |w: &Workload| Workload {
        recompute: Recompute::Full,
        ..w.clone()
    };
    assert_eq!(layer(&dims, &full(&amp)), 4 * t * h);
    assert_eq!(layer(&dims, &full(&bf16)), 2 * t * h);
    // The final norm in fp32 (+2Th), and its output alive through the loss.
    let (a, p) = (
        activations(&dims, &amp).unwrap(),
        activations(&dims, &bf16).unwrap(),
    );
    assert_eq!(a.schedule.head.0, p.schedule.head.0 + 2 * t * h);
    assert_eq!(a.schedule.last_hidden_state.0, 4 * t * h);
    assert_eq!(p.schedule.last_hidden_state.0, 0);
    assert!(a.schedule.layers.iter().all(|l| !l.recast));
    let recomputed = activations(&dims, &full(&amp)).unwrap();
    assert!(recomputed.schedule.layers.iter().all(|l| l.recast));
}

#[test]
fn four_bit_linears_over_an_fp32_residual_make_the_mlp_fp32() {
    // bitsandbytes' `Linear4bit` returns `.to(inp_dtype)`: under autocast
    // over fp32 weights (peft's prepare_model_for_kbit_training, the
    // `__bnb-nf4-dq-kbit-prep` CPU fixtures) gate, act(gate), up and the
    // product are fp32, 4Tf bytes each; over a bf16 residual nothing moves.
    let dims = llama_7b();
    let (b, s) = (1u64, 4096u64);
    let (t, f) = (b * s, dims.intermediate);
    let bf16 = workload(b, s, Attention::Sdpa);
    let amp = Workload {
        weights_dtype: crate::dtype::DType::Fp32,
        autocast: true,
        ..bf16.clone()
    };
    let four_bit = |w: &Workload| Workload {
        four_bit_linears: true,
        ..w.clone()
    };
    // Fully trained here, the product is saved too: 4 tensors 2 bytes wider.
    assert_eq!(
        layer(&dims, &four_bit(&amp)),
        layer(&dims, &amp) + 4 * 2 * t * f
    );
    assert_eq!(layer(&dims, &four_bit(&bf16)), layer(&dims, &bf16));
}

#[test]
fn cuda_autocast_runs_layer_norm_pow_and_softmax_in_fp32() {
    // GPT-2 under autocast over bf16 weights, CUDA's op lists against
    // CPU's (the `gpt2__bf16__*__cuda-autocast` fixtures): each LayerNorm
    // saves an fp32 copy of its input (4Th instead of 2Th, two per layer),
    // NewGELU's pow an fp32 copy of fc's output, so tanh and 1 + tanh are
    // fp32 (6Tf more), and eager softmax's probabilities are fp32 with the
    // model's bf16 cast beside them (4X more, X = B·a·S², without
    // attention dropout; with it the cast is not saved, only the dropped).
    let dims = dimensions(&json!({
        "model_type": "gpt2", "n_embd": 1024, "n_head": 16, "n_layer": 4,
        "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
    }))
    .unwrap();
    let (b, s, h, a) = (2u64, 1024u64, 1024u64, 16u64);
    let (t, f) = (b * s, 4 * h);
    let on = |attention: Attention, ops: Platform| Workload {
        autocast: true,
        weights_dtype: crate::dtype::DType::Bf16,
        autocast_ops: Some(ops),
        ..workload(b, s, attention)
    };
    let sdpa = layer(&dims, &on(Attention::Sdpa, Platform::Cuda))
        - layer(&dims, &on(Attention::Sdpa, Platform::Cpu));
    assert_eq!(sdpa, 2 * 2 * t * h + 6 * t * f);
    let eager = layer(&dims, &on(Attention::Eager, Platform::Cuda))
        - layer(&dims, &on(Attention::Eager, Platform::Cpu));
    assert_eq!(eager, sdpa + 4 * b * a * s * s);
    // Without autocast the platform's lists do not matter.
    let plain = |ops| Workload {
        autocast_ops: Some(ops),
        ..workload(b, s, Attention::Sdpa)
    };
    assert_eq!(
        layer(&dims, &plain(Platform::Cuda)),
        layer(&dims, &plain(Platform::Cpu))
    );
}
