#!/usr/bin/env python3
"""Measure the activation memory that autograd keeps for backward; write test fixtures.

This is the reference ("ground truth") side of trainmem's activation-memory
model. For every configuration listed in ``specs()`` below it builds a small
HuggingFace causal LM with random weights (no hub access: the config is a
local dict), runs ONE training-mode forward pass with ``labels=input_ids`` and
records exactly which tensors autograd saved for the backward pass. BERT-style
encoders (``encoder_specs()``) are built with the auto class of a trainmem
``--task`` (``AutoModelForMaskedLM``, ``AutoModelForSequenceClassification``,
``AutoModelForTokenClassification``, ``num_labels`` set) and trained on that
task's labels (a copy of the ids for masked-LM, one random label per sequence or
per token for the classifiers); their fixtures record ``"task"`` and their ids
end in it (``bert__base__bf16__sdpa__b2s64__seq-cls-3``). ViT (``vision_specs()``) is
built with ``AutoModelForImageClassification`` and fed fp32 pixels ``[B, C, H, W]`` (as an
image processor returns them) with one label per image; its ``seq_len`` is the sequence
an image becomes (its patches and the CLS token). LLaVA (``vision_language_specs()``) is
built with ``AutoModelForImageTextToText``, its vision tower (and projector) frozen, and fed
token ids holding ``images`` runs of image tokens per sample, fp32 pixels
``[B * images, C, H, W]`` and the ids as labels; its ``seq_len`` is the whole text sequence.
Mamba and Mamba-2 (``mamba_specs()``, ``mamba2_specs()``) are causal LMs measured on their
torch path (no mamba-ssm / causal-conv1d kernels on CPU: ``causal_conv1d_fn`` with the
sequential ``mamba_selective_scan`` or the chunked ``mamba2_chunk_scan``); they have no
attention, and their ``attn`` is recorded as ``eager``.

Run from the repository root (about 6 minutes on 2 CPU cores, ~400 fixtures)::

    /work/venv/bin/python tools/measure_activations.py            # all fixtures
    /work/venv/bin/python tools/measure_activations.py --only llama__base
    /work/venv/bin/python tools/measure_activations.py --list     # ids only

Without ``--only`` it deletes ``tests/fixtures/activations/*.json`` and
rewrites them all; with ``--only SUBSTRING`` it (re)writes just the ids that
contain SUBSTRING and leaves the others alone.

Method
------
1. ``AutoConfig.for_model(model_type, **config)`` (keys left out take the
   class defaults of the installed transformers version), then
   ``AutoModelForCausalLM.from_config(cfg, attn_implementation=...)``, then
   ``.to(dtype)`` (fp32 or bf16: plain low-precision training, no autocast and
   no fp32 master weights) and ``.train()``. Every parameter requires grad
   (full training) unless the spec freezes some.
2. Input: random token ids ``[B, S]`` (``torch.manual_seed(seed)``), passed as
   both ``input_ids`` and ``labels``; no ``attention_mask`` (so sdpa runs with
   ``is_causal`` and no mask tensor, and GQA uses ``enable_gqa``), and
   ``use_cache=False`` as ``transformers.Trainer`` does (``TrainingArguments.
   use_cache`` defaults to False; the ``use_cache`` variants pass True, the
   config default, and report the KV-cache storages autograd did not save as
   ``cache_bytes``).
3. The forward runs inside ``torch.autograd.graph.saved_tensors_hooks(pack,
   unpack)``. ``pack`` sees every tensor an autograd node saves (including
   ``ctx.save_for_backward`` of custom Functions); it records the tensor's
   untyped storage (``data_ptr``, ``nbytes``), dtype, shape and the innermost
   module running at that moment (a module-path stack kept by forward pre/post
   hooks on every submodule). Storages that belong to parameters are excluded
   (their pointers are collected first). ``saved_bytes`` is the sum of
   ``untyped_storage().nbytes()`` over the UNIQUE remaining storages: views,
   transposes and tensors saved by several nodes count once. A storage
   counts at its full size even when only a view of it was saved (e.g. the
   value slice of a fused qkv projection keeps the whole qkv output alive).
   Storages whose saving node was freed before the forward returned (a branch
   of the graph that does not lead to the loss, e.g. DeepSeek's group-limited
   routing) are dropped (weak references; ``freed_saved_bytes``).
4. After the forward the autograd graph is walked from ``loss.grad_fn``; every
   ``_saved_*`` attribute of every node is read back, which names the op and
   the argument that saved each storage (``MmBackward0.self``,
   ``SoftmaxBackward0.result``, ...), listed in ``ops``. (Inside layers
   checkpointed with ``use_reentrant=False`` this read-back triggers the
   recomputation; it happens after ``live_bytes`` is taken and the recomputed
   tensors are new storages that are ignored.)
5. ``logits_bytes`` is the storage of the returned ``outputs.logits``;
   ``total_bytes = saved_bytes + logits_bytes`` unless the logits storage is
   already among the saved ones (``logits_already_saved``).
6. Cross-check (``live_bytes``): a ``TorchDispatchMode`` keeps a weak
   reference to the storage of every tensor produced by an op during the
   forward; ``live_bytes`` is the sum over those still alive after the forward
   (minus parameters), i.e. what the graph plus the returned outputs really
   hold. It includes things no pack hook sees: the 4-byte loss, and with
   gradient checkpointing the tensors the checkpoint keeps through Python
   references (e.g. the ``position_embeddings`` cos/sin passed as kwargs).
   ``live_bytes - total_bytes`` is recorded as ``live_minus_total`` and the
   live storages that autograd did not save are listed in ``live_not_saved``
   (shape, dtype, creating op and module).

Grouping: each storage is attributed to the module path that first saved it,
with ``layers.<i>`` written ``layers.*`` (``groups``: class, bytes, count);
a storage saved from two or more different decoder layers (rotary cos/sin) is
put in a ``shared: ...`` group instead, so that ``layers`` (per-layer totals)
is uniform. Saves made by the top-level module itself are ``loss`` (log-softmax,
targets, total_weight) or ``logits`` (e.g. final-logit softcapping).

Variants: fp32/bf16; ``eager`` / ``sdpa`` (default backend selection on CPU,
which is the flash CPU kernel ``_scaled_dot_product_flash_attention_for_cpu``
when there is no dropout) / ``sdpa-flash`` and ``sdpa-math`` (forced with
``torch.nn.attention.sdpa_kernel``); GQA/MQA; explicit ``head_dim``;
tied/untied embeddings; dropout > 0; non-reentrant gradient checkpointing;
frozen parameters; MoE experts implementation and router seeds.

Caveats
-------
* This is CPU autograd, not verified on a GPU. ``sdpa`` on a GPU picks the
  CUDA flash / memory-efficient / cuDNN kernels, whose auxiliary saved tensors
  (logsumexp layout and padding, RNG state) and output layout may differ from
  the CPU flash kernel measured here. The EFFICIENT backend does not exist on
  CPU; the CPU flash kernel refuses dropout > 0 (sdpa with attention dropout
  falls back to the math path, which upcasts bf16 to fp32 on CPU) and
  q/k head dims that differ from the v head dim (DeepSeek MLA: math path).
* CPU ``native_layer_norm`` returns mean/rstd in the input dtype (bf16: 2
  bytes per row each); CUDA keeps them in fp32.
* View versus copy decides what is kept, and it depends on strides: with
  B = 1 some reshapes need no copy, so a saved view keeps a larger parent
  storage alive (the shifted labels ``labels[..., 1:]`` keep the padded
  [1, S + 1] labels; eager attention keeps the fused qkv output of phi3 /
  gpt_neox, or DeepSeek's kv_b output, instead of a copy of v).
* Dropout on CPU (``F.dropout``) multiplies by a mask in the activation dtype
  (``MulBackward0.other``: 4 or 2 bytes per element); on CUDA ``F.dropout``
  uses ``native_dropout``, which saves a 1-byte bool mask. The
  ``dropout_native`` variants (eager attention only) patch ``F.dropout`` to
  ``torch.native_dropout`` to show the GPU-style cost.
* MoE routing is data dependent. transformers 5 defaults to the
  ``grouped_mm`` experts implementation, whose saved tensors are
  [T * top_k, ...] regardless of the routing; the ``experts_eager`` variants
  loop over experts (per-expert slices: the sum is still T * top_k rows, but
  experts that receive no token save nothing). ``tokens_per_expert`` records
  the routing per MoE layer; two seeds show the variation (the totals do not
  change with the routing in either implementation).
* The CUDA caching allocator rounds every block up to 512 bytes; these
  numbers are exact storage sizes, not allocator blocks.
* Only the forward is measured: gradients, optimizer state and the transient
  peak of the backward pass are not included.

Fixture id: ``<model_type>__<variant>__<fp32|bf16>__<attn>__b<B>s<S>[__seed<n>]``.
Fixture format (2-space JSON, keys sorted, one list entry per line)::

    {"id": "llama__base__bf16__sdpa__b2s64", "model_type": "llama",
     "variant": "base", "description": "...",
     "config": {...raw dict...},
     "dims": {"hidden_size": 64, "intermediate_size": 176, "num_attention_heads": 4,
              "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 1000,
              "num_hidden_layers": 2, "tie_word_embeddings": false, ...},
     "dtype": "bf16", "attn_implementation": "eager|sdpa|sdpa-flash|sdpa-math",
     "sdpa_backend": "flash_cpu|math|null", "batch": 2, "seq_len": 64,
     "gradient_checkpointing": false, "dropout": {"attention_dropout": 0.1, ...},
     "frozen": null | "all_but_embeddings", "experts_implementation": null | "...",
     "use_cache": false, "seed": 0,
     "saved_bytes": ..., "saved_count": ..., "freed_saved_bytes": ...,
     "logits_bytes": ..., "logits_already_saved": false,
     "loss_bytes": {"log_softmax": ..., "target": ..., "total_weight": 4},
     "total_bytes": ..., "live_bytes": ..., "live_minus_total": ...,
     "cache_bytes": ..., "live_not_saved": [...],
     "groups": [{"group": "model.layers.*.mlp", "class": "LlamaMLP", "bytes": ..., "count": ...}],
     "layers": [{"layer": 0, "bytes": ...}, ...],
     "tokens_per_expert": null | [{"module": ..., "tokens_per_expert": [...]}],
     "saved": [{"bytes": ..., "dtype": ..., "shape": [...], "module": ...,
                "module_class": ..., "ops": [...], "group": ..., "layer": 0}, ...],
     "saved_truncated": false, "notes": [...],
     "torch_version": ..., "transformers_version": ...}

``saved`` lists the unique storages in the order they were first saved;
``shape`` is that of the first tensor saved on the storage (a view may be
smaller than the storage: ``bytes`` is the storage).
``tools/check_activation_formulas.py`` reproduces every fixture's
``total_bytes``, per-layer bytes and ``live_bytes`` from closed-form formulas.

Needs: torch, transformers (CPU only, no network access).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO / "tests" / "fixtures" / "activations"
MAX_SAVED_ENTRIES = 400

# ---------------------------------------------------------------------------
# Base configurations (small, dimensions chosen so that the terms of a formula
# are distinguishable: h = 64, a = 4, d = 16, f = 176, V = 1000, S != d)
# ---------------------------------------------------------------------------
LLAMA_LIKE = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
              "max_position_embeddings": 256}

BASES: dict[str, dict] = {
    "llama": dict(LLAMA_LIKE),
    "mistral": dict(LLAMA_LIKE),
    "qwen2": dict(LLAMA_LIKE),
    "qwen3": {**LLAMA_LIKE, "head_dim": 16},            # class default head_dim is 128
    "gemma": {**LLAMA_LIKE, "head_dim": 16},            # class default head_dim is 256
    "gemma2": {**LLAMA_LIKE, "head_dim": 16},
    "gemma3_text": {**LLAMA_LIKE, "head_dim": 16},
    "phi3": {**LLAMA_LIKE, "pad_token_id": 0},          # default pad id 32000 > vocab
    "phi": dict(LLAMA_LIKE),                            # partial_rotary_factor defaults to 0.5
    "olmo2": dict(LLAMA_LIKE),
    "starcoder2": dict(LLAMA_LIKE),
    "gpt2": {"n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 256, "vocab_size": 1000,
             "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
    "gpt_neox": {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 256},
    "mixtral": {**LLAMA_LIKE, "intermediate_size": 48, "num_local_experts": 4,
                "num_experts_per_tok": 2},
    "qwen3_moe": {**LLAMA_LIKE, "head_dim": 16, "moe_intermediate_size": 48, "num_experts": 4,
                  "num_experts_per_tok": 2},
    "qwen2_moe": {**LLAMA_LIKE, "moe_intermediate_size": 48, "shared_expert_intermediate_size": 96,
                  "num_experts": 4, "num_experts_per_tok": 2},
    "deepseek_v3": {"hidden_size": 64, "intermediate_size": 176, "moe_intermediate_size": 48,
                    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4,
                    "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
                    "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
                    "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
                    "qk_nope_head_dim": 16, "v_head_dim": 16, "vocab_size": 1000,
                    "max_position_embeddings": 256},
}

# Dropout keys set to 0.1 by the "dropout" variant (those the config class knows).
DROPOUT_KEYS = {
    "gpt2": {"resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1},
    "gpt_neox": {"attention_dropout": 0.1, "hidden_dropout": 0.1},
    "phi3": {"attention_dropout": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1},
    "phi": {"attention_dropout": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1},
    "starcoder2": {"attention_dropout": 0.1, "residual_dropout": 0.1, "embedding_dropout": 0.1},
}
DEFAULT_DROPOUT = {"attention_dropout": 0.1}

MOE_TYPES = {"mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3"}


def spec(mt, variant, config, *, dtype="bf16", attn="sdpa", B=2, S=64, gc=False, frozen=None,
         seed=0, experts=None, native_dropout=False, use_cache=False, description="",
         task="causal-lm", images=0, T=None):
    sid = f"{mt}__{variant}__{dtype}__{attn}__b{B}s{S}" + (f"t{T}" if T is not None else "")
    if images:
        sid += f"i{images}"
    if seed:
        sid += f"__seed{seed}"
    if task != "causal-lm":
        sid += "__" + task.replace(":", "-")
    return dict(id=sid, model_type=mt, variant=variant, config=config, dtype=dtype, attn=attn,
                B=B, S=S, gc=gc, frozen=frozen, seed=seed, experts=experts,
                native_dropout=native_dropout, use_cache=use_cache, description=description,
                task=task, images=images, T=T)


def task_class(task: str, cfg, transformers):
    """The auto class of a trainmem --task; sets the config's num_labels."""
    kind, _, n = task.partition(":")
    classes = {"causal-lm": transformers.AutoModelForCausalLM,
               "masked-lm": transformers.AutoModelForMaskedLM,
               "seq-cls": transformers.AutoModelForSequenceClassification,
               "token-cls": transformers.AutoModelForTokenClassification,
               "seq2seq": (transformers.AutoModelForSpeechSeq2Seq if cfg.model_type == "whisper"
                           else transformers.AutoModelForSeq2SeqLM)}
    if cfg.model_type in VISION:
        classes["seq-cls"] = transformers.AutoModelForImageClassification
    if cfg.model_type in VISION_LANGUAGE:
        classes["causal-lm"] = transformers.AutoModelForImageTextToText
    if n:
        cfg.num_labels = int(n)
    return classes[kind]


