#!/usr/bin/env python3
"""Measure exact parameter counts with HuggingFace transformers; write test fixtures.

This is the reference ("ground truth") side of trainmem's parameter counting.
For every configuration listed below it

1. writes the raw config dict to a temporary folder as ``config.json`` and
   loads it with ``transformers.AutoConfig.from_pretrained(folder)``, exactly
   as a user's downloaded checkpoint folder would be loaded (missing keys take
   the config class defaults of the installed transformers version);
2. builds ``AutoModelForCausalLM.from_config(cfg)`` (for the encoders, the
   auto class of each task: ``AutoModelForMaskedLM``,
   ``AutoModelForSequenceClassification`` and
   ``AutoModelForTokenClassification`` with ``num_labels`` set, and
   ``AutoModel``; the fixture then records ``"task"``; for the
   vision-language models, ``AutoModelForImageTextToText``) under
   ``with torch.device("meta"):`` so no memory is allocated, even for
   400B-parameter models;
3. records the total ``sum(p.numel() for p in model.parameters())`` (tied
   weights such as a tied ``lm_head`` are counted once; buffers such as rotary
   ``inv_freq`` or DeepSeek's ``e_score_correction_bias`` are NOT parameters
   and are not counted) and the tensor list of ``model.named_parameters()``
   (name and shape, in module registration order; tied tensors appear once);
4. writes ``tests/fixtures/params/<id>.json``.

The configurations are every preset in ``presets/*.json`` (id
``preset__<name>``) plus small synthetic configurations for each supported
``model_type`` (id ``<model_type>__<variant>``) that vary one thing at a time:
class defaults, tiny sizes, odd sizes, tied/untied embeddings, biases, GQA/MQA,
explicit ``head_dim``, MoE knobs, and so on.

Fixture format (2-space indented JSON, keys sorted, one tensor per line)::

    {
      "config": {...raw dict as a config.json would contain it...},
      "id": "llama__gqa",
      "model_type": "llama",
      "source": "preset llama-2-7b" | "synthetic: <what it varies>",
      "tensor_count": 291,
      "tensors": [{"name": "model.embed_tokens.weight", "shape": [32000, 4096]}, ...],
      "torch_version": "...",
      "total": 6738415616,
      "transformers_version": "..."
    }

``tensors`` is omitted when there are more than 3000 of them (``tensor_count``
is always kept).

Run from the repository root (takes well under a minute)::

    /work/venv/bin/python tools/measure_params.py

It deletes the ``*.json`` files in ``tests/fixtures/params/`` and rewrites
them all. Options: ``--only SUBSTRING`` measures (and rewrites) only the ids
containing SUBSTRING without deleting the others; ``--check`` measures
everything and compares with the existing fixtures without writing.

Needs: torch, transformers (no network access: configs are local dicts).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRESETS_DIR = REPO / "presets"
FIXTURES_DIR = REPO / "tests" / "fixtures" / "params"
MAX_LISTED_TENSORS = 3000


# ---------------------------------------------------------------------------
# Synthetic configurations
# ---------------------------------------------------------------------------
# Each entry: (variant, description, raw config dict without model_type).
# The raw dict is what a user's config.json would contain; any key left out
# takes the transformers class default.

def _llama_like(tiny: dict, *, head_dim=True, attention_bias=True, mlp_bias=False):
    """Common variants for llama-style decoders (q/k/v/o + gated MLP)."""
    v = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "class defaults with tiny size keys", dict(tiny)),
        ("odd_sizes", "non-power-of-two hidden, intermediate and vocab sizes",
         {**tiny, "hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 6,
          "intermediate_size": 250, "vocab_size": 1003}),
        ("tied", "tie_word_embeddings true",
         {**tiny, "tie_word_embeddings": True}),
        ("untied", "tie_word_embeddings false",
         {**tiny, "tie_word_embeddings": False}),
        ("gqa", "grouped-query attention: 8 query heads, 2 key/value heads",
         {**tiny, "num_attention_heads": 8, "num_key_value_heads": 2}),
        ("mqa", "multi-query attention: num_key_value_heads 1",
         {**tiny, "num_attention_heads": 8, "num_key_value_heads": 1}),
        ("deeper", "more layers (5) and a larger vocab",
         {**tiny, "num_hidden_layers": 5, "vocab_size": 5000}),
        ("kv_absent", "num_key_value_heads absent, 16 query heads (class default/fallback applies)",
         {**{k: val for k, val in tiny.items() if k != "num_key_value_heads"},
          "num_attention_heads": 16}),
    ]
    if head_dim:
        v.append(("head_dim", "explicit head_dim 24 != hidden_size / heads (64/4)",
                  {**tiny, "head_dim": 24}))
        v.append(("head_dim_gqa", "explicit head_dim 40 with GQA 8/2 and odd hidden 96",
                  {**tiny, "hidden_size": 96, "num_attention_heads": 8, "num_key_value_heads": 2,
                   "head_dim": 40}))
    if attention_bias:
        v.append(("attention_bias", "attention_bias true",
                  {**tiny, "attention_bias": True}))
    if mlp_bias:
        v.append(("mlp_bias", "mlp_bias true", {**tiny, "mlp_bias": True}))
        v.append(("both_bias", "attention_bias and mlp_bias true",
                  {**tiny, "attention_bias": True, "mlp_bias": True}))
    return v


TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
        "max_position_embeddings": 256}


def synthetic_configs() -> dict[str, list[tuple[str, str, dict]]]:
    S: dict[str, list[tuple[str, str, dict]]] = {}

    # -- gpt2 ---------------------------------------------------------------
    g = {"n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 128, "vocab_size": 1000}
    S["gpt2"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "class defaults with tiny size keys", g),
        ("odd_sizes", "non-power-of-two n_embd, n_positions and vocab",
         {"n_embd": 72, "n_head": 6, "n_layer": 3, "n_positions": 100, "vocab_size": 1003}),
        ("n_inner", "explicit n_inner 200 (default is 4 * n_embd)", {**g, "n_inner": 200}),
        ("n_inner_null", "n_inner null (4 * n_embd)", {**g, "n_inner": None}),
        ("untied", "tie_word_embeddings false: separate lm_head", {**g, "tie_word_embeddings": False}),
        ("scale_attn", "scale_attn_by_inverse_layer_idx and reorder_and_upcast_attn (no shape effect)",
         {**g, "scale_attn_by_inverse_layer_idx": True, "reorder_and_upcast_attn": True}),
        ("n_ctx_legacy", "legacy n_ctx key different from n_positions (n_positions sizes wpe)",
         {**g, "n_ctx": 512}),
        ("hf_aliases", "generic key names hidden_size/num_hidden_layers/num_attention_heads/"
         "max_position_embeddings (attribute_map aliases)",
         {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
          "max_position_embeddings": 128, "vocab_size": 1000}),
        ("cross_attention", "add_cross_attention true (adds crossattention + ln_cross_attn)",
         {**g, "add_cross_attention": True}),
        ("relu", "activation_function relu (no shape effect)", {**g, "activation_function": "relu"}),
    ]

    # -- gpt_neox -----------------------------------------------------------
    n = {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
         "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 128}
    S["gpt_neox"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "class defaults with tiny size keys", n),
        ("tiny_no_intermediate", "tiny, intermediate_size absent (class default 24576 applies)",
         {k: v for k, v in n.items() if k != "intermediate_size"}),
        ("odd_sizes", "non-power-of-two sizes",
         {**n, "hidden_size": 72, "num_attention_heads": 6, "intermediate_size": 250, "vocab_size": 1003}),
        ("sequential_residual", "use_parallel_residual false (no shape effect)",
         {**n, "use_parallel_residual": False}),
        ("rotary_pct_full", "rotary_pct 1.0 (no shape effect)", {**n, "rotary_pct": 1.0}),
        ("rotary_pct_half", "rotary_pct 0.5 and rotary_emb_base 20000 (no shape effect)",
         {**n, "rotary_pct": 0.5, "rotary_emb_base": 20000}),
        ("no_attention_bias", "attention_bias false (drops qkv/dense biases)",
         {**n, "attention_bias": False}),
        ("tied", "tie_word_embeddings true (embed_out tied to embed_in)",
         {**n, "tie_word_embeddings": True}),
        ("deeper", "5 layers", {**n, "num_hidden_layers": 5}),
        ("gelu_fast", "hidden_act gelu_fast (no shape effect)", {**n, "hidden_act": "gelu_fast"}),
    ]

    # -- llama --------------------------------------------------------------
    S["llama"] = _llama_like(TINY, mlp_bias=True) + [
        ("rope_llama3", "rope_scaling llama3 block (no shape effect)",
         {**TINY, "rope_theta": 500000.0, "rope_scaling": {
             "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
             "original_max_position_embeddings": 128, "rope_type": "llama3"}}),
        ("pretraining_tp", "pretraining_tp 2 (no shape effect)", {**TINY, "pretraining_tp": 2}),
    ]

    # -- mistral ------------------------------------------------------------
    S["mistral"] = _llama_like(TINY, attention_bias=False) + [
        ("sliding_window_null", "sliding_window null (no shape effect)", {**TINY, "sliding_window": None}),
        ("head_dim_null", "head_dim null (falls back to hidden/heads)", {**TINY, "head_dim": None}),
    ]

    # -- mixtral ------------------------------------------------------------
    mx = {**TINY, "num_local_experts": 4, "num_experts_per_tok": 2}
    S["mixtral"] = _llama_like(mx, attention_bias=False) + [
        ("tiny_default_experts", "tiny sizes, expert keys absent (8 experts, top-2 defaults)", dict(TINY)),
        ("experts_3", "num_local_experts 3", {**mx, "num_local_experts": 3}),
        ("num_experts_alias", "expert count given as num_experts (attribute_map alias) = 6",
         {k: v for k, v in mx.items() if k != "num_local_experts"} | {"num_experts": 6}),
        ("top1", "num_experts_per_tok 1 (no shape effect)", {**mx, "num_experts_per_tok": 1}),
        ("experts_16_top4", "16 experts, top-4", {**mx, "num_local_experts": 16, "num_experts_per_tok": 4}),
    ]

    # -- qwen2 --------------------------------------------------------------
    S["qwen2"] = _llama_like(TINY, attention_bias=False) + [
        ("attention_bias_false", "attention_bias false given (qwen2 q/k/v biases are hard-wired on)",
         {**TINY, "attention_bias": False}),
        ("sliding", "use_sliding_window true, max_window_layers 1 (no shape effect)",
         {**TINY, "use_sliding_window": True, "sliding_window": 64, "max_window_layers": 1}),
    ]

    # -- qwen2_moe ----------------------------------------------------------
    qm = {**TINY, "num_hidden_layers": 4, "moe_intermediate_size": 32,
          "shared_expert_intermediate_size": 96, "num_experts": 4, "num_experts_per_tok": 2}
    S["qwen2_moe"] = _llama_like(qm, head_dim=True, attention_bias=False) + [
        ("tiny_default_moe", "tiny sizes, MoE keys absent (60 experts, moe 1408, shared 5632 defaults)",
         dict(TINY)),
        ("sparse_step_2", "decoder_sparse_step 2: only odd layers (1, 3) are MoE",
         {**qm, "decoder_sparse_step": 2}),
        ("sparse_step_3", "decoder_sparse_step 3 with 4 layers: only layer 2 is MoE",
         {**qm, "decoder_sparse_step": 3}),
        ("mlp_only_layers", "mlp_only_layers [0, 3]: dense MLP in those layers",
         {**qm, "mlp_only_layers": [0, 3]}),
        ("norm_topk_prob", "norm_topk_prob true (no shape effect)", {**qm, "norm_topk_prob": True}),
        ("no_qkv_bias", "qkv_bias false", {**qm, "qkv_bias": False}),
        ("experts_8_top1", "8 experts, top-1", {**qm, "num_experts": 8, "num_experts_per_tok": 1}),
        ("shared_small", "shared_expert_intermediate_size 20 (odd)",
         {**qm, "shared_expert_intermediate_size": 20}),
        ("no_experts", "num_experts 0: every layer dense", {**qm, "num_experts": 0}),
    ]

    # -- qwen3 --------------------------------------------------------------
    S["qwen3"] = _llama_like(TINY) + [
    ]

    # -- qwen3_moe ----------------------------------------------------------
    q3 = {**TINY, "num_hidden_layers": 4, "moe_intermediate_size": 32, "num_experts": 4,
          "num_experts_per_tok": 2}
    S["qwen3_moe"] = _llama_like(q3) + [
        ("tiny_default_moe", "tiny sizes, MoE keys absent (128 experts, moe 768 defaults)", dict(TINY)),
        ("sparse_step_2", "decoder_sparse_step 2: only layers 1 and 3 are MoE",
         {**q3, "decoder_sparse_step": 2}),
        ("mlp_only_layers", "mlp_only_layers [1, 2]", {**q3, "mlp_only_layers": [1, 2]}),
        ("norm_topk_prob", "norm_topk_prob true (no shape effect)", {**q3, "norm_topk_prob": True}),
        ("experts_16_top4", "16 experts, top-4", {**q3, "num_experts": 16, "num_experts_per_tok": 4}),
        ("local_experts_key", "expert count given as num_local_experts 6",
         {k: v for k, v in q3.items() if k != "num_experts"} | {"num_local_experts": 6}),
    ]

    # -- gemma --------------------------------------------------------------
    gm = {**TINY}
    S["gemma"] = _llama_like(gm) + [
        ("gelu", "hidden_act gelu (no shape effect)", {**TINY, "hidden_act": "gelu"}),
    ]

    # -- gemma2 -------------------------------------------------------------
    S["gemma2"] = _llama_like(TINY) + [
        ("query_pre_attn_scalar", "query_pre_attn_scalar 144 and softcapping null (no shape effect)",
         {**TINY, "query_pre_attn_scalar": 144, "attn_logit_softcapping": None,
          "final_logit_softcapping": None}),
        ("sliding_window", "sliding_window 16 (no shape effect)", {**TINY, "sliding_window": 16}),
    ]

    # -- gemma3_text --------------------------------------------------------
    S["gemma3_text"] = _llama_like(TINY) + [
        ("query_pre_attn_scalar", "query_pre_attn_scalar 168 (no shape effect)",
         {**TINY, "query_pre_attn_scalar": 168}),
        ("sliding", "sliding_window 16, sliding_window_pattern 2, rope_local_base_freq (no shape effect)",
         {**TINY, "num_hidden_layers": 4, "sliding_window": 16, "sliding_window_pattern": 2,
          "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0}),
        ("layer_types", "explicit layer_types list (no shape effect)",
         {**TINY, "num_hidden_layers": 3,
          "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}),
        ("rope_linear", "rope_scaling linear factor 8 (no shape effect)",
         {**TINY, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}),
    ]

    # -- phi3 ---------------------------------------------------------------
    # Phi3Config defaults pad_token_id to 32000, which must lie inside the
    # vocabulary, so the small-vocab variants set it explicitly.
    p3 = {**TINY, "pad_token_id": 0}
    S["phi3"] = _llama_like(p3, attention_bias=False) + [
        ("sliding_window", "sliding_window 2047 and original_max_position_embeddings (no shape effect)",
         {**p3, "sliding_window": 2047, "original_max_position_embeddings": 128}),
        ("partial_rotary", "partial_rotary_factor 0.5 (no shape effect)",
         {**p3, "partial_rotary_factor": 0.5}),
        ("vocab_32064", "published vocab 32064 with default pad_token_id, tiny otherwise",
         {**TINY, "vocab_size": 32064}),
    ]

    # -- olmo2 --------------------------------------------------------------
    S["olmo2"] = _llama_like(TINY) + []

    # -- starcoder2 ---------------------------------------------------------
    S["starcoder2"] = _llama_like(TINY, attention_bias=False) + [
        ("no_bias", "use_bias false", {**TINY, "use_bias": False}),
        ("no_bias_gqa", "use_bias false with GQA 8/2",
         {**TINY, "use_bias": False, "num_attention_heads": 8, "num_key_value_heads": 2}),
        ("sliding_window", "sliding_window 4096 (no shape effect)", {**TINY, "sliding_window": 4096}),
    ]

    # -- deepseek_v3 --------------------------------------------------------
    ds = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
          "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
          "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
          "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
          "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
          "qk_nope_head_dim": 16, "v_head_dim": 16, "vocab_size": 1000,
          "max_position_embeddings": 256}
    S["deepseek_v3"] = [
        ("defaults", "class defaults, only model_type given (DeepSeek-V3 sizes)", {}),
        ("tiny", "tiny MLA + MoE: 4 layers, first 1 dense, 8 routed + 1 shared expert", ds),
        ("q_lora_null", "q_lora_rank null: plain q_proj instead of q_a/q_b", {**ds, "q_lora_rank": None}),
        ("no_shared", "n_shared_experts 0", {**ds, "n_shared_experts": 0}),
        ("shared_2", "n_shared_experts 2", {**ds, "n_shared_experts": 2}),
        ("all_moe", "first_k_dense_replace 0: every layer MoE", {**ds, "first_k_dense_replace": 0}),
        ("all_dense", "first_k_dense_replace = num_hidden_layers: every layer dense",
         {**ds, "first_k_dense_replace": 4}),
        ("moe_layer_freq_2", "moe_layer_freq 2 (ignored by transformers: still MoE from layer 1 on)",
         {**ds, "moe_layer_freq": 2}),
        ("norm_topk_false", "norm_topk_prob false, scoring/topk keys (no shape effect)",
         {**ds, "norm_topk_prob": False, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
          "routed_scaling_factor": 2.5}),
        ("mtp_layers", "num_nextn_predict_layers 2 (MTP modules are not built by transformers)",
         {**ds, "num_nextn_predict_layers": 2}),
        ("odd_dims", "odd MLA dims: rope 6, nope 10, v_head 12, kv_lora 20, q_lora 24; hidden 72",
         {**ds, "hidden_size": 72, "qk_rope_head_dim": 6, "qk_nope_head_dim": 10, "v_head_dim": 12,
          "kv_lora_rank": 20, "q_lora_rank": 24, "intermediate_size": 250, "moe_intermediate_size": 30,
          "vocab_size": 1003}),
        ("attention_bias", "attention_bias true (biases on q_a_proj, kv_a_proj_with_mqa, o_proj)",
         {**ds, "attention_bias": True}),
        ("tied", "tie_word_embeddings true", {**ds, "tie_word_embeddings": True}),
        ("experts_16_top4", "16 routed experts, top-4, 4 groups / topk_group 2",
         {**ds, "n_routed_experts": 16, "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2}),
        ("gqa_kv_heads", "num_key_value_heads 1 (no shape effect for MLA)", {**ds, "num_key_value_heads": 1}),
    ]

    # -- extra model types (fewer variants each) ----------------------------
    S["phi"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "class defaults with tiny size keys", dict(TINY)),
        ("qk_layernorm", "qk_layernorm true", {**TINY, "qk_layernorm": True}),
        ("gqa", "GQA 8/2", {**TINY, "num_attention_heads": 8, "num_key_value_heads": 2}),
        ("tied", "tie_word_embeddings true", {**TINY, "tie_word_embeddings": True}),
        ("partial_rotary", "partial_rotary_factor 0.4 (no shape effect)",
         {**TINY, "partial_rotary_factor": 0.4}),
    ]
    f = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}
    S["falcon"] = [
        ("defaults", "class defaults, only model_type given (falcon-7b-like, MQA)", {}),
        ("tiny", "tiny sizes, multi_query default", f),
        ("mha", "multi_query false", {**f, "multi_query": False}),
        ("new_arch", "new_decoder_architecture true, num_kv_heads 2",
         {**f, "new_decoder_architecture": True, "num_kv_heads": 2}),
        ("new_arch_one_ln", "new_decoder_architecture with num_ln_in_parallel_attn 1",
         {**f, "new_decoder_architecture": True, "num_kv_heads": 2, "num_ln_in_parallel_attn": 1}),
        ("bias", "bias true", {**f, "bias": True}),
        ("sequential", "parallel_attn false", {**f, "parallel_attn": False}),
        ("alibi", "alibi true", {**f, "alibi": True}),
        ("ffn_hidden", "ffn_hidden_size 200", {**f, "ffn_hidden_size": 200}),
        ("untied", "tie_word_embeddings false", {**f, "tie_word_embeddings": False}),
    ]
    S["gpt_bigcode"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes (multi_query default true)", g),
        ("mha", "multi_query false", {**g, "multi_query": False}),
        ("n_inner", "n_inner 200", {**g, "n_inner": 200}),
        ("untied", "tie_word_embeddings false", {**g, "tie_word_embeddings": False}),
    ]
    gj = {"n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 128, "vocab_size": 1000, "rotary_dim": 8}
    S["gptj"] = [
        ("defaults", "class defaults, only model_type given (GPT-J-6B sizes)", {}),
        ("tiny", "tiny sizes", gj),
        ("n_inner", "n_inner 200", {**gj, "n_inner": 200}),
        ("tied", "tie_word_embeddings true", {**gj, "tie_word_embeddings": True}),
    ]
    o = {"hidden_size": 64, "ffn_dim": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "vocab_size": 1000, "max_position_embeddings": 128, "word_embed_proj_dim": 64}
    S["opt"] = [
        ("defaults", "class defaults, only model_type given (opt-125m sizes)", {}),
        ("tiny", "tiny sizes", o),
        ("proj", "word_embed_proj_dim 32 != hidden_size (project_in/project_out)",
         {**o, "word_embed_proj_dim": 32}),
        ("post_ln", "do_layer_norm_before false (no final_layer_norm)", {**o, "do_layer_norm_before": False}),
        ("no_bias", "enable_bias false", {**o, "enable_bias": False}),
        ("no_affine", "layer_norm_elementwise_affine false", {**o, "layer_norm_elementwise_affine": False}),
        ("untied", "tie_word_embeddings false", {**o, "tie_word_embeddings": False}),
    ]
    S["olmo"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", dict(TINY)),
        ("gqa", "GQA 8/2", {**TINY, "num_attention_heads": 8, "num_key_value_heads": 2}),
        ("attention_bias", "attention_bias true", {**TINY, "attention_bias": True}),
        ("tied", "tie_word_embeddings true", {**TINY, "tie_word_embeddings": True}),
        ("clip_qkv", "clip_qkv 8 (no shape effect)", {**TINY, "clip_qkv": 8.0}),
    ]
    S["cohere"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", dict(TINY)),
        ("qk_norm", "use_qk_norm true", {**TINY, "use_qk_norm": True}),
        ("qk_norm_gqa", "use_qk_norm true with GQA 8/2",
         {**TINY, "use_qk_norm": True, "num_attention_heads": 8, "num_key_value_heads": 2}),
        ("attention_bias", "attention_bias true", {**TINY, "attention_bias": True}),
        ("untied", "tie_word_embeddings false", {**TINY, "tie_word_embeddings": False}),
    ]
    S["granite"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", dict(TINY)),
        ("gqa", "GQA 8/2", {**TINY, "num_attention_heads": 8, "num_key_value_heads": 2}),
        ("biases", "attention_bias and mlp_bias true", {**TINY, "attention_bias": True, "mlp_bias": True}),
        ("tied", "tie_word_embeddings true", {**TINY, "tie_word_embeddings": True}),
        ("multipliers", "embedding/residual/attention multipliers and logits_scaling (no shape effect)",
         {**TINY, "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
          "attention_multiplier": 0.015625, "logits_scaling": 8.0}),
    ]
    S["stablelm"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", dict(TINY)),
        ("qkv_bias", "use_qkv_bias true", {**TINY, "use_qkv_bias": True}),
        ("qk_layernorm", "qk_layernorm true (per-head layer norms)", {**TINY, "qk_layernorm": True}),
        ("parallel_residual", "use_parallel_residual true (no post_attention_layernorm)",
         {**TINY, "use_parallel_residual": True}),
        ("gqa", "GQA 8/2", {**TINY, "num_attention_heads": 8, "num_key_value_heads": 2}),
        ("tied", "tie_word_embeddings true", {**TINY, "tie_word_embeddings": True}),
    ]
    d2 = {**ds, "n_shared_experts": 2, "topk_method": "greedy", "n_group": None, "topk_group": None}
    S["deepseek_v2"] = [
        ("defaults_topk", "class defaults except num_experts_per_tok 6 (its default is null)",
         {"num_experts_per_tok": 6}),
        ("tiny", "tiny MLA + MoE, 2 shared experts", d2),
        ("lite", "q_lora_rank null (V2-Lite style)", {**d2, "q_lora_rank": None}),
        ("all_moe", "first_k_dense_replace 0", {**d2, "first_k_dense_replace": 0}),
        ("no_shared", "n_shared_experts 0", {**d2, "n_shared_experts": 0}),
        ("tied", "tie_word_embeddings true", {**d2, "tie_word_embeddings": True}),
    ]
    m = {"d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 128, "vocab_size": 1000}
    S["mpt"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", m),
        ("bias", "no_bias false (ignored by transformers: MPT linears never have biases)",
         {**m, "no_bias": False}),
        ("expansion_3", "expansion_ratio 3 (ignored by transformers: MLP is always 4 * d_model)",
         {**m, "expansion_ratio": 3}),
        ("untied", "tie_word_embeddings false", {**m, "tie_word_embeddings": False}),
    ]
    # BERT-style encoders: each variant is measured for every task (see ENCODER_TASKS).
    e = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 128}
    encoder_variants = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", e),
        ("odd_sizes", "hidden 72 over 6 heads, intermediate 250, vocab 1003, 3 layers, 77 positions",
         {**e, "hidden_size": 72, "num_attention_heads": 6, "intermediate_size": 250,
          "vocab_size": 1003, "num_hidden_layers": 3, "max_position_embeddings": 77}),
        ("type_vocab", "type_vocab_size 5 (and 1, RoBERTa's published value, in one_type)",
         {**e, "type_vocab_size": 5}),
        ("one_type", "type_vocab_size 1", {**e, "type_vocab_size": 1}),
        ("untied", "tie_word_embeddings false: the MLM decoder and its bias are their own",
         {**e, "tie_word_embeddings": False}),
        ("published_keys", "keys of old published configs trainmem ignores",
         {**e, "position_embedding_type": "absolute", "gradient_checkpointing": False,
          "classifier_dropout": 0.2, "hidden_dropout_prob": 0.0}),
    ]
    S["bert"] = encoder_variants
    S["roberta"] = [*encoder_variants,
                    ("published_positions", "RoBERTa's 514 positions and pad_token_id 1",
                     {**e, "max_position_embeddings": 514, "pad_token_id": 1})]
    v3 = {"relative_attention": True, "position_buckets": 32, "norm_rel_ebd": "layer_norm",
          "share_att_key": True, "pos_att_type": "p2c|c2p", "position_biased_input": False,
          "type_vocab_size": 0}
    S["deberta-v2"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes (absolute positions, no relative attention)", e),
        ("v3_like", "DeBERTa-v3's relative attention: buckets, shared key, layer_norm",
         {**e, **v3}),
        ("v2_like", "DeBERTa-v2-xlarge's: no buckets, own position projections, a conv layer",
         {**e, "relative_attention": True, "max_relative_positions": -1,
          "pos_att_type": ["p2c", "c2p"], "conv_kernel_size": 3, "conv_act": "gelu",
          "position_biased_input": False, "norm_rel_ebd": "layer_norm"}),
        ("c2p_only", "own key projection for c2p only, max_relative_positions 40",
         {**e, "relative_attention": True, "max_relative_positions": 40, "pos_att_type": "c2p"}),
        ("conv_groups", "conv_kernel_size 5 over 4 groups", {**e, "conv_kernel_size": 5,
                                                             "conv_groups": 4}),
        ("embedding_size", "embedding_size 32: embed_proj and a transform to 32",
         {**e, "embedding_size": 32}),
        ("embedding_size_untied", "embedding_size 32, tie_word_embeddings false",
         {**e, "embedding_size": 32, "tie_word_embeddings": False}),
        ("not_legacy", "legacy false: lm_predictions.lm_head", {**e, **v3, "legacy": False}),
        ("untied", "tie_word_embeddings false", {**e, "tie_word_embeddings": False}),
        ("type_vocab", "type_vocab_size 2", {**e, "type_vocab_size": 2}),
        ("pooler_hidden_size", "pooler_hidden_size 48", {**e, "pooler_hidden_size": 48}),
        # microsoft/deberta-v3-base's config.json
        ("v3_base", "microsoft/deberta-v3-base's published config",
         {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
          "max_position_embeddings": 512, "relative_attention": True, "position_buckets": 256,
          "norm_rel_ebd": "layer_norm", "share_att_key": True, "pos_att_type": "p2c|c2p",
          "layer_norm_eps": 1e-7, "max_relative_positions": -1, "position_biased_input": False,
          "num_attention_heads": 12, "num_hidden_layers": 12, "type_vocab_size": 0,
          "vocab_size": 128100}),
    ]
    # ModernBERT's special token ids default past a small vocabulary: set them inside it.
    m = {**e, "num_hidden_layers": 3, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
         "cls_token_id": 1, "sep_token_id": 2}
    S["modernbert"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes, 3 layers (the first without attn_norm)", m),
        ("one_layer", "a single layer: no attn_norm at all", {**m, "num_hidden_layers": 1}),
        ("biases", "attention_bias, mlp_bias, norm_bias and classifier_bias true",
         {**m, "attention_bias": True, "mlp_bias": True, "norm_bias": True,
          "classifier_bias": True}),
        ("no_decoder_bias", "decoder_bias false", {**m, "decoder_bias": False}),
        ("untied", "tie_word_embeddings false", {**m, "tie_word_embeddings": False}),
        ("odd_sizes", "hidden 72 over 6 heads, intermediate 250, vocab 1003",
         {**m, "hidden_size": 72, "num_attention_heads": 6, "intermediate_size": 250,
          "vocab_size": 1003}),
        # answerdotai/ModernBERT-base's config.json (the fields that shape parameters)
        ("base", "answerdotai/ModernBERT-base's published sizes",
         {"hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 22,
          "num_attention_heads": 12, "vocab_size": 50368, "max_position_embeddings": 8192,
          "norm_bias": False, "attention_bias": False, "mlp_bias": False,
          "classifier_bias": False, "decoder_bias": True, "global_attn_every_n_layers": 3,
          "local_attention": 128, "pad_token_id": 50283}),
    ]
    # Vision encoders: each variant is measured for every task in VISION_TASKS.
    v = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "image_size": 32, "patch_size": 8}
    S["vit"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes: a 32 px image in 8 px patches", v),
        ("odd_sizes", "hidden 72 over 6 heads, intermediate 250, 3 layers, 30 px image, 7 px patches",
         {**v, "hidden_size": 72, "num_attention_heads": 6, "intermediate_size": 250,
          "num_hidden_layers": 3, "image_size": 30, "patch_size": 7}),
        ("rectangle", "image_size [32, 48], patch_size [8, 16], 1 channel",
         {**v, "image_size": [32, 48], "patch_size": [8, 16], "num_channels": 1}),
        ("no_qkv_bias", "qkv_bias false", {**v, "qkv_bias": False}),
        ("head_dim", "head_dim 8 over 4 heads (attention width 32, not the hidden 64)",
         {**v, "head_dim": 8}),
        ("pooler_size", "pooler_output_size 48", {**v, "pooler_output_size": 48}),
        ("image_384", "image_size 384 (vit-base-patch16-384's resolution)",
         {"image_size": 384}),
        # google/vit-base-patch16-224's config.json (the fields that shape parameters)
        ("base_patch16_224", "google/vit-base-patch16-224's published sizes",
         {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
          "num_attention_heads": 12, "image_size": 224, "patch_size": 16, "num_channels": 3,
          "qkv_bias": True, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
          "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}),
    ]
    ct = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 16}
    cv = {"hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 3,
          "num_attention_heads": 4, "image_size": 32, "patch_size": 8}
    S["clip"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny towers of different widths and depths, projection_dim 24",
         {"text_config": ct, "vision_config": cv, "projection_dim": 24}),
        ("odd_sizes", "30 px image in 7 px patches, 2 channels, vocab 1003",
         {"text_config": {**ct, "vocab_size": 1003},
          "vision_config": {**cv, "image_size": 30, "patch_size": 7, "num_channels": 2},
          "projection_dim": 40}),
        ("config_dict", "old published files: text_config_dict and vision_config_dict replace "
         "text_config and vision_config",
         {"text_config": ct, "vision_config": cv, "projection_dim": 24,
          "text_config_dict": {**ct, "hidden_size": 32, "num_attention_heads": 2},
          "vision_config_dict": {**cv, "num_hidden_layers": 1}}),
        # openai/clip-vit-large-patch14-336's: the same towers at 336 px (trainmem's
        # clip-vit-large-patch14 preset with --image-size 336)
        ("vit_large_patch14_336", "openai/clip-vit-large-patch14-336's published sizes",
         {"projection_dim": 768,
          "text_config": {"hidden_size": 768, "intermediate_size": 3072,
                          "num_attention_heads": 12, "num_hidden_layers": 12,
                          "max_position_embeddings": 77, "vocab_size": 49408},
          "vision_config": {"hidden_size": 1024, "intermediate_size": 4096,
                            "num_attention_heads": 16, "num_hidden_layers": 24,
                            "image_size": 336, "patch_size": 14}}),
        # openai/clip-vit-large-patch14's config.json (the fields that shape parameters)
        ("vit_large_patch14", "openai/clip-vit-large-patch14's published sizes",
         {"projection_dim": 768, "logit_scale_init_value": 2.6592,
          "text_config": {"hidden_size": 768, "intermediate_size": 3072,
                          "num_attention_heads": 12, "num_hidden_layers": 12,
                          "max_position_embeddings": 77, "vocab_size": 49408,
                          "projection_dim": 768, "hidden_act": "quick_gelu"},
          "vision_config": {"hidden_size": 1024, "intermediate_size": 4096,
                            "num_attention_heads": 16, "num_hidden_layers": 24,
                            "image_size": 224, "patch_size": 14, "projection_dim": 768,
                            "hidden_act": "quick_gelu"}}),
    ]
    S["clip_vision_model"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "a tiny CLIPVisionModel", cv),
    ]
    S["clip_text_model"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "a tiny CLIPTextModel", ct),
    ]
    S["siglip"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny towers of different widths and depths",
         {"text_config": ct, "vision_config": cv}),
        ("projection_size", "text projection_size 40, a 30 px image in 7 px patches",
         {"text_config": {**ct, "projection_size": 40},
          "vision_config": {**cv, "image_size": 30, "patch_size": 7}}),
        ("no_head", "vision_use_head false: no attention-pooling head",
         {"text_config": ct, "vision_config": {**cv, "vision_use_head": False}}),
        # google/siglip-base-patch16-224's config.json (the fields that shape parameters)
        ("base_patch16_224", "google/siglip-base-patch16-224's published sizes",
         {"text_config": {"hidden_size": 768, "intermediate_size": 3072,
                          "num_attention_heads": 12, "num_hidden_layers": 12,
                          "vocab_size": 32000},
          "vision_config": {"num_attention_heads": 12, "num_hidden_layers": 12,
                            "patch_size": 16}}),
    ]
    S["siglip_vision_model"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "a tiny SiglipVisionModel", cv),
        ("no_head", "vision_use_head false", {**cv, "vision_use_head": False}),
    ]
    # Vision-language models (AutoModelForImageTextToText): a vision tower, a
    # projector and a language model from text_config.
    lt = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    lv = {"hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 3,
          "num_attention_heads": 4, "image_size": 32, "patch_size": 8}
    S["llava"] = [
        ("defaults", "class defaults, only model_type given (LlavaConfig's CLIP init kwargs)", {}),
        ("tiny", "tiny llama text_config and CLIP vision_config", {"text_config": lt, "vision_config": lv}),
        ("vision_empty", "vision_config {} (CLIPVisionConfig's own defaults, not LlavaConfig's)",
         {"text_config": lt, "vision_config": {}}),
        ("text_qwen2", "a qwen2 text_config (biased q/k/v)",
         {"text_config": {**lt, "model_type": "qwen2"}, "vision_config": lv}),
        ("text_mistral_untied", "a mistral text_config",
         {"text_config": {**lt, "model_type": "mistral"}, "vision_config": lv}),
        ("feature_layers", "vision_feature_layer [-2, -3]: linear_1 reads both layers",
         {"text_config": lt, "vision_config": lv, "vision_feature_layer": [-2, -3]}),
        ("no_projector_bias", "multimodal_projector_bias false",
         {"text_config": lt, "vision_config": lv, "multimodal_projector_bias": False}),
        ("tied_top", "tie_word_embeddings true at the top level",
         {"text_config": lt, "vision_config": lv, "tie_word_embeddings": True}),
        ("tied_text", "tie_word_embeddings true in text_config only",
         {"text_config": {**lt, "tie_word_embeddings": True}, "vision_config": lv}),
        # what `--image-size 224` makes of the class defaults: LlavaConfig's CLIP
        # init kwargs written out, at 224 px
        ("defaults_at_224", "LlavaConfig's CLIP init kwargs at image_size 224 (--image-size 224)",
         {"vision_config": {"intermediate_size": 4096, "hidden_size": 1024, "patch_size": 14,
                            "image_size": 224, "num_hidden_layers": 24,
                            "num_attention_heads": 16, "vocab_size": 32000,
                            "projection_dim": 768}}),
    ]
    qv = {"depth": 2, "embed_dim": 32, "hidden_size": 64, "mlp_ratio": 4, "num_heads": 4,
          "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2}
    S["qwen2_vl"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny text_config and vision_config", {"text_config": lt, "vision_config": qv}),
        ("flat", "text keys at the top level, no text_config (published files)",
         {**lt, "vision_config": qv}),
        ("odd_vision", "vision: 3 blocks, mlp_ratio 3, 3x3 merge, temporal patch 1, 1 channel",
         {"text_config": lt, "vision_config": {**qv, "depth": 3, "mlp_ratio": 3,
                                               "spatial_merge_size": 3, "temporal_patch_size": 1,
                                               "in_channels": 1}}),
        ("tied_top", "tie_word_embeddings true at the top level",
         {"text_config": lt, "vision_config": qv, "tie_word_embeddings": True}),
        ("tied_text", "tie_word_embeddings true in text_config only",
         {"text_config": {**lt, "tie_word_embeddings": True}, "vision_config": qv}),
        ("tied_flat", "tie_word_embeddings true in a flat file (Qwen2-VL-2B)",
         {**lt, "vision_config": qv, "tie_word_embeddings": True}),
        ("kv_null", "num_key_value_heads null: as many as the query heads",
         {"text_config": {**lt, "num_key_value_heads": None}, "vision_config": qv}),
    ]
    q5 = {"depth": 2, "hidden_size": 32, "intermediate_size": 72, "num_heads": 4,
          "out_hidden_size": 64, "patch_size": 4, "spatial_merge_size": 2,
          "temporal_patch_size": 2, "fullatt_block_indexes": [1]}
    S["qwen2_5_vl"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny text_config and vision_config", {"text_config": lt, "vision_config": q5}),
        ("flat", "text keys at the top level, no text_config (published files)",
         {**lt, "vision_config": q5}),
        ("odd_vision", "vision: 3 blocks, out_hidden_size 48 != text hidden, 3x3 merge, 1 channel",
         {"text_config": lt, "vision_config": {**q5, "depth": 3, "out_hidden_size": 48,
                                               "spatial_merge_size": 3, "in_channels": 1}}),
        ("tied_top", "tie_word_embeddings true at the top level",
         {"text_config": lt, "vision_config": q5, "tie_word_embeddings": True}),
        ("tied_text", "tie_word_embeddings true in text_config only",
         {"text_config": {**lt, "tie_word_embeddings": True}, "vision_config": q5}),
    ]
    gt = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000}
    S["gemma3"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny gemma3_text and SigLIP vision configs",
         {"text_config": gt, "vision_config": lv}),
        ("no_head", "vision_use_head false (the published checkpoints)",
         {"text_config": gt, "vision_config": {**lv, "vision_use_head": False}}),
        ("untied_top", "tie_word_embeddings false at the top level",
         {"text_config": gt, "vision_config": lv, "tie_word_embeddings": False}),
        ("untied_text", "tie_word_embeddings false in text_config only",
         {"text_config": {**gt, "tie_word_embeddings": False}, "vision_config": lv}),
        ("tiny_at_48", "the tiny config at image_size 48 (--image-size 48)",
         {"text_config": gt, "vision_config": {**lv, "image_size": 48}}),
    ]
    mv = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
          "num_global_layers": 1, "attention_heads": 4, "image_size": 16, "patch_size": 4,
          "max_num_tiles": 2, "vision_output_dim": 96,
          "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]]}
    mt = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
          "cross_attention_layers": [1, 3], "pad_token_id": 0}
    S["mllama"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny vision (3 aspect ratios, 2 tiles) and text (cross-attention at 1 and 3)",
         {"text_config": mt, "vision_config": mv}),
        ("one_cross", "one cross-attention layer, first; 4 tiles, 5 aspect ratios",
         {"text_config": {**mt, "cross_attention_layers": [0]},
          "vision_config": {**mv, "max_num_tiles": 4,
                            "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1], [2, 2], [1, 4]]}}),
        ("no_cross", "cross_attention_layers [] (a text-only stack)",
         {"text_config": {**mt, "cross_attention_layers": []}, "vision_config": mv}),
        ("tiny_at_32", "the tiny config at image_size 32 (--image-size 32)",
         {"text_config": mt, "vision_config": {**mv, "image_size": 32}}),
    ]
    # Encoder-decoders: each variant is measured for every task in SEQ2SEQ_TASKS.
    t5 = {"d_model": 64, "d_ff": 128, "num_layers": 2, "num_heads": 4, "d_kv": 16,
          "vocab_size": 1000}
    t5_variants = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes: 2 layers each side", t5),
        ("decoder_layers", "num_decoder_layers 3 != num_layers 2", {**t5, "num_decoder_layers": 3}),
        ("decoder_layers_null", "num_decoder_layers null (num_layers)",
         {**t5, "num_decoder_layers": None}),
        ("gated_gelu", "feed_forward_proj gated-gelu: wi_0 and wi_1", {**t5, "feed_forward_proj": "gated-gelu"}),
        ("relu", "feed_forward_proj relu: one wi", {**t5, "feed_forward_proj": "relu"}),
        ("gated_silu", "feed_forward_proj gated-silu", {**t5, "feed_forward_proj": "gated-silu"}),
        ("d_kv", "d_kv 8 over 4 heads: attention width 32, not d_model 64", {**t5, "d_kv": 8}),
        ("buckets", "relative_attention_num_buckets 16, max_distance 64",
         {**t5, "relative_attention_num_buckets": 16, "relative_attention_max_distance": 64}),
        ("untied", "tie_word_embeddings false: a checkpoint with its own lm_head, loaded with "
         "from_pretrained", {**t5, "tie_word_embeddings": False}),
        ("odd_sizes", "d_model 72, 6 heads of 12, d_ff 250, vocab 1003, 3 layers",
         {**t5, "d_model": 72, "num_heads": 6, "d_kv": 12, "d_ff": 250, "vocab_size": 1003,
          "num_layers": 3}),
        ("aliases", "attribute_map aliases hidden_size, num_attention_heads, num_hidden_layers, "
         "head_dim", {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                      "head_dim": 16, "d_ff": 128, "vocab_size": 1000}),
    ]
    S["t5"] = t5_variants + [
        # google/t5-v1_1-base's config.json (the fields that shape parameters)
        ("v1_1_base", "google/t5-v1_1-base's published sizes (gated-gelu, untied)",
         {"d_model": 768, "d_ff": 2048, "d_kv": 64, "num_heads": 12, "num_layers": 12,
          "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False, "vocab_size": 32128}),
    ]
    S["mt5"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes (gated-gelu by default)", t5),
        ("untied", "tie_word_embeddings false, as mT5 checkpoints are published",
         {**t5, "tie_word_embeddings": False}),
        ("relu", "feed_forward_proj relu", {**t5, "feed_forward_proj": "relu"}),
    ]
    S["umt5"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes: a relative position bias in every layer", t5),
        ("decoder_layers", "num_decoder_layers 3", {**t5, "num_decoder_layers": 3}),
        ("untied", "tie_word_embeddings false, as UMT5 checkpoints are published",
         {**t5, "tie_word_embeddings": False}),
    ]
    ba = {"d_model": 64, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "encoder_layers": 2,
          "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
          "vocab_size": 1000, "max_position_embeddings": 128}
    S["bart"] = [
        ("defaults", "class defaults, only model_type given (bart-large sizes)", {}),
        ("tiny", "tiny sizes", ba),
        ("asymmetric", "3 encoder layers of ffn 96 over 8 heads, 1 decoder layer of ffn 200 "
         "over 2 heads, 77 positions",
         {**ba, "encoder_layers": 3, "encoder_ffn_dim": 96, "encoder_attention_heads": 8,
          "decoder_layers": 1, "decoder_ffn_dim": 200, "decoder_attention_heads": 2,
          "max_position_embeddings": 77}),
        ("untied", "tie_word_embeddings false: embed_tokens of each stack and lm_head are their own",
         {**ba, "tie_word_embeddings": False}),
        ("aliases", "hidden_size and num_attention_heads (attribute_map aliases)",
         {k: v for k, v in ba.items() if k not in ("d_model", "encoder_attention_heads")}
         | {"hidden_size": 64, "num_attention_heads": 4}),
        ("scale_embedding", "scale_embedding true, dropouts (no shape effect)",
         {**ba, "scale_embedding": True, "dropout": 0.2, "activation_function": "relu"}),
        # facebook/bart-base's config.json (the fields that shape parameters)
        ("base", "facebook/bart-base's published sizes",
         {"d_model": 768, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072, "encoder_layers": 6,
          "decoder_layers": 6, "encoder_attention_heads": 12, "decoder_attention_heads": 12,
          "vocab_size": 50265, "max_position_embeddings": 1024}),
    ]
    # Whisper's special token ids default past a small vocabulary: set them inside it.
    wh = {"d_model": 64, "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4,
          "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 96,
          "vocab_size": 1000, "num_mel_bins": 16, "max_source_positions": 30,
          "max_target_positions": 20, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 1,
          "decoder_start_token_id": 2}
    S["whisper"] = [
        ("defaults", "class defaults, only model_type given (whisper-tiny sizes)", {}),
        ("tiny", "tiny sizes: 2 encoder and 3 decoder layers, 16 mel bins", wh),
        ("untied", "tie_word_embeddings false: proj_out of its own",
         {**wh, "tie_word_embeddings": False}),
        ("weighted_layer_sum", "use_weighted_layer_sum true, classifier_proj_size 48",
         {**wh, "use_weighted_layer_sum": True, "classifier_proj_size": 48}),
        ("aliases", "hidden_size, num_attention_heads, num_hidden_layers (attribute_map aliases)",
         {k: v for k, v in wh.items()
          if k not in ("d_model", "encoder_attention_heads", "encoder_layers")}
         | {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}),
        ("mels_128", "num_mel_bins 128 (large-v3's)", {**wh, "num_mel_bins": 128}),
    ]
    mb = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 1000, "state_size": 8}
    S["mamba"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", mb),
        ("expand_3", "expand 3, conv_kernel 3, state_size 5", {**mb, "expand": 3,
                                                               "conv_kernel": 3, "state_size": 5}),
        ("rank", "time_step_rank 7 (not auto)", {**mb, "time_step_rank": 7}),
        ("biases", "use_bias true, use_conv_bias false", {**mb, "use_bias": True,
                                                          "use_conv_bias": False}),
        ("untied", "tie_word_embeddings false", {**mb, "tie_word_embeddings": False}),
        ("odd_sizes", "hidden 72 (auto rank 5), vocab 1003, 3 layers",
         {**mb, "hidden_size": 72, "vocab_size": 1003, "num_hidden_layers": 3}),
        # state-spaces/mamba-2.8b-hf's sizes
        ("published_2_8b", "state-spaces/mamba-2.8b-hf's sizes",
         {"hidden_size": 2560, "num_hidden_layers": 64, "vocab_size": 50280, "state_size": 16,
          "expand": 2, "conv_kernel": 4, "time_step_rank": 160}),
    ]
    m2 = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 1000, "state_size": 8,
          "num_heads": 8, "head_dim": 16, "n_groups": 2}
    S["mamba2"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes: 8 heads of 16, 2 groups", m2),
        ("one_group", "n_groups 1, 4 heads of 32", {**m2, "n_groups": 1, "num_heads": 4,
                                                     "head_dim": 32}),
        ("biases", "use_bias true, use_conv_bias false", {**m2, "use_bias": True,
                                                          "use_conv_bias": False}),
        ("tied", "tie_word_embeddings true", {**m2, "tie_word_embeddings": True}),
        ("expand_3", "expand 3 (12 heads of 16), conv_kernel 3",
         {**m2, "expand": 3, "num_heads": 12, "conv_kernel": 3}),
    ]
    b = {"hidden_size": 64, "n_head": 4, "n_layer": 2, "vocab_size": 1000}
    S["bloom"] = [
        ("defaults", "class defaults, only model_type given", {}),
        ("tiny", "tiny sizes", b),
        ("deeper", "5 layers, hidden 96", {**b, "n_layer": 5, "hidden_size": 96}),
        ("untied", "tie_word_embeddings false", {**b, "tie_word_embeddings": False}),
    ]
    return S


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------

def _quiet():
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# The encoders' model_types, their default task and every task measured.
ENCODERS = {"bert", "roberta", "deberta-v2", "modernbert"}
ENCODER_TASKS = ["masked-lm", "seq-cls:3", "token-cls:5", "embedding"]
# The vision encoders and the tasks measured for each: image classification
# where transformers has a class for it, and the bare (or contrastive) model.
VISION_TASKS = {"vit": ["embedding", "seq-cls:3"], "clip": ["embedding", "seq-cls:3"],
                "siglip": ["embedding", "seq-cls:3"], "clip_vision_model": ["embedding"],
                "clip_text_model": ["embedding"], "siglip_vision_model": ["embedding"]}
# The encoder-decoders and the tasks measured for each: every auto class
# transformers has for them (BART's masked-lm is BartForConditionalGeneration).
T5_TASKS = ["seq2seq", "embedding", "seq-cls:3", "token-cls:5"]
SEQ2SEQ_TASKS = {"t5": T5_TASKS, "mt5": T5_TASKS, "umt5": T5_TASKS,
                 "bart": ["seq2seq", "embedding", "seq-cls:3", "causal-lm", "masked-lm"],
                 "whisper": ["seq2seq", "embedding", "seq-cls:3", "causal-lm"]}
# The T5 family's config classes force tie_word_embeddings to true, so
# from_config ties lm_head to shared; a published checkpoint whose file says
# false holds a different lm_head, which from_pretrained leaves untied.
T5_FAMILY = {"t5", "mt5", "umt5"}


# The vision-language models, built by AutoModelForImageTextToText for causal-lm.
VISION_LANGUAGE = {"llava", "qwen2_vl", "qwen2_5_vl", "gemma3", "mllama"}


def default_task(model_type: str) -> str:
    """trainmem's default --task: masked-lm for text encoders, embedding for
    vision encoders, seq2seq for encoder-decoders, causal-lm otherwise."""
    if model_type in SEQ2SEQ_TASKS:
        return "seq2seq"
    if model_type in VISION_TASKS:
        return "embedding"
    return "masked-lm" if model_type in ENCODERS else "causal-lm"


def auto_class(task: str, model_type: str = ""):
    """The transformers auto class of a --task value, and its num_labels.
    A vision encoder's seq-cls is AutoModelForImageClassification."""
    import transformers as t
    kind, _, labels = task.partition(":")
    classes = {"causal-lm": t.AutoModelForCausalLM, "masked-lm": t.AutoModelForMaskedLM,
               "seq-cls": t.AutoModelForSequenceClassification,
               "token-cls": t.AutoModelForTokenClassification, "embedding": t.AutoModel,
               "seq2seq": t.AutoModelForSeq2SeqLM}
    if model_type in VISION_TASKS:
        classes["seq-cls"] = t.AutoModelForImageClassification
    if model_type in VISION_LANGUAGE:
        classes["causal-lm"] = t.AutoModelForImageTextToText
    if model_type == "whisper":
        classes["seq2seq"] = t.AutoModelForSpeechSeq2Seq
        classes["seq-cls"] = t.AutoModelForAudioClassification
    return classes[kind], int(labels) if labels else None