def task_labels(task: str, torch, ids):
    """The labels passed to the forward: the input ids for causal-lm and
    masked-lm (every token labelled, as the logits are computed for all; a
    copy, as a data collator's labels are their own tensor),
    one label per sequence for seq-cls:N, one per token for token-cls:N."""
    kind, _, n = task.partition(":")
    if kind == "seq-cls":
        return torch.randint(0, int(n), (ids.shape[0],))
    if kind == "token-cls":
        return torch.randint(0, int(n), tuple(ids.shape))
    if kind == "masked-lm":
        return ids.clone()
    return ids


def specs() -> list[dict]:
    out: list[dict] = []
    for mt, base in BASES.items():
        # Gemma2 refuses sdpa in transformers 5 (attention logit softcapping): eager only.
        attns = ("eager",) if mt == "gemma2" else ("eager", "sdpa")
        dflt = attns[-1]

        def add(*a, _mt=mt, _d=dflt, **k):
            k.setdefault("attn", _d)
            out.append(spec(_mt, *a, **k))

        full = mt in ("llama", "gpt2")
        # -- base: both dtypes and attention implementations ------------------
        for dtype in ("fp32", "bf16"):
            for attn in attns:
                add("base", base, dtype=dtype, attn=attn, description="base config")
        # The CPU flash kernel needs equal q/k and v head dims: DeepSeek MLA (q/k 24, v 16)
        # cannot use it (default sdpa falls back to math).
        forced = () if mt == "gemma2" else ("sdpa-math",) if mt == "deepseek_v3" else ("sdpa-flash", "sdpa-math")
        for attn in forced:
            add("base", base, attn=attn, description=f"base config, sdpa backend forced ({attn})")
        if mt == "gemma2":
            add("no_softcap", {**base, "attn_logit_softcapping": None, "final_logit_softcapping": None},
                description="attn_logit_softcapping and final_logit_softcapping null")
            add("no_softcap", {**base, "attn_logit_softcapping": None, "final_logit_softcapping": None},
                dtype="fp32", description="attn_logit_softcapping and final_logit_softcapping null")
        # -- B and S scaling ---------------------------------------------------
        for B, S in ((1, 16), (3, 128)):
            for attn in attns:
                add("base", base, attn=attn, B=B, S=S, description="base config, other B and S")
                if full:
                    add("base", base, dtype="fp32", attn=attn, B=B, S=S,
                        description="base config, other B and S")
        if mt == "deepseek_v3":
            # MLA: no GQA/head_dim knobs; vary the MLA ranks instead.
            for attn in attns:
                add("q_lora_null", {**base, "q_lora_rank": None}, attn=attn,
                    description="q_lora_rank null: plain q_proj")
                add("odd_dims", {**base, "qk_rope_head_dim": 6, "qk_nope_head_dim": 10,
                                 "v_head_dim": 12, "kv_lora_rank": 20, "q_lora_rank": 24},
                    attn=attn, description="other MLA dims: rope 6, nope 10, v 12, kv_lora 20, q_lora 24")
        elif mt not in ("gpt2",):
            hk = "num_attention_heads"
            kvk = "num_key_value_heads"
            if mt != "gpt_neox":
                for kv in (2, 1):
                    for attn in attns:
                        add(f"kv{kv}", {**base, hk: 8, kvk: kv, "head_dim": 8}
                            if mt in ("qwen3", "gemma", "gemma2", "gemma3_text", "qwen3_moe")
                            else {**base, hk: 8, kvk: kv}, attn=attn,
                            description=f"GQA: 8 query heads (d = 8), {kv} kv heads")
                for attn in attns:
                    add("head_dim24", {**base, "head_dim": 24}, attn=attn,
                        description="explicit head_dim 24 (a * d = 96 != h = 64)")
                odd = {**base, "hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 2,
                       "head_dim": 20, "intermediate_size": 250, "vocab_size": 1003}
                if "moe_intermediate_size" in base:
                    odd["moe_intermediate_size"] = 40
                if mt == "mixtral":   # grouped_mm needs 16-byte strides: 250 bf16 is not
                    odd["intermediate_size"] = 200
                for attn in attns:
                    add("odd", odd, attn=attn, B=3, S=16,
                        description="odd sizes: h 72, 6 heads / 2 kv heads, head_dim 20, f 250, V 1003")
        # -- tied / untied -----------------------------------------------------
        tie_default = mt in ("gpt2", "gemma", "gemma2", "gemma3_text", "qwen2")
        add("untied" if tie_default else "tied", {**base, "tie_word_embeddings": not tie_default},
            description="tie_word_embeddings flipped from the class default")
        # -- dropout -----------------------------------------------------------
        if mt not in MOE_TYPES:
            dk = DROPOUT_KEYS.get(mt, DEFAULT_DROPOUT)
            for attn in attns:
                add("dropout", {**base, **dk}, attn=attn,
                    description=f"dropout 0.1 on {sorted(dk)} (CPU F.dropout: mask in activation dtype)")
            if mt in ("llama", "gpt2"):
                # eager only: sdpa with dropout runs the CPU math kernel, which draws its own
                # fp32 mask (not F.dropout), so patching F.dropout changes nothing there.
                for attn in ("eager",):
                    add("dropout_native", {**base, **dk}, attn=attn, native_dropout=True,
                        description="as dropout, F.dropout patched to torch.native_dropout "
                                    "(GPU-style 1-byte bool mask)")
        # -- larger vocab / deeper (linearity checks) ---------------------------
        if full or mt in ("gemma2", "gpt_neox", "mixtral", "qwen3_moe", "phi"):
            vk = "vocab_size"
            lk = "n_layer" if mt == "gpt2" else "num_hidden_layers"
            add("vocab4000", {**base, vk: 4000}, description="vocab 4000")
            add("layers4", {**base, lk: 4}, description="4 layers")
            if full:
                add("vocab4000", {**base, vk: 4000}, dtype="fp32", description="vocab 4000")
                add("layers4", {**base, lk: 4}, attn="eager", description="4 layers")
        # -- phi: q/k LayerNorms, partial rotary, one dropout at a time, GELU kernels --
        if mt == "phi":
            phi_variants(add, base)
        # -- gradient checkpointing --------------------------------------------
        if full:
            for dtype in ("fp32", "bf16"):
                for attn in attns:
                    add("gc", base, dtype=dtype, attn=attn, gc=True,
                        description="gradient_checkpointing_enable(use_reentrant=False)")
            add("gc_layers4", {**base, ("n_layer" if mt == "gpt2" else "num_hidden_layers"): 4},
                gc=True, description="gradient checkpointing, 4 layers")
        # -- use_cache=True (the config default; Trainer passes use_cache=False) --
        if full:
            add("use_cache", base, use_cache=True,
                description="use_cache=True: the forward also returns a KV cache")
            if mt == "llama":
                add("use_cache", base, attn="sdpa-math", use_cache=True,
                    description="use_cache=True with the math sdpa backend (bf16 upcast to fp32 on CPU)")
                add("kv2_use_cache", {**base, "num_attention_heads": 8, "num_key_value_heads": 2},
                    attn="eager", use_cache=True,
                    description="use_cache=True with GQA 8/2 and eager attention (repeat_kv copies)")
        # -- frozen --------------------------------------------------------------
        if mt == "llama":
            for dtype in ("fp32", "bf16"):
                for attn in attns:
                    add("frozen_but_embed", base, dtype=dtype, attn=attn, frozen="all_but_embeddings",
                        description="every parameter frozen except model.embed_tokens.weight")
        # -- MoE: seeds and experts implementation -------------------------------
        if mt in MOE_TYPES:
            add("base", base, seed=1, description="base config, second seed (other routing)")
            for seed in (0, 1):
                add("experts_eager", base, seed=seed, experts="eager",
                    description="experts_implementation eager (loop over experts)")
            add("experts_eager", base, attn="eager", experts="eager",
                description="experts_implementation eager (loop over experts)")
    out.extend(encoder_specs())
    out.extend(vision_specs())
    out.extend(vision_language_specs())
    out.extend(seq2seq_specs())
    out.extend(mamba_specs())
    out.extend(mamba2_specs())
    return out


# Mamba (MambaForCausalLM) on CPU: no mamba-ssm / causal-conv1d kernels, so
# MambaMixer.forward takes the torch fallbacks (causal_conv1d_fn,
# mamba_selective_scan's sequential loop over the S positions). It has no
# attention; ``attn`` is recorded as "eager" (the only implementation).
MAMBA_BASE = {"hidden_size": 64, "state_size": 8, "num_hidden_layers": 2, "vocab_size": 1000,
              "expand": 2, "conv_kernel": 4, "pad_token_id": 0, "bos_token_id": 0,
              "eos_token_id": 0}


# Mamba-2 (Mamba2ForCausalLM) on CPU: Mamba2Mixer.forward without the
# mamba-ssm kernels takes causal_conv1d_fn and mamba2_chunk_scan (the chunked
# SSD scan in torch); S not a multiple of chunk_size pads the last chunk.
MAMBA2_BASE = {"hidden_size": 64, "state_size": 8, "num_hidden_layers": 2, "vocab_size": 1000,
               "expand": 2, "num_heads": 8, "head_dim": 16, "n_groups": 2, "chunk_size": 16,
               "conv_kernel": 4, "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}


def mamba2_specs() -> list[dict]:
    out = []
    base = MAMBA2_BASE
    for dtype in ("fp32", "bf16"):
        out.append(spec("mamba2", "base", base, dtype=dtype, attn="eager", S=32,
                        description="tiny, two whole chunks"))
        out.append(spec("mamba2", "base", base, dtype=dtype, attn="eager", B=3, S=40,
                        description="tiny, the last chunk padded"))
        out.append(spec("mamba2", "gc", base, dtype=dtype, attn="eager", S=32, gc=True,
                        description="gradient checkpointing of every layer"))
    out.append(spec("mamba2", "base", base, dtype="bf16", attn="eager", B=1, S=24,
                    description="batch of one, padded"))
    out.append(spec("mamba2", "twisted", {**base, "n_groups": 1, "num_heads": 4, "head_dim": 32,
                                          "state_size": 16, "chunk_size": 8, "use_bias": True,
                                          "use_conv_bias": False, "residual_in_fp32": False,
                                          "tie_word_embeddings": True, "num_hidden_layers": 3},
                    dtype="bf16", attn="eager", S=20,
                    description="one group, 4 heads of 32, chunk 8, biases, no conv bias, "
                    "residual_in_fp32 false, tied, 3 layers"))
    return out


def mamba_specs() -> list[dict]:
    out = []
    base = MAMBA_BASE
    for dtype in ("fp32", "bf16"):
        out.append(spec("mamba", "base", base, dtype=dtype, attn="eager", S=32,
                        description="tiny, residual_in_fp32 (the default)"))
        out.append(spec("mamba", "base", base, dtype=dtype, attn="eager", B=3, S=20,
                        description="tiny, other B and S"))
        out.append(spec("mamba", "gc", base, dtype=dtype, attn="eager", S=32, gc=True,
                        description="gradient checkpointing of every layer"))
        out.append(spec("mamba", "residual_bf", {**base, "residual_in_fp32": False}, dtype=dtype,
                        attn="eager", S=32, description="residual_in_fp32 false"))
    out.append(spec("mamba", "base", base, dtype="bf16", attn="eager", B=1, S=48,
                    description="batch of one"))
    out.append(spec("mamba", "twisted", {**base, "hidden_size": 48, "state_size": 16,
                                         "expand": 3, "conv_kernel": 3, "time_step_rank": 5,
                                         "use_bias": True, "use_conv_bias": False,
                                         "num_hidden_layers": 3, "tie_word_embeddings": False},
                    dtype="bf16", attn="eager", S=24,
                    description="expand 3, rank 5, biases, no conv bias, untied, 3 layers"))
    out.append(spec("mamba", "twisted", {**base, "hidden_size": 48, "state_size": 16,
                                         "expand": 3, "conv_kernel": 3, "time_step_rank": 5,
                                         "use_bias": True, "use_conv_bias": False,
                                         "num_hidden_layers": 3, "tie_word_embeddings": False},
                    dtype="fp32", attn="eager", B=3, S=16,
                    description="expand 3, rank 5, biases, no conv bias, untied, 3 layers"))
    out.append(spec("mamba", "silu_gc", {**base, "residual_in_fp32": False}, dtype="bf16",
                    attn="eager", S=32, gc=True,
                    description="gradient checkpointing, residual_in_fp32 false"))
    return out


# Encoder-decoders trained as AutoModelForSeq2SeqLM: S input tokens for the
# encoder, T label tokens (the decoder reads them shifted right, as the
# model's own _shift_right / shift_tokens_right makes them), T != S so that
# each stack's share is told apart.
T5_BASE = {"d_model": 64, "d_ff": 96, "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4,
           "d_kv": 16, "vocab_size": 1000, "decoder_start_token_id": 0}
BART_BASE = {"d_model": 64, "encoder_ffn_dim": 96, "decoder_ffn_dim": 80, "encoder_layers": 2,
             "decoder_layers": 3, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
             "vocab_size": 1000, "max_position_embeddings": 128}
WHISPER_BASE = {"d_model": 64, "encoder_layers": 2, "decoder_layers": 3,
                "encoder_attention_heads": 4, "decoder_attention_heads": 4,
                "encoder_ffn_dim": 96, "decoder_ffn_dim": 80, "vocab_size": 1000,
                "num_mel_bins": 16, "max_source_positions": 32, "max_target_positions": 48,
                "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 1,
                "decoder_start_token_id": 2}
SEQ2SEQ = {"t5", "bart", "whisper"}


def seq2seq_specs() -> list[dict]:
    out = []
    t5_off = {"dropout_rate": 0.0}
    bart_off = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}
    for mt, base, off in (("t5", T5_BASE, t5_off), ("bart", BART_BASE, bart_off)):
        for dtype in ("fp32", "bf16"):
            for attn in ("eager", "sdpa"):
                out.append(spec(mt, "base", base, dtype=dtype, attn=attn, S=64, T=32,
                                task="seq2seq", description="tiny, default dropouts"))
                out.append(spec(mt, "no_dropout", {**base, **off}, dtype=dtype, attn=attn, S=64,
                                T=32, task="seq2seq", description="every dropout 0"))
        out.append(spec(mt, "base", base, dtype="bf16", attn="sdpa", B=3, S=40, T=72,
                        task="seq2seq", description="target longer than the input"))
        for attn in ("eager", "sdpa"):
            out.append(spec(mt, "gc", base, dtype="bf16", attn=attn, S=64, T=32, gc=True,
                            task="seq2seq", description="gradient checkpointing of every layer"))
        out.append(spec(mt, "untied", {**base, "tie_word_embeddings": False}, dtype="fp32",
                        attn="sdpa", S=64, T=32, task="seq2seq",
                        description="tie_word_embeddings false"))
    for dtype in ("fp32", "bf16"):
        for attn in ("eager", "sdpa"):
            out.append(spec("bart", "all_dropouts", {**BART_BASE, "attention_dropout": 0.1,
                                                     "activation_dropout": 0.1},
                            dtype=dtype, attn=attn, S=64, T=32, task="seq2seq",
                            description="attention_dropout and activation_dropout 0.1 "
                            "(facebook/bart-base's)"))
    for ff in ("gated-gelu", "gated-silu"):
        out.append(spec("t5", ff, {**T5_BASE, "feed_forward_proj": ff}, dtype="bf16", attn="sdpa",
                        S=64, T=32, task="seq2seq", description=f"feed_forward_proj {ff}"))
        out.append(spec("t5", ff, {**T5_BASE, "feed_forward_proj": ff}, dtype="fp32",
                        attn="eager", S=64, T=32, task="seq2seq",
                        description=f"feed_forward_proj {ff}"))
    out.append(spec("t5", "d_kv", {**T5_BASE, "d_kv": 8}, dtype="fp32", attn="sdpa", S=64, T=32,
                    task="seq2seq", description="d_kv 8: attention width 32, not d_model 64"))
    # Whisper: S is the encoder's positions (max_source_positions, after the
    # stride-2 convolution over 2 * S log-mel frames), T the labels.
    dropouts = {"dropout": 0.1, "attention_dropout": 0.1, "activation_dropout": 0.1}
    for dtype in ("fp32", "bf16"):
        for attn in ("eager", "sdpa"):
            out.append(spec("whisper", "base", WHISPER_BASE, dtype=dtype, attn=attn, S=32, T=24,
                            task="seq2seq", description="tiny, the class's dropouts (0)"))
            out.append(spec("whisper", "dropouts", {**WHISPER_BASE, **dropouts}, dtype=dtype,
                            attn=attn, S=32, T=24, task="seq2seq",
                            description="dropout, attention_dropout, activation_dropout 0.1"))
    out.append(spec("whisper", "base", WHISPER_BASE, dtype="bf16", attn="sdpa", B=3, S=32, T=40,
                    task="seq2seq", description="target longer than the input positions"))
    for attn in ("eager", "sdpa"):
        out.append(spec("whisper", "gc", WHISPER_BASE, dtype="bf16", attn=attn, S=32, T=24,
                        gc=True, task="seq2seq",
                        description="gradient checkpointing of every layer"))
    return out