def measure(raw: dict, task: str = "causal-lm", model_type: str = ""):
    """Load `raw` as a config.json would be loaded and count the parameters
    of the model `task`'s auto class builds (num_labels set for a classifier)."""
    import torch
    from transformers import AutoConfig

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as fh:
            json.dump(raw, fh)
        cfg = AutoConfig.from_pretrained(tmp)
    cls, labels = auto_class(task, model_type)
    if labels is not None:
        cfg.num_labels = labels
    if model_type in T5_FAMILY and raw.get("tie_word_embeddings") is False and task == "seq2seq":
        model = untied_checkpoint(raw, cls, cfg)
    else:
        with torch.device("meta"):
            model = cls.from_config(cfg)
    total = sum(p.numel() for p in model.parameters())
    tensors = [{"name": name, "shape": list(p.shape)} for name, p in model.named_parameters()]
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    return total, tensors, frozen


def untied_checkpoint(raw: dict, cls, cfg):
    """The model `from_pretrained` builds from a T5-family checkpoint that
    holds `shared.weight` and a different `lm_head.weight`, as every
    published checkpoint whose config says `tie_word_embeddings: false`
    does (the other weights are missing and initialised; bf16 keeps a
    3B model within a few GB)."""
    import torch
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as fh:
            json.dump(raw, fh)
        shape = (cfg.vocab_size, cfg.d_model)
        save_file({"shared.weight": torch.zeros(shape, dtype=torch.bfloat16),
                   "lm_head.weight": torch.ones(shape, dtype=torch.bfloat16)},
                  os.path.join(tmp, "model.safetensors"))
        return cls.from_pretrained(tmp, dtype=torch.bfloat16)