# BERT-style encoders, measured for each task trainmem prices (masked-LM
# labels are a copy of the input ids: every token labelled, as the logits
# are computed for all; their storage is not the embedding's indices).
ENCODER_BASE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 160}
ENCODER_TASKS = ("masked-lm", "seq-cls:3", "token-cls:5")


def encoder_specs() -> list[dict]:
    out = []
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    for mt in ("bert", "roberta"):
        base = dict(ENCODER_BASE)
        for task in ENCODER_TASKS:
            for dtype in ("fp32", "bf16"):
                for attn in ("eager", "sdpa"):
                    out.append(spec(mt, "base", base, dtype=dtype, attn=attn, task=task,
                                    description="tiny encoder, default dropouts (0.1)"))
            for attn in ("eager", "sdpa"):
                out.append(spec(mt, "no_dropout", {**base, **no_dropout}, attn=attn, task=task,
                                description="hidden and attention dropout 0 (sdpa's flash kernel)"))
            out.append(spec(mt, "odd", {**base, "hidden_size": 72, "num_attention_heads": 6,
                                        "intermediate_size": 250, "vocab_size": 1003,
                                        "num_hidden_layers": 3},
                            attn="eager", B=3, S=16, task=task,
                            description="odd sizes, B 3, S 16"))
            out.append(spec(mt, "classifier_dropout0", {**base, "classifier_dropout": 0.0},
                            attn="sdpa", task=task,
                            description="classifier_dropout 0 with hidden dropout 0.1"))
        out.append(spec(mt, "base", base, attn="sdpa", B=3, S=128, task="masked-lm",
                        description="tiny encoder, longer sequences"))
        out.append(spec(mt, "gelu_new", {**base, "hidden_act": "gelu_new"}, attn="sdpa",
                        task="masked-lm", description="hidden_act gelu_new (NewGELUActivation)"))
        out.append(spec(mt, "untied", {**base, "tie_word_embeddings": False}, attn="sdpa",
                        task="masked-lm", description="tie_word_embeddings false"))
        for attn in ("eager", "sdpa"):
            out.append(spec(mt, "gc", base, attn=attn, gc=True, task="seq-cls:3",
                            description="gradient checkpointing of every layer"))
        out.append(spec(mt, "gc", base, dtype="fp32", attn="sdpa", gc=True, task="masked-lm",
                        description="gradient checkpointing of every layer"))
    return out


# Vision encoders: ViT's image classifier over pixel inputs. A spec's S is
# the sequence the image becomes (its patches + the CLS token); the pixels
# are fp32, as an image processor returns them (the patch embedding casts
# them to the model dtype).
VISION = {"vit", "clip"}
VIT_BASE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "image_size": 32, "patch_size": 8}


def vit_tokens(config: dict) -> int:
    """(image_size // patch_size) ** 2 + 1: a square image's patches and the CLS token."""
    return (config.get("image_size", 224) // config.get("patch_size", 16)) ** 2 + 1


def vision_specs() -> list[dict]:
    out = []
    base = dict(VIT_BASE)
    for dtype in ("fp32", "bf16"):
        for attn in ("eager", "sdpa"):
            out.append(spec("vit", "base", base, dtype=dtype, attn=attn, B=2,
                            S=vit_tokens(base), task="seq-cls:3",
                            description="tiny ViT image classifier, 32 px images in 8 px patches"))
    odd = {**base, "hidden_size": 72, "num_attention_heads": 6, "intermediate_size": 250,
           "num_hidden_layers": 3, "image_size": 30, "patch_size": 7, "num_channels": 1}
    out.append(spec("vit", "odd", odd, dtype="fp32", attn="eager", B=3, S=vit_tokens(odd),
                    task="seq-cls:5", description="odd sizes, 1 channel, 30 px in 7 px patches"))
    for attn in ("eager", "sdpa"):
        out.append(spec("vit", "gc", base, dtype="bf16", attn=attn, B=2, S=vit_tokens(base),
                        gc=True, task="seq-cls:3",
                        description="gradient checkpointing of every layer"))
    # CLIPForImageClassification: the vision tower (pre_layrnorm, quick_gelu) and a classifier
    # over the mean patch token; the text tower is built but not run
    clip_text = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                 "num_attention_heads": 2, "vocab_size": 100, "max_position_embeddings": 16}
    clip = {"text_config": clip_text, "vision_config": base}
    for dtype in ("fp32", "bf16"):
        for attn in ("eager", "sdpa"):
            out.append(spec("clip", "base", clip, dtype=dtype, attn=attn, B=2,
                            S=vit_tokens(base), task="seq-cls:3",
                            description="tiny CLIP vision tower, quick_gelu, 32 px in 8 px"))
    gelu = {"text_config": clip_text, "vision_config": {**odd, "hidden_act": "gelu"}}
    out.append(spec("clip", "odd_gelu", gelu, dtype="bf16", attn="eager", B=3,
                    S=vit_tokens(odd), task="seq-cls:5",
                    description="odd sizes, 1 channel, hidden_act gelu"))
    big = {**base, "image_size": 64}
    out.append(spec("vit", "image64", big, dtype="bf16", attn="sdpa", B=4, S=vit_tokens(big),
                    task="seq-cls:10", description="64 px images (65 tokens), B 4"))
    return out


# Vision-language models: LLaVA (LlavaForConditionalGeneration) with its CLIP
# vision tower frozen, as people train it. A spec's S is the whole text
# sequence, `images` images per sample among its tokens (each
# (image_size // patch_size) ** 2 image tokens, placed after the first token);
# pixels are fp32 [B * images, C, H, W]. Frozen: "vision_tower" (the projector
# and the language model train) or "vision_tower+projector" (the language
# model alone).
VISION_LANGUAGE = {"llava"}
LLAVA_TEXT = {**LLAMA_LIKE, "vocab_size": 1000}
LLAVA_VISION = {"hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 3,
                "num_attention_heads": 4, "image_size": 32, "patch_size": 8}
LLAVA = {"text_config": LLAVA_TEXT, "vision_config": LLAVA_VISION, "image_token_index": 999}