def render(doc: dict) -> str:
    """2-space indented, key-sorted JSON with one tensor per line."""
    doc = dict(doc)
    tensors = doc.pop("tensors", None)
    if tensors is not None:
        doc["tensors"] = "@@TENSORS@@"
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True)
    if tensors is not None:
        rows = ",\n".join(
            "    " + json.dumps({"name": t["name"], "shape": t["shape"]}) for t in tensors)
        text = text.replace('"@@TENSORS@@"', "[\n" + rows + "\n  ]" if rows else "[]")
    return text + "\n"


def all_cases():
    """Yield (id, model_type, source, raw, task) for every configuration.
    Encoders are measured for every task in ENCODER_TASKS, the id ending in
    the task (`bert__tiny__seq-cls-3`); presets for their default task."""
    for path in sorted(PRESETS_DIR.glob("*.json")):
        raw = json.loads(path.read_text())
        yield (f"preset__{path.stem}", raw["model_type"], f"preset {path.stem}", raw,
               default_task(raw["model_type"]))
    for model_type, variants in synthetic_configs().items():
        seen = set()
        for variant, desc, raw in variants:
            assert variant not in seen, (model_type, variant)
            seen.add(variant)
            raw = {"model_type": model_type, **raw}
            tasks = (VISION_TASKS.get(model_type) or SEQ2SEQ_TASKS.get(model_type)
                     or (ENCODER_TASKS if model_type in ENCODERS else None))
            if tasks:
                for task in tasks:
                    yield (f"{model_type}__{variant}__{task.replace(':', '-')}", model_type,
                           f"synthetic: {desc}", raw, task)
            else:
                yield (f"{model_type}__{variant}", model_type, f"synthetic: {desc}", raw,
                       "causal-lm")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="only ids containing this substring (other fixtures are kept)")
    ap.add_argument("--check", action="store_true", help="compare with existing fixtures, write nothing")
    args = ap.parse_args(argv)

    _quiet()
    import torch
    import transformers
    transformers.logging.set_verbosity_error()

    versions = {"transformers_version": transformers.__version__,
                "torch_version": torch.__version__}
    cases = [c for c in all_cases() if not args.only or args.only in c[0]]
    FIXTURES_DIR.mkdir(parents=True, exist_ok=True)
    if not args.check and not args.only:
        for old in FIXTURES_DIR.glob("*.json"):
            old.unlink()

    failures, mismatches = [], []
    start = time.time()
    for case_id, model_type, source, raw, task in cases:
        try:
            total, tensors, frozen = measure(raw, task, model_type)
        except Exception as exc:  # report and continue
            failures.append((case_id, f"{type(exc).__name__}: {exc}"))
            print(f"FAIL  {case_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        doc = {"id": case_id, "model_type": model_type, "source": source, "config": raw,
               "total": total, "tensor_count": len(tensors), **versions}
        if task != "causal-lm" or model_type in SEQ2SEQ_TASKS:
            doc["task"] = task
        if frozen:
            doc["frozen"] = frozen
        if len(tensors) <= MAX_LISTED_TENSORS:
            doc["tensors"] = tensors
        out = FIXTURES_DIR / f"{case_id}.json"
        if args.check:
            old = json.loads(out.read_text()) if out.exists() else None
            if old is None or old.get("total") != total or old.get("tensors") != doc.get("tensors"):
                mismatches.append(case_id)
                print(f"DIFF  {case_id}: {old and old.get('total')} -> {total}", file=sys.stderr)
        else:
            out.write_text(render(doc))
        print(f"{case_id:48s} {total:>20,d} {len(tensors):>6d}")

    print(f"\n{len(cases) - len(failures)} measured, {len(failures)} failed, "
          f"{len(mismatches)} differ, {time.time() - start:.1f}s "
          f"(transformers {versions['transformers_version']}, torch {versions['torch_version']})")
    return 1 if failures or mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