def llava_image_tokens(config: dict) -> int:
    vision = config["vision_config"]
    return (vision["image_size"] // vision["patch_size"]) ** 2


def vision_language_specs() -> list[dict]:
    out = []
    for frozen, variant in (("vision_tower", "tower_frozen"),
                            ("vision_tower+projector", "lm_only")):
        for dtype in ("fp32", "bf16"):
            for attn in ("eager", "sdpa"):
                out.append(spec("llava", variant, LLAVA, dtype=dtype, attn=attn, B=2, S=64,
                                images=1, frozen=frozen,
                                description=f"tiny LLaVA, {frozen} frozen, one 32 px image "
                                            "(16 tokens) per sample"))
        out.append(spec("llava", variant, LLAVA, dtype="bf16", attn="sdpa", B=1, S=48, images=2,
                        frozen=frozen, description=f"tiny LLaVA, {frozen} frozen, B 1 and two "
                                                   "images per sample"))
        out.append(spec("llava", variant, LLAVA, dtype="bf16", attn="sdpa", B=3, S=80, images=3,
                        frozen=frozen, description=f"tiny LLaVA, {frozen} frozen, B 3 and three "
                                                   "images per sample"))
    out.append(spec("llava", "tower_frozen", LLAVA, dtype="bf16", attn="sdpa", B=1, S=40,
                    images=1, frozen="vision_tower",
                    description="one image in the micro-batch: linear_1 saves a view of the "
                                "whole [1, 17, 48] hidden state"))
    full = {**LLAVA, "vision_feature_select_strategy": "full", "vision_feature_layer": -1}
    out.append(spec("llava", "full_last", full, dtype="bf16", attn="sdpa", B=2, S=64, images=2,
                    frozen="vision_tower", description="vision_feature_select_strategy full "
                    "(17 tokens, class token kept), the last layer's features"))
    out.append(spec("llava", "full_last", full, dtype="fp32", attn="eager", B=1, S=40, images=1,
                    frozen="vision_tower", description="strategy full, one image"))
    return out


def phi_variants(add, base: dict) -> None:
    """Phi's own knobs: one LayerNorm feeding attention and the MLP, optional
    q/k LayerNorms over each head, partial rotary (default 0.5), three dropouts."""
    qk = {**base, "qk_layernorm": True}
    for dtype in ("fp32", "bf16"):
        for attn in ("eager", "sdpa"):
            add("qk_layernorm", qk, dtype=dtype, attn=attn,
                description="qk_layernorm true: LayerNorm over each query and key head")
    add("qk_layernorm", qk, B=1, S=16, description="qk_layernorm true, other B and S")
    add("qk_layernorm_kv2", {**qk, "num_attention_heads": 8, "num_key_value_heads": 2},
        description="qk_layernorm true with GQA: 8 query heads (d = 8), 2 kv heads")
    for factor in (0.4, 1.0):
        for attn in ("eager", "sdpa"):
            add(f"rotary{factor}", {**base, "partial_rotary_factor": factor}, attn=attn,
                description=f"partial_rotary_factor {factor} (rotary width int(16 x {factor}))")
    add("rotary0.4", {**base, "partial_rotary_factor": 0.4}, dtype="fp32",
        description="partial_rotary_factor 0.4 (rotary width 6)")
    add("rope_parameters", {**base, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                        "partial_rotary_factor": 0.25}},
        description="partial_rotary_factor 0.25 given inside rope_parameters (rotary width 4)")
    for key in ("resid_pdrop", "embd_pdrop", "attention_dropout"):
        for attn in ("eager", "sdpa"):
            add(f"{key}_only", {**base, key: 0.1}, attn=attn,
                description=f"{key} 0.1 alone (CPU F.dropout: mask in activation dtype)")
    for act in ("gelu", "gelu_pytorch_tanh"):
        add(f"act_{act}", {**base, "hidden_act": act},
            description=f"hidden_act {act} (a kernel GELU instead of NewGELU in Python)")
    for dtype, attn in (("bf16", "sdpa"), ("fp32", "eager")):
        add("gc", base, dtype=dtype, attn=attn, gc=True,
            description="gradient_checkpointing_enable(use_reentrant=False)")
    add("frozen_but_embed", base, frozen="all_but_embeddings",
        description="every parameter frozen except model.embed_tokens.weight")


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
LOSS_OPS = ("LogSoftmaxBackward", "NllLossBackward", "CrossEntropy")
LAYER_RE = re.compile(r"(^|\.)(layers|h|layer|block)\.(\d+)(\.|$)")


def layer_index(path: str):
    m = LAYER_RE.search(path)
    return int(m.group(3)) if m else None


def layer_pattern(path: str) -> str:
    return LAYER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}.*{m.group(4)}", path)


def resolve_dims(cfg) -> dict:
    g = lambda *ks: next((getattr(cfg, k) for k in ks if getattr(cfg, k, None) is not None), None)  # noqa: E731
    h = g("hidden_size", "n_embd")
    a = g("num_attention_heads", "n_head")
    d = g("head_dim") or (h // a if h and a else None)
    f = g("intermediate_size", "n_inner", "ffn_dim")
    if f is None and cfg.model_type == "gpt2":
        f = 4 * h
    dims = {"hidden_size": h, "intermediate_size": f, "num_attention_heads": a,
            "num_key_value_heads": g("num_key_value_heads") or a, "head_dim": d,
            "vocab_size": g("vocab_size"), "num_hidden_layers": g("num_hidden_layers", "n_layer"),
            "tie_word_embeddings": bool(getattr(cfg, "tie_word_embeddings", False))}
    for k in ("moe_intermediate_size", "shared_expert_intermediate_size", "num_local_experts",
              "num_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
              "first_k_dense_replace", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
              "qk_nope_head_dim", "v_head_dim", "rotary_pct", "partial_rotary_factor"):
        v = getattr(cfg, k, None)
        if v is not None:
            dims[k] = v
    return dims


def dropout_settings(cfg) -> dict:
    out = {}
    for k in ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
              "residual_dropout", "embedding_dropout", "mlp_dropout"):
        v = getattr(cfg, k, None)
        if isinstance(v, (int, float)) and v:
            out[k] = v
    return out


def measure(sp: dict, torch, transformers) -> dict:
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import AutoConfig

    torch.manual_seed(sp["seed"])
    raw = {"model_type": sp["model_type"], **sp["config"]}
    cfg = AutoConfig.for_model(sp["model_type"], **sp["config"])
    attn = sp["attn"]
    kwargs = {"attn_implementation": "sdpa" if attn.startswith("sdpa") else attn}
    if sp["experts"]:
        kwargs["experts_implementation"] = sp["experts"]
    auto = task_class(sp["task"], cfg, transformers)
    model = auto.from_config(cfg, **kwargs)
    model.to(getattr(torch, DTYPES[sp["dtype"]])).train()
    if sp["gc"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if sp["frozen"] == "all_but_embeddings":
        emb = model.get_input_embeddings().weight
        for p in model.parameters():
            p.requires_grad_(p is emb)
    elif sp["frozen"] in ("vision_tower", "vision_tower+projector"):
        frozen_parts = ["vision_tower"] + (["multi_modal_projector"] if "projector" in sp["frozen"]
                                          else [])
        for part in frozen_parts:
            for p in getattr(model.model, part).parameters():
                p.requires_grad_(False)

    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    param_ptrs |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    classes = {name: type(mod).__name__ for name, mod in model.named_modules()}

    # -- module-path stack --------------------------------------------------------
    stack = [""]
    handles = []

    def pre(name):
        def hook(mod, args):
            stack.append(name)
        return hook

    def post(name):
        def hook(mod, args, output):
            if stack and stack[-1] == name:
                stack.pop()
        return hook

    for name, mod in model.named_modules():
        if name:
            handles.append(mod.register_forward_pre_hook(pre(name)))
            handles.append(mod.register_forward_hook(post(name), always_call=True))

    # -- MoE routing: capture top_k_index given to the experts modules ------------
    routing = []
    for name, mod in model.named_modules():
        if type(mod).__name__.endswith("Experts"):
            def rhook(mod, args, kw, output, name=name):
                idx = kw.get("top_k_index", args[1] if len(args) > 1 else None)
                if isinstance(idx, torch.Tensor):
                    n = getattr(mod, "num_experts", None) or int(idx.max()) + 1
                    counts = torch.bincount(idx.reshape(-1).long(), minlength=n)[:n]
                    routing.append({"module": name, "tokens_per_expert": counts.tolist()})
            handles.append(mod.register_forward_hook(rhook, with_kwargs=True))

    # -- pack hook ------------------------------------------------------------------
    saved: dict[int, dict] = {}
    order: list[int] = []
    dead: list[dict] = []  # saved by nodes that were freed before the forward ended

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr in param_ptrs or st.nbytes() == 0 and t.numel() == 0:
            return t
        e = saved.get(ptr)
        if e is None or e["ref"].expired():  # new storage (or a freed one's address reused)
            if e is not None:
                dead.append(e)
                order.remove(ptr)
            e = saved[ptr] = {"bytes": st.nbytes(), "dtype": str(t.dtype).replace("torch.", ""),
                              "shape": list(t.shape), "module": stack[-1], "savers": set(),
                              "ref": StorageWeakRef(st)}
            order.append(ptr)
        e["savers"].add(stack[-1])
        return t

    # -- live-storage tracker (cross-check) ---------------------------------------
    live: dict[int, tuple] = {}

    class Tracker(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            res = func(*args, **(kwargs or {}))
            for r in torch.utils._pytree.tree_leaves(res):
                if isinstance(r, torch.Tensor) and r.device.type != "meta":
                    try:
                        st = r.untyped_storage()
                    except Exception:
                        continue
                    ptr = st.data_ptr()
                    old = live.get(ptr)
                    if old is None or old[0].expired():
                        live[ptr] = (StorageWeakRef(st), st.nbytes(), str(r.dtype).replace("torch.", ""),
                                     list(r.shape), stack[-1], func.__name__)
            return res

    if sp["model_type"] in VISION:
        vision = getattr(cfg, "vision_config", cfg)
        side = vision.image_size
        ids = torch.randn(sp["B"], vision.num_channels, side, side)
        labels = torch.randint(0, cfg.num_labels, (sp["B"],))
    elif sp["model_type"] in VISION_LANGUAGE:
        vision = cfg.vision_config
        side = vision.image_size
        per_image = (side // vision.patch_size) ** 2 + (
            1 if cfg.vision_feature_select_strategy == "full" else 0)
        ids = torch.randint(0, cfg.image_token_index, (sp["B"], sp["S"]))
        ids[:, 1:1 + sp["images"] * per_image] = cfg.image_token_index
        labels = ids
        pixels = torch.randn(sp["B"] * sp["images"], vision.num_channels, side, side)
    elif sp["model_type"] == "whisper":
        # log-mel frames as the feature extractor returns them, cast to the
        # model's dtype as a training collator does (conv1 refuses a mix).
        ids = torch.randn(sp["B"], cfg.num_mel_bins, 2 * sp["S"]).to(
            getattr(torch, DTYPES[sp["dtype"]]))
        labels = torch.randint(0, cfg.vocab_size, (sp["B"], sp["T"]))
    elif sp["task"] == "seq2seq":
        ids = torch.randint(0, cfg.vocab_size, (sp["B"], sp["S"]))
        labels = torch.randint(0, cfg.vocab_size, (sp["B"], sp["T"]))
    else:
        ids = torch.randint(0, cfg.vocab_size, (sp["B"], sp["S"]))
        labels = task_labels(sp["task"], torch, ids)
    backend_ctx = None
    if attn == "sdpa-flash":
        backend_ctx = sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    elif attn == "sdpa-math":
        backend_ctx = sdpa_kernel([SDPBackend.MATH])

    orig_dropout = torch.nn.functional.dropout
    if sp["native_dropout"]:
        def native(input, p=0.5, training=True, inplace=False):
            return torch.native_dropout(input, p, training)[0] if training and p > 0 else input
        torch.nn.functional.dropout = native
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            if backend_ctx is not None:
                backend_ctx.__enter__()
            try:
                with Tracker():
                    if sp["model_type"] in VISION:
                        out = model(pixel_values=ids, labels=labels)
                    elif sp["model_type"] in VISION_LANGUAGE:
                        out = model(input_ids=ids, pixel_values=pixels, labels=labels)
                    elif sp["model_type"] == "whisper":
                        out = model(input_features=ids, labels=labels, use_cache=sp["use_cache"])
                    elif sp["task"] in ("causal-lm", "seq2seq"):
                        out = model(input_ids=ids, labels=labels, use_cache=sp["use_cache"])
                    else:
                        out = model(input_ids=ids, labels=labels)
            finally:
                if backend_ctx is not None:
                    backend_ctx.__exit__(None, None, None)
    finally:
        torch.nn.functional.dropout = orig_dropout
        for h in handles:
            h.remove()

    # -- drop storages whose saving node died with a discarded branch of the graph ---
    # (e.g. DeepSeek's group-limited routing: topk/scatter on a tensor that requires
    # grad, used only for indices): autograd does not keep them.
    gc.collect()
    for ptr in list(order):
        if saved[ptr]["ref"].expired():
            dead.append(saved.pop(ptr))
            order.remove(ptr)
    dead_bytes = sum(e["bytes"] for e in dead)

    # The input ids were created outside the forward (not tracked) but the embedding saves them.
    ids_ptr = ids.untyped_storage().data_ptr()
    live_bytes = saved[ids_ptr]["bytes"] if ids_ptr in saved else 0
    unsaved_live = []
    for ptr, (w, nb, dt, shape, mod, fname) in live.items():
        if w.expired() or ptr in param_ptrs or ptr == ids_ptr:
            continue
        live_bytes += nb
        if ptr not in saved and ptr != out.logits.untyped_storage().data_ptr():
            unsaved_live.append({"bytes": nb, "dtype": dt, "shape": shape, "module": mod,
                                 "op": fname})

    # -- name the saving ops by walking the graph -----------------------------------
    # (With non-reentrant checkpointing, reading a saved tensor of a node inside a
    # checkpointed layer triggers its recomputation; the recomputed tensors are new
    # storages, dropped right away, and this happens after live_bytes is taken.)
    ops: dict[int, set] = {}
    seen, todo = set(), [out.loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        nname = type(node).__name__
        attrs = [a for a in dir(node) if a.startswith("_saved_")]
        vals = []
        for a in attrs:
            try:
                vals.append((a[7:], getattr(node, a)))
            except Exception:
                pass
        if hasattr(node, "saved_tensors"):  # custom autograd.Function
            try:
                vals.append(("saved_tensors", node.saved_tensors))
            except Exception:
                pass
        for a, v in vals:
            for x in (v if isinstance(v, (tuple, list)) else [v]):
                if isinstance(x, torch.Tensor):
                    try:
                        ops.setdefault(x.untyped_storage().data_ptr(), set()).add(f"{nname}.{a}")
                    except Exception:
                        pass
        for nf, _ in node.next_functions:
            todo.append(nf)

    # -- attribute and group --------------------------------------------------------
    entries = []
    for ptr in order:
        e = saved[ptr]
        o = sorted(ops.get(ptr, ()))
        if not o and sp["gc"] and layer_index(e["module"]) is not None:
            o = ["_NoopSaveInputs (checkpointed layer input)"]
        savers = e["savers"]
        layers_seen = {layer_index(s) for s in savers} - {None}
        mod = e["module"]
        if len(layers_seen) >= 2:
            group = "shared: " + ", ".join(sorted({layer_pattern(s) for s in savers}))
            gclass = "(shared)"
        elif mod == "":
            is_loss = any(op.startswith(LOSS_OPS) for op in o)
            group = "loss" if is_loss else "logits"
            gclass = classes[""]
        else:
            group = layer_pattern(mod)
            gclass = classes.get(mod, "?")
        entries.append({"bytes": e["bytes"], "dtype": e["dtype"], "shape": e["shape"],
                        "module": mod, "module_class": classes.get(mod, "?"), "ops": o,
                        "group": group, "group_class": gclass,
                        "layer": layer_index(mod) if len(layers_seen) < 2 else None})

    groups: dict[tuple, dict] = {}
    layers: dict[int, int] = {}
    for en in entries:
        k = (en["group"], en["group_class"])
        g = groups.setdefault(k, {"group": k[0], "class": k[1], "bytes": 0, "count": 0})
        g["bytes"] += en["bytes"]
        g["count"] += 1
        if en["layer"] is not None:
            layers[en["layer"]] = layers.get(en["layer"], 0) + en["bytes"]

    saved_bytes = sum(e["bytes"] for e in entries)
    lst = out.logits.untyped_storage()
    logits_saved = lst.data_ptr() in saved
    logits_bytes = lst.nbytes()
    loss_bytes: dict[str, int] = {}
    for en in entries:
        if en["group"] == "loss":
            o = en["ops"]
            key = ("log_softmax" if any(x.startswith("LogSoftmaxBackward") for x in o)
                   else "target" if any(x.endswith(".target") for x in o)
                   else "total_weight" if any(x.endswith(".total_weight") for x in o)
                   else "other")
            loss_bytes[key] = loss_bytes.get(key, 0) + en["bytes"]
    total = saved_bytes + (0 if logits_saved else logits_bytes)

    all_ops = set().union(*ops.values()) if ops else set()
    if any("FlashAttentionForCpu" in x for x in all_ops):
        backend = "flash_cpu"
    elif any("EfficientAttention" in x for x in all_ops):
        backend = "efficient"
    elif attn.startswith("sdpa"):
        backend = "math"
    else:
        backend = None

    # KV cache returned with use_cache=True: storages it holds that autograd did not save.
    cache_bytes = 0
    cache = getattr(out, "past_key_values", None)
    if sp["use_cache"] and cache is not None:
        seen_c = set()
        for lay in getattr(cache, "layers", []):
            for t in (getattr(lay, "keys", None), getattr(lay, "values", None)):
                if isinstance(t, torch.Tensor) and t.numel():
                    st = t.untyped_storage()
                    if st.data_ptr() not in saved and st.data_ptr() not in seen_c:
                        seen_c.add(st.data_ptr())
                        cache_bytes += st.nbytes()

    notes = []
    if sp["use_cache"]:
        notes.append("use_cache=True: the returned DynamicCache keeps K and V of every layer; "
                     "cache_bytes counts its storages that autograd did not save (in live_bytes)")
    if sp["model_type"] in MOE_TYPES or routing:
        notes.append(f"experts_implementation={getattr(model.config, '_experts_implementation', None)}")
    if backend:
        notes.append(f"sdpa backend on CPU: {backend}")
    if sp["gc"]:
        notes.append("non-reentrant checkpointing: the layer inputs are saved through "
                     "_NoopSaveInputs (seen by pack); kwargs such as position_embeddings are held "
                     "by Python references (only in live_bytes)")
    if sp["native_dropout"]:
        notes.append("F.dropout patched to torch.native_dropout (bool mask, as F.dropout on CUDA)")
    elif dropout_settings(model.config):
        notes.append("CPU F.dropout saves a mask in the activation dtype (MulBackward0.other); "
                     "CUDA saves a 1-byte bool mask (NativeDropoutBackward0)")

    entries_sorted = entries
    truncated = False
    if len(entries) > MAX_SAVED_ENTRIES:
        truncated = True
        keep = sorted(range(len(entries)), key=lambda i: -entries[i]["bytes"])[:MAX_SAVED_ENTRIES]
        entries_sorted = [entries[i] for i in sorted(keep)]
    for en in entries_sorted:
        en.pop("group_class", None)

    return {
        "id": sp["id"],
        "model_type": sp["model_type"],
        **({"task": sp["task"]} if sp["task"] != "causal-lm" else {}),
        "variant": sp["variant"],
        "description": sp["description"],
        "config": raw,
        "dims": resolve_dims(getattr(model.config, "text_config", None)
                             if sp["model_type"] in VISION_LANGUAGE else model.config),
        **({"images": sp["images"]} if sp["images"] else {}),
        "dtype": sp["dtype"],
        "attn_implementation": attn,
        "sdpa_backend": backend,
        "batch": sp["B"],
        "seq_len": sp["S"],
        **({"target_len": sp["T"]} if sp["T"] is not None else {}),
        "gradient_checkpointing": sp["gc"],
        "dropout": {**dropout_settings(model.config),
                    **({"mask": "native_dropout (bool)"} if sp["native_dropout"] else {})},
        "frozen": sp["frozen"],
        "experts_implementation": (getattr(model.config, "_experts_implementation", None)
                                   if sp["model_type"] in MOE_TYPES else None),
        "seed": sp["seed"],
        "saved_bytes": saved_bytes,
        "saved_count": len(entries),
        "freed_saved_bytes": dead_bytes,
        "logits_bytes": logits_bytes,
        "logits_already_saved": logits_saved,
        "loss_bytes": loss_bytes,
        "total_bytes": total,
        "live_bytes": live_bytes,
        "use_cache": sp["use_cache"],
        "cache_bytes": cache_bytes,
        "live_minus_total": live_bytes - total,
        "live_not_saved": unsaved_live,
        "groups": sorted(groups.values(), key=lambda g: (g["group"], g["class"])),
        "layers": [{"layer": i, "bytes": layers[i]} for i in sorted(layers)],
        "tokens_per_expert": routing or None,
        "saved": entries_sorted,
        "saved_truncated": truncated,
        "notes": notes,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }


def dump(fx: dict) -> str:
    """2-space JSON, keys sorted, one ``saved``/``groups``/``layers`` entry per line."""
    compact = {k: fx[k] for k in ("saved", "groups", "layers", "tokens_per_expert",
                                  "live_not_saved")}
    body = {k: ("@@" + k) if k in compact and isinstance(fx[k], list) else v
            for k, v in fx.items()}
    text = json.dumps(body, indent=2, sort_keys=True)
    for k, v in compact.items():
        if not isinstance(v, list):
            continue
        lines = ",\n".join("    " + json.dumps(x, sort_keys=True) for x in v)
        text = text.replace(f'"@@{k}"', "[\n" + lines + "\n  ]" if v else "[]")
    return text + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="measure only the ids containing this substring")
    ap.add_argument("--list", action="store_true", help="print the ids and exit")
    args = ap.parse_args()

    all_specs = specs()
    ids = [s["id"] for s in all_specs]
    assert len(ids) == len(set(ids)), "duplicate fixture ids"
    todo = [s for s in all_specs if not args.only or args.only in s["id"]]
    if args.list:
        print("\n".join(s["id"] for s in todo))
        return 0

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

    FIXTURES_DIR.mkdir(parents=True, exist_ok=True)
    if not args.only:
        for p in FIXTURES_DIR.glob("*.json"):
            p.unlink()
    t0 = time.time()
    failed = []
    for i, sp in enumerate(todo, 1):
        t = time.time()
        try:
            fx = measure(sp, torch, transformers)
        except Exception as e:  # keep going; report at the end
            failed.append((sp["id"], f"{type(e).__name__}: {e}"))
            print(f"[{i}/{len(todo)}] {sp['id']}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        (FIXTURES_DIR / f"{sp['id']}.json").write_text(dump(fx))
        print(f"[{i}/{len(todo)}] {sp['id']}: total {fx['total_bytes']} "
              f"(saved {fx['saved_bytes']}, live-total {fx['live_minus_total']}) "
              f"{time.time() - t:.1f}s", flush=True)
    print(f"{len(todo) - len(failed)} fixtures written in {time.time() - t0:.0f}s; "
          f"{len(failed)} failed", flush=True)
    for sid, err in failed:
        print(f"  FAILED {sid}: {err}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
