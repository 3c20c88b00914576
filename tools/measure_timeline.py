#!/usr/bin/env python3
"""Measure the CPU memory timeline of real training steps; write test fixtures.

This is the reference side of trainmem's step timeline (``--platform cpu``):
the sequence of allocations and frees of one training step, whose maximum is
the peak. For every configuration in ``specs()`` it builds a small HuggingFace
causal LM (or, in ``encoder_specs()``, a BERT-style encoder built with the auto
class of a trainmem ``--task`` and trained on that task's labels, the fixture
naming ``--task`` in ``trainmem_flags``; the forward phase ends when the module
returning the logits, the masked-LM decoder or the classifier, returns; a ViT image
classifier, ``vit-tiny``, and CLIP's, ``clip-b32-l4``, are fed fp32 pixels; Mamba and Mamba-2,
``mamba-tiny`` and ``mamba2-tiny``, run their torch path) with random weights (no hub: the config is a local dict, exactly as
``measure_activations.py`` does), trains it on CPU and records every
allocation and free that goes through torch's CPU allocator during one step.

Run from the repository root (a few minutes on 2 cores; every fixture runs
in its own child process, see "Why a process per fixture")::

    /tmp/venv/bin/python tools/measure_timeline.py              # all fixtures
    /tmp/venv/bin/python tools/measure_timeline.py --only llama__fp32
    /tmp/venv/bin/python tools/measure_timeline.py --list       # ids only
    /tmp/venv/bin/python tools/measure_timeline.py --summary    # table of the fixtures

Without ``--only`` it deletes ``tests/fixtures/timeline/*.json`` and rewrites
them all; with ``--only SUBSTRING`` it (re)writes the ids containing it.
Specs marked ``"gap": True`` (steps trainmem does not yet predict within 3%)
are written to ``tests/fixtures/timeline-gaps/`` instead.

The step
--------
Exactly what ``transformers.Trainer`` runs per optimizer step (no gradient
accumulation, no autocast, no grad clipping)::

    outputs = model(input_ids=ids, labels=ids)   # use_cache=False, model.train()
    loss = outputs.loss; del outputs             # the logits die here
    loss.backward(); del loss
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

Model: ``AutoConfig.for_model(model_type, **config)``, ``use_cache=False``,
``AutoModelForCausalLM.from_config(cfg, attn_implementation=...)``,
``.to(dtype)`` (fp32, or pure bf16: weights, gradients and optimizer states
all bf16 except Adam's fp32 ``step`` scalars; ``amp-bf16``: fp32, the
forward wrapped as accelerate's ``prepare_model`` wraps it for HF Trainer's
``bf16=True``, see ``autocast_specs``), ``.train()``; ``recompute
full`` is ``gradient_checkpointing_enable(gradient_checkpointing_kwargs=
{"use_reentrant": False})``. The loss is the model's own (``labels=ids``, the
Trainer path): ``ForCausalLMLoss`` upcasts the logits with ``.float()`` (a
copy in bf16, a no-op in fp32), pads and shifts the labels and calls
``cross_entropy`` (log_softmax + nll_loss). Input: random ids ``[B, S]``, no
attention mask. ``torch.set_num_threads(1)`` (``threads``; the ``__t2`` ids
use 2): CPU kernels size some internal buffers by the thread count (the
flash-attention CPU kernel allocates ``[threads, q_block, ...]`` scratch);
the step peak does not move with it in the fixtures measured.

Steps 1 and 2 are warm-up (Adam creates its states lazily in the first
``step()``); step 3 is the measured one (profiler and marks only); step 4 is
identical but also runs the cross-check tracker and the labelling hooks (see
below); its profiler peak is recorded (``labelled_step_peak_bytes``): equal
to step 3's, or 8 bytes more when the peak is in the optimizer (one scalar
that lives a little longer under the dispatch mode).

Memory events (the API)
-----------------------
``torch.profiler.profile(activities=[ProfilerActivity.CPU],
profile_memory=True)`` around the step; then
``prof.profiler.kineto_results.experimental_event_tree()`` gives the event
tree. Allocator events are the nodes named ``[memory]`` whose
``extra_fields`` (``_ExtraFields_Allocation``) carry ``ptr``, ``alloc_size``
(+bytes for an allocation, -bytes for a free), ``allocation_id`` (the same on
an allocation and its free) and ``total_allocated``; their ``parent`` chain
names the op, the autograd node and our ranges that allocated them; all
nodes have ``start_time_ns``/``end_time_ns`` on one clock. (The flat
``kineto_results.events()`` list has the same ``[memory]`` events with
``nbytes()`` and ``start_ns()`` but no pointer, so frees cannot be matched to
allocations there; ``prof.events()``' ``cpu_memory_usage`` is per op, not a
stream.) The events come from c10's ``ProfiledCPUMemoryReporter``: every
allocation and free of the default CPU allocator while memory profiling is
on, including buffers allocated inside kernels with ``at::empty`` (oneDNN's
own scratchpads and malloc inside third-party libraries are not seen).
The reporter only reports the free of a block whose allocation it saw while
profiling, and keeps a table of live blocks across profiling sessions; hence
one fresh process per fixture and a profiler session that spans exactly one
step: the first session of a process has an empty table, and nothing that
existed before step 3 is freed during it (parameters and states are updated
in place; checked: ``end_bytes`` of the step equals the live tensors after it,
``end_live_bytes``). Second check (``allocator_counter_check``): each event
also carries the reporter's own running counter ``total_allocated``; it
equals the cumulative sum of ``alloc_size`` in our time order at every event
with offset 0 (``mismatches`` 0): the order is right and the session started
with an empty table.

Running total = ``baseline_bytes`` + the cumulative sum of ``alloc_size`` in
time order. ``baseline_bytes`` = the bytes of every live CPU tensor at the
start of step 3: the sum over UNIQUE untyped storages of all ``torch.Tensor``
objects that ``gc.get_objects()`` reaches (parameters, buffers such as rotary
``inv_freq``, optimizer states, the input ids; gradients are None after
``zero_grad(set_to_none=True)``); ``baseline`` breaks it down and
``baseline_other_bytes`` is what the gc scan finds beyond parameters, buffers,
states and ids (0 so far). ``end_bytes`` (running total after zero_grad) is
checked against the same gc scan after the step (``end_live_bytes``).

Phases and marks: ``record_function`` ranges ``phase:forward`` (from the
model call until ``lm_head`` returns: a forward hook on ``lm_head`` closes it),
``phase:loss`` (the rest of the model call, i.e. the loss inside the HF
forward, plus ``del outputs``), ``phase:backward`` (``loss.backward(); del
loss``), ``phase:optimizer``, ``phase:zero_grad``. Layer marks are empty
``record_function`` ranges, so they share the clock: forward pre/post hooks
on each decoder layer (``model.model.layers[i]`` / ``transformer.h[i]``)
mark entry and exit; in those hooks, ``register_hook`` on the layer's input
and output hidden states marks, in backward, when the gradient of the
layer's output is ready (``backward enter``) and when the gradient of its
input is (``backward exit``: the layer's backward is done). With recompute,
the same forward hooks fire again inside the backward (the non-reentrant
checkpoint re-runs the layer): they are recorded as ``recompute_enter`` /
``recompute_exit`` of that layer's backward entry. Each submodule also runs
inside a ``module:<path>`` range (pre/post hooks), which names the module of
each forward allocation. The totals at marks are derived from the event
stream afterwards (total after all events with ``start_time_ns <=`` the
mark's).

Cross-check tracker (step 4)
----------------------------
A ``TorchDispatchMode`` sees every aten op of the forward, backward (the CPU
autograd engine runs on the calling thread with the mode active) and
optimizer. For each output tensor whose untyped storage is new (not a
pre-existing storage, not already tracked) it adds ``nbytes`` and attaches
``weakref.finalize`` to the storage object (storages keep their Python
object alive as long as the C++ storage lives, so the finalizer fires at the
real free) that subtracts it. ``tracker_peak_bytes`` = baseline + the
maximum. It cannot see buffers that a kernel allocates and frees inside one
op (matmul packing, the flash-attention scratch, log_softmax/cross_entropy
internals, ``_foreach`` temporaries), nor storages it never returns, so
``peak_bytes - tracker_peak_bytes`` (``tracker_gap_bytes``) is the
kernel-internal memory live at the profiler's peak plus what the tracker
misses there; step 4's profiler peak is the right comparison (equal to step
3's). The tracker's end total must equal its start (checked:
``tracker_end_delta`` 0). Known misses: with recompute, the non-reentrant
checkpoint stores ``torch.get_rng_state()`` per checkpointed layer (a 5056-byte
uint8 tensor: the CPU generator's mt19937 state) without an aten op, so the
tracker sees none of them (``tracker_gap_bytes`` = 5056 x layers when they are
alive at the peak).

Labels and the account at the peak (step 4)
-------------------------------------------
A ``saved_tensors_hooks`` pack hook (identity) records the storage pointer
and module of every tensor autograd saves (outside checkpointed layers,
whose checkpoint hooks take precedence); the ``lm_head`` output pointer is
the logits; after ``backward()`` each parameter's ``.grad`` pointer is its
gradient. Each pointer is matched to the allocation that holds it at that
moment. ``alive_at_peak`` lists the allocations of the step alive at the
peak, grouped by (category, phase that allocated it, module pattern with
``layers.*``, op, bytes), largest first (``ALIVE_GROUPS`` groups; the rest
summed in ``alive_at_peak_rest``); ``alive_at_peak_by_category`` sums them per
category (``saved`` activations, ``logits``, ``grad``, ``other``: anything
else, named by op); ``alive_at_peak_by_phase`` sums them by the phase that
allocated them; ``peak_bytes = baseline_bytes + sum(alive_at_peak_by_phase)``.

Optimizer in backward (``__inbwd`` ids, ``--optimizer-in-backward``)
--------------------------------------------------------------------
torchtune's ``optimizer_in_bwd`` (``torchtune/training/memory.py``
``register_optim_in_bwd_hooks``, ``recipes/full_finetune_distributed.py``
``_setup_optimizer``), ported as ``OptimizerInBackward``: one optimizer of the
spec's class per parameter, ``step()`` then ``zero_grad()`` (set_to_none) in
``p.register_post_accumulate_grad_hook``; the loop's ``optimizer.step()`` and
``zero_grad()`` are no-ops, so the optimizer phases are empty and the
gradients never all exist. The fixture carries ``"optimizer_in_backward":
true`` and ``"trainmem_flags": ["--optimizer-in-backward"]``; the optimizer's
``implementation`` is read from the ``_foreach_`` ops seen in backward.
``galore8bit-perlayer`` is GaLore's own per-layer mode (``torchrun_main.py
--optimizer galore_adamw8bit_per_layer``, ``galore_per_layer``):
GaLoreAdamW8bit (rank 64, update_proj_gap 200, scale 0.25, std) per attn/mlp
linear weight, bitsandbytes' Adam8bit (its CPU backend) per other parameter;
trainmem flags ``--optimizer galore-adamw-8bit --optimizer-option rank=64
--optimizer-option adamw_embeddings=true --optimizer-in-backward``. GaLore
replaces ``p.data`` with a clone every step, so the old storage is freed in
the next step: step 2 is profiled too (a discarded session) so that the
reporter, which reports the free of a block only if it saw its allocation
while profiling, reports those frees in step 3 (``end_bytes`` then equals
``end_live_bytes``; ``unmatched_frees`` counts them).

LoRA dropout and adapter dtype (``__lora-`` ids, ``--lora-dropout``, ``--lora-dtype``)
------------------------------------------------------------------------------------
After ``.to(dtype)``, ``apply_lora`` wraps the model with peft's
``get_peft_model(model, LoraConfig(r, lora_alpha=2r, target_modules,
lora_dropout, bias="none"), autocast_adapter_dtype=...)``: True (peft's
default) keeps the adapters in fp32 under a bf16 base, False leaves them in
the base dtype (bf16, as torchtune and litgpt keep them); the dtype of the
trainable parameters is asserted. Targets ``qv`` (q_proj, v_proj) or ``all``
(all-linear). Hooks and layer marks are set on the wrapped HF model. The
fixture carries ``"lora"`` and the matching ``"trainmem_flags"``
(``--lora-rank --lora-targets --lora-dropout --lora-dtype``). Id suffix:
``__lora-<qv|all>-r<R>-d<P>-<fp32|bf16>``.


LoRA under gradient checkpointing (``specs_lora_recompute``, ``__reentrant``)
----------------------------------------------------------------------------
The same peft wrapping with ``recompute full``: transformers'
``gradient_checkpointing_enable`` on the peft model (it reaches the HF model,
which also calls ``enable_input_require_grads``: the embeddings' output
requires grad, so the frozen model's layers pass gradients back), with
``{"use_reentrant": False}``, or ``True`` for the ``__reentrant`` ids
(``torch.utils.checkpoint.CheckpointFunction``: the layer runs under
``no_grad`` in forward and is re-run whole in backward, its output kept
through ``torch.autograd.backward``); those carry ``"reentrant": true`` and
``--recompute-reentrant`` in ``trainmem_flags``.


Loss and recomputation techniques (issue 12; ``loss_and_recompute_specs``)
------------------------------------------------------------------------
Each of these fixtures carries ``trainmem_flags``, the flags that price it,
which ``tests/timeline.rs`` appends.

* ``__chunked<N>`` (``--loss chunked:N``): torchtune's step instead of the
  Trainer's: hidden states from ``model.model(input_ids)`` (after the final
  norm), the output projection per chunk as ``TransformerDecoder.chunked_output``
  does (``[lm_head(c) for c in h.chunk(N, dim=1)]``), labels shifted outside
  (``torch.hstack((ids[..., 1:], ignore_labels_cache[:B]))``), and
  ``CEWithChunkedOutputLoss(N)`` loaded from the installed torchtune file
  (torchtune's package ``__init__`` needs torchao pieces not installed);
  ``del logits`` before backward. The forward phase ends at the first chunk's
  ``lm_head``; the other chunks fall in the loss phase.
* ``__shift-copy`` (``--loss shift-copy``): transformers 4.48.1's own
  ``ForCausalLMLoss`` (``for_causal_lm_loss_448``, ported from the 4.48.1
  wheel's ``loss/loss_utils.py``) put in ``LOSS_MAPPING["ForCausalLM"]``:
  ``logits.float()``, then ``logits[..., :-1, :].contiguous()`` (a copy of the
  shifted fp32 logits) and ``cross_entropy`` on it; 5.24 pads and shifts the
  labels instead.
* ``__cce-torch-compile`` (``--loss fused`` on CPU): cut-cross-entropy's
  ``linear_cross_entropy(h, lm_head.weight, ids, shift=1,
  impl="torch_compile")`` on the same hidden states; Liger's and CCE's own
  kernels are Triton (CUDA only). torch.compile refuses a Python dispatch mode,
  so step 4 runs without the cross-check tracker (``tracker_*`` fields null).
* ``op`` recompute (``--recompute op``): HF's non-reentrant checkpointing of
  every decoder layer with ``context_fn`` = torchtitan's per-op policy
  (``torchtitan_op_policy``: the compute-intensive ops of
  ``get_default_op_list()`` plus torchtitan's extra list saved, every second
  ``mm``/``linear`` recomputed; ``aten._scaled_dot_product_flash_attention_for_cpu``
  added to the save list since torchtitan lists only the CUDA sdpa kernels).
* ``__every<N>`` (``--recompute-every N``): HF checkpointing turned back off
  (``layer.gradient_checkpointing = False``) on the layers whose 1-based index
  is not a multiple of N (torchtune's and torchtitan's layer rule).

Activation offloading (``__offload`` ids)
------------------------------------------
torchtune's ``OffloadActivations`` (``use_streams=False``: no CUDA stream on CPU)
as a ``saved_tensors_hooks`` context entered by forward hooks around the decoder
(``model.model``: embeddings, layers, final norm), so the output head and the loss
save normally, as in torchtune's recipes (``NoOpManager`` on the output head, the
loss outside the context). Its pack rule is kept exactly (``offload_hooks``): a
tensor of at least 1024 bytes that is not an ``nn.Parameter``/``nn.Buffer`` is
copied, one copy per pack, into memory that numpy allocates (outside torch's CPU
allocator, so the profiler sees only what stays "on the device"); unpack clones it
back into torch's allocator. The fixture carries ``"trainmem_flags":
["--offload-activations"]`` and ``offload_host_peak_bytes``, the most host bytes
the copies held at once (checked against ``activations.offload.host_bytes`` by
``tests/offload.rs``). Step 4's labelling pack hook is shadowed inside the decoder.

Fixture id: ``<model>__<fp32|bf16>__<optimizer>__<attn>__<none|op|full>__b<B>s<S>``
(``__t<threads>``, ``__inbwd``, ``__lora-...``, ``__offload``, ``__reentrant``, ``__<technique>`` suffixes).
Fixture fields: id, model_type, model (the id's first part), config (raw
dict), dims, dtype, attention, batch, seq_len, optimizer {name, foreach,
fused, momentum, implementation (what ran: single_tensor / foreach / fused,
read from the ops in the optimizer phase)}, recompute, parameters,
parameter_bytes, baseline_bytes, baseline {parameters, buffers,
optimizer_states, inputs, other}, peak_bytes, peak_phase, peak_layer,
peak_op, phases [{name, start_bytes, peak_bytes, end_bytes, allocated_bytes,
freed_bytes}], layers {forward: [{layer, enter_bytes, exit_bytes,
peak_bytes}], backward: [{layer, enter_bytes, exit_bytes, peak_bytes,
recompute_enter_bytes, recompute_exit_bytes}]}, grad_bytes, end_bytes,
end_live_bytes, events (count), unmatched_frees (0: every free matched an
allocation of the step), outside_phase_bytes (0: every event falls in a
phase), allocator_counter_check, tracker_peak_bytes, tracker_gap_bytes,
tracker_end_delta, labelled_step_peak_bytes, alive_at_peak..., threads,
torch, transformers, notes. Layer byte counts are running totals (baseline
included), like every ``*_bytes`` field except ``alive_at_peak*``,
``grad_bytes`` and the phases' ``allocated_bytes``/``freed_bytes``.
``peak_op`` is the allocation that reached the peak: its outermost aten op,
innermost kernel, autograd node (backward) and module range (forward or
recompute).

Needs: torch, transformers (CPU only, no network access).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import subprocess
import sys
import time
import warnings
import weakref
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO / "tests" / "fixtures" / "timeline"
# Measured steps trainmem does not yet predict within 3% (``"gap": True``
# specs), kept out of tests/timeline.rs with the reason in its README.
GAPS_DIR = REPO / "tests" / "fixtures" / "timeline-gaps"
ALIVE_GROUPS = 40
PHASES = ("forward", "loss", "backward", "optimizer", "zero_grad")

LLAMA = {"hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 4096,
         "max_position_embeddings": 1024}
QWEN2 = dict(LLAMA)  # class defaults: q/k/v biases; embeddings untied (transformers 5.24)
GPT2 = {"n_embd": 256, "n_layer": 4, "n_head": 8, "n_positions": 1024, "vocab_size": 4096,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
GPT2_DROPOUT = {**GPT2, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1}
PHI = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
       "num_attention_heads": 8, "num_key_value_heads": 8, "partial_rotary_factor": 0.4,
       "vocab_size": 4096, "max_position_embeddings": 1024, "hidden_act": "gelu_new",
       "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0, "layer_norm_eps": 1e-5}
# HuggingFaceTB/SmolLM2-135M's config.json (the fields that shape memory)
SMOLLM2_135M = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
                "max_position_embeddings": 8192, "tie_word_embeddings": True,
                "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu"}

# google/bert_uncased_L-2_H-128_A-2 ("bert-tiny"): BertConfig's defaults otherwise
# (dropout 0.1 on the hidden states and attention probabilities)
BERT_TINY = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2,
             "num_attention_heads": 2, "vocab_size": 30522, "max_position_embeddings": 512}

# facebook/deit-tiny-patch16-224's sizes as a ViTConfig ("vit-tiny"): 224 px images in
# 16 px patches, 197 tokens; ViTConfig's dropouts (0)
VIT_TINY = {"hidden_size": 192, "intermediate_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 3, "image_size": 224, "patch_size": 16}
# openai/clip-vit-base-patch32's vision tower at 4 layers ("clip-b32-l4"): 224 px images in
# 32 px patches, 50 tokens, quick_gelu; a tiny text tower, built but not run
CLIP_B32_L4 = {"vision_config": {"hidden_size": 768, "intermediate_size": 3072,
                                 "num_hidden_layers": 4, "num_attention_heads": 12,
                                 "image_size": 224, "patch_size": 32},
               "text_config": {"hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 1, "num_attention_heads": 4,
                               "vocab_size": 512, "max_position_embeddings": 16}}
VISION = {"vit", "clip"}
# Mamba and Mamba-2 at a few layers: their mixers have no attention (``attn`` eager)
MAMBA_TINY = {"hidden_size": 128, "state_size": 16, "num_hidden_layers": 4, "vocab_size": 4096,
              "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
MAMBA2_TINY = {"hidden_size": 128, "state_size": 16, "num_hidden_layers": 4, "vocab_size": 4096,
               "num_heads": 8, "head_dim": 32, "n_groups": 1, "chunk_size": 32,
               "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}

MODELS = {  # id part -> (model_type, config)
    "llama": ("llama", LLAMA),
    "qwen2": ("qwen2", QWEN2),
    "gpt2": ("gpt2", GPT2),
    "gpt2-dropout": ("gpt2", GPT2_DROPOUT),
    # Phi-2's layout: one LayerNorm before both blocks, partial rotary, NewGELU
    "phi": ("phi", PHI),
    "smollm2-135m": ("llama", SMOLLM2_135M),
    # small vocabulary: the loss buffers no longer dominate, the peak moves into the layers
    "llama-v512": ("llama", {**LLAMA, "vocab_size": 512}),
    "bert-tiny": ("bert", BERT_TINY),
    "roberta-tiny": ("roberta", {**BERT_TINY, "vocab_size": 50265, "max_position_embeddings": 514,
                                 "pad_token_id": 1, "type_vocab_size": 1}),
    # small vocabulary: the classifiers' peak moves from the optimizer into the layers
    "bert-tiny-v512": ("bert", {**BERT_TINY, "vocab_size": 512}),
    "roberta-tiny-v512": ("roberta", {**BERT_TINY, "vocab_size": 512, "max_position_embeddings": 514,
                                      "pad_token_id": 1}),
    "vit-tiny": ("vit", VIT_TINY),
    "clip-b32-l4": ("clip", CLIP_B32_L4),
    # state-space models on their torch path (no mamba-ssm on CPU)
    "mamba-tiny": ("mamba", MAMBA_TINY),
    "mamba2-tiny": ("mamba2", MAMBA2_TINY),
    # small vocabulary: the peak is the scan's backward, not the loss's
    "mamba-tiny-v512": ("mamba", {**MAMBA_TINY, "vocab_size": 512}),
    "mamba2-tiny-v512": ("mamba2", {**MAMBA2_TINY, "vocab_size": 512}),
}

OPTIMIZERS = {  # id part -> (class, kwargs); galore8bit-perlayer: see galore_per_layer
    "adamw": ("AdamW", {"lr": 1e-4, "foreach": False}),
    "adamw-foreach": ("AdamW", {"lr": 1e-4, "foreach": True}),
    "adamw-fused": ("AdamW", {"lr": 1e-4, "fused": True}),
    "sgd": ("SGD", {"lr": 1e-3, "momentum": 0.0, "foreach": False}),
    "sgd-m0.9": ("SGD", {"lr": 1e-3, "momentum": 0.9, "foreach": False}),
    "sgd-m0.9-foreach": ("SGD", {"lr": 1e-3, "momentum": 0.9, "foreach": True}),
    "galore8bit-perlayer": ("galore-adamw-8bit", {"lr": 1e-4}),
}


def spec(model, dtype="fp32", opt="adamw", attn="sdpa", recompute="none", B=2, S=128, threads=1,
         in_bwd=False, lora=None, offload=False, reentrant=False, task=None):
    sid = f"{model}__{dtype}__{opt}__{attn}__{recompute}__b{B}s{S}" + (f"__t{threads}" if threads != 1 else "")
    sid += "__inbwd" if in_bwd else ""
    sid += lora_id(lora) if lora else ""
    sid += "__offload" if offload else ""
    sid += "__reentrant" if reentrant else ""
    out = {"id": sid, "model": model, "dtype": dtype, "opt": opt, "attn": attn,
           "recompute": recompute, "B": B, "S": S, "threads": threads, "in_bwd": in_bwd,
           "lora": lora, "offload": offload, "reentrant": reentrant}
    if task:
        # An encoder's task (`--task`): its auto class, its head and its labels.
        out["id"] += "__" + task.replace(":", "-")
        out["task"] = task
        out["trainmem_flags"] = ["--task", task]
    return out


def encoder_specs() -> list[dict]:
    """BERT-style encoders: masked-LM (labels a copy of the ids: every token
    labelled) and sequence classification (one label per sequence)."""
    s = []
    for dtype in ("fp32", "bf16"):
        for task in ("masked-lm", "seq-cls:3"):
            s.append(spec("bert-tiny", dtype, "adamw", task=task))
    s.append(spec("bert-tiny", "fp32", "adamw", attn="eager", task="masked-lm"))
    s.append(spec("bert-tiny", "fp32", "adamw", B=4, S=256, task="seq-cls:3"))
    s.append(spec("bert-tiny", "bf16", "adamw", B=2, S=256, task="token-cls:9"))
    s.append(spec("roberta-tiny", "fp32", "adamw", task="masked-lm"))
    s.append(spec("roberta-tiny", "bf16", "adamw", attn="eager", task="seq-cls:3"))
    s.append(spec("bert-tiny-v512", "fp32", "adamw", B=8, S=256, task="seq-cls:3"))
    s.append(spec("bert-tiny-v512", "bf16", "adamw", attn="eager", B=4, S=256, task="token-cls:9"))
    s.append(spec("bert-tiny-v512", "fp32", "adamw", B=4, S=256, task="masked-lm"))
    s.append(spec("roberta-tiny-v512", "fp32", "adamw", attn="eager", B=8, S=256, task="seq-cls:3"))
    # ViT's image classifier: S is the sequence a 224 px image becomes (196 patches + CLS)
    s.append(spec("vit-tiny", "fp32", "adamw", B=4, S=197, task="seq-cls:10"))
    s.append(spec("vit-tiny", "bf16", "adamw", attn="eager", B=4, S=197, task="seq-cls:10"))
    # CLIPForImageClassification: S is the sequence a 224 px image becomes (49 patches + class).
    # At B = 8 the step's peak is instead the CPU convolution backward's workspace for the
    # 32 px patch convolution (one 38 MB allocation in aten::convolution_backward), which
    # trainmem does not model: measured 3.4% (fp32) and 10.8% (bf16) above the prediction,
    # so those steps are not kept as fixtures; at B = 32 the peak is in the layers.
    s.append(spec("clip-b32-l4", "fp32", "adamw", B=32, S=50, task="seq-cls:10"))
    s.append(spec("clip-b32-l4", "bf16", "adamw", attn="eager", B=32, S=50, task="seq-cls:10"))
    return s


def task_class(task: str | None, cfg, transformers):
    """The auto class of a trainmem --task (causal-lm without one); sets num_labels."""
    kind, _, n = (task or "causal-lm").partition(":")
    if n:
        cfg.num_labels = int(n)
    if cfg.model_type in VISION and kind == "seq-cls":
        return transformers.AutoModelForImageClassification
    return {"causal-lm": transformers.AutoModelForCausalLM,
            "masked-lm": transformers.AutoModelForMaskedLM,
            "seq-cls": transformers.AutoModelForSequenceClassification,
            "token-cls": transformers.AutoModelForTokenClassification}[kind]


def task_labels(task: str | None, torch, ids):
    """The labels of the step: the ids themselves for a causal LM (the
    Trainer path), a copy for masked-LM, one per sequence or per token for
    the classifiers."""
    kind, _, n = (task or "causal-lm").partition(":")
    if kind == "seq-cls":
        return torch.randint(0, int(n), (ids.shape[0],))
    if kind == "token-cls":
        return torch.randint(0, int(n), tuple(ids.shape))
    if kind == "masked-lm":
        return ids.clone()
    return ids


def specs() -> list[dict]:
    s = []
    # llama: dtype x optimizer implementation x attention x recompute, two (B, S)
    for dtype in ("fp32", "bf16"):
        for opt in ("adamw", "adamw-foreach"):
            s.append(spec("llama", dtype, opt))
        s.append(spec("llama", dtype, "adamw", attn="eager"))
        s.append(spec("llama", dtype, "adamw", recompute="full"))
        s.append(spec("llama", dtype, "adamw", B=1, S=512))
        s.append(spec("llama", dtype, "sgd-m0.9"))
    s.append(spec("llama", "fp32", "adamw-fused"))
    s.append(spec("llama", "fp32", "sgd"))
    s.append(spec("llama", "fp32", "sgd-m0.9-foreach"))
    s.append(spec("llama", "fp32", "adamw", attn="eager", B=1, S=512))
    s.append(spec("llama", "fp32", "adamw", recompute="full", B=1, S=512))
    s.append(spec("llama", "bf16", "adamw-foreach", recompute="full", B=1, S=512))
    s.append(spec("llama", "fp32", "adamw", B=1, S=16))  # model states dominate
    # thread count: the CPU flash-attention kernel sizes its scratch by threads
    s.append(spec("llama", "fp32", "adamw", B=1, S=512, threads=2))
    s.append(spec("llama", "fp32", "adamw", recompute="full", B=1, S=512, threads=2))
    # vocabulary 512: the peak inside a decoder layer's forward/backward
    s.append(spec("llama-v512", "fp32", "adamw", attn="eager", B=1, S=512))
    s.append(spec("llama-v512", "fp32", "adamw", B=1, S=512))
    s.append(spec("llama-v512", "bf16", "adamw", attn="eager", recompute="full", B=1, S=512))
    # gpt2: dropout off / on, eager, recompute
    s.append(spec("gpt2", "fp32", "adamw"))
    s.append(spec("gpt2-dropout", "fp32", "adamw"))
    s.append(spec("gpt2-dropout", "fp32", "adamw", attn="eager"))
    s.append(spec("gpt2", "bf16", "adamw-foreach", attn="eager"))
    s.append(spec("gpt2", "fp32", "adamw", recompute="full"))
    s.append(spec("gpt2", "bf16", "adamw", B=1, S=512))
    # qwen2 (tied, qkv bias)
    s.append(spec("qwen2", "fp32", "adamw"))
    s.append(spec("qwen2", "bf16", "adamw-foreach", attn="eager"))
    s.append(spec("qwen2", "bf16", "adamw", recompute="full", B=1, S=512))
    # a real small shape
    s.append(spec("smollm2-135m", "fp32", "adamw", B=1, S=256))
    s.append(spec("smollm2-135m", "bf16", "adamw", B=1, S=256))
    s.append(spec("smollm2-135m", "bf16", "adamw-foreach", recompute="full", B=1, S=256))
    s.extend(specs_optimizer_in_backward())
    s.extend(specs_lora())
    s.extend(loss_and_recompute_specs())
    s.extend(keep_outputs_specs())
    s.extend(nf4_torchao_specs())
    s.extend(autocast_specs())
    # --offload-activations: torchtune's OffloadActivations rule, packed to numpy memory
    for dtype in ("fp32", "bf16"):
        for recompute in ("none", "full"):
            s.append(spec("llama", dtype, recompute=recompute, offload=True))
            s.append(spec("llama-v512", dtype, recompute=recompute, B=1, S=512, offload=True))
    s.append(spec("qwen2", "bf16", B=1, S=512, offload=True))
    s.extend(encoder_specs())
    for model in ("mamba-tiny", "mamba2-tiny"):
        for dtype in ("fp32", "bf16"):
            s.append(spec(model, dtype, "adamw", attn="eager"))
        s.append(spec(model, "bf16", "adamw", attn="eager", recompute="full"))
        s.append(spec(f"{model}-v512", "fp32", "adamw", attn="eager"))
        s.append(spec(f"{model}-v512", "bf16", "adamw", attn="eager", recompute="full"))
    return s


# -- LoRA dropout and adapter dtype (issue 12) --------------------------------------
LORA_TARGETS = {"qv": ["q_proj", "v_proj"], "qkvo": ["q_proj", "k_proj", "v_proj", "o_proj"],
                "all": "all-linear",
                # every linear and the output head (torchtune's apply_lora_to_output,
                # litgpt's lora_head): peft's "all-linear" leaves lm_head out
                "allh": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                         "down_proj", "lm_head"]}


def lora_id(lora: dict) -> str:
    """``__lora-<qv|all>-r<R>-d<P>-<fp32|bf16>``."""
    return f"__lora-{lora['targets']}-r{lora['r']}-d{lora['dropout']}-{lora['dtype']}"


def specs_lora() -> list[dict]:
    """peft LoRA on llama tiny (ids with ``__lora-``): dropout 0 / 0.05 / 0.1,
    adapters in fp32 (peft's autocast_adapter_dtype=True) or in the base dtype."""
    out = []
    for targets, r in (("qv", 8), ("all", 16)):
        for dropout in (0, 0.05):
            for adapter in ("fp32", "bf16"):
                out.append(spec("llama", "bf16", "adamw", lora={"targets": targets, "r": r,
                                                                "dropout": dropout, "dtype": adapter}))
    out.append(spec("llama", "bf16", "adamw", lora={"targets": "qv", "r": 8, "dropout": 0.1, "dtype": "bf16"}))
    out.append(spec("llama", "fp32", "adamw", lora={"targets": "all", "r": 16, "dropout": 0.05, "dtype": "fp32"}))
    out.append(spec("llama-v512", "bf16", "adamw", B=1, S=512,
                    lora={"targets": "all", "r": 16, "dropout": 0.05, "dtype": "fp32"}))
    out.append(spec("llama-v512", "bf16", "adamw", B=1, S=512,
                    lora={"targets": "all", "r": 16, "dropout": 0, "dtype": "fp32"}))
    # The single-device twin of measure_fsdp.py's unwrapped-recompute LoRA step.
    out.append(dict(spec("llama-v512", "bf16", "adamw", B=1, S=512,
                         lora={"targets": "qkvo", "r": 16, "dropout": 0.1, "dtype": "fp32"}),
                    gap=True))
    out.extend(specs_lora_recompute())
    out.extend(specs_lora_head())
    return out


def specs_lora_head() -> list[dict]:
    """peft LoRA on the output head too (``__lora-allh-``): the adapter's
    ``T x V`` output, its scaled copy and the sum in forward, their gradients
    in backward; fp32 adapters (peft's default) and bf16, with and without
    dropout, with and without checkpointing, and an fp32 base."""
    out = []
    for dropout, adapter in ((0.05, "fp32"), (0, "fp32"), (0, "bf16"), (0.05, "bf16")):
        lora = {"targets": "allh", "r": 16, "dropout": dropout, "dtype": adapter}
        out.append(spec("llama", "bf16", "adamw", lora=lora))
        out.append(spec("llama", "bf16", "adamw", recompute="full", lora=lora))
    out.append(spec("llama", "fp32", "adamw", lora={"targets": "allh", "r": 16, "dropout": 0.05,
                                                    "dtype": "fp32"}))
    return out


def specs_lora_recompute() -> list[dict]:
    """peft LoRA under HF gradient checkpointing of every layer (``__lora-...``
    ids with recompute ``full``), non-reentrant and reentrant (``__reentrant``:
    ``use_reentrant=True``, transformers' default before it switched to False):
    fms-hf-tuning's q,k,v,o r16 with dropout 0.1 and fp32 adapters, torchtune's
    q,v r8 with bf16 adapters, all-linear r16 (fp32 and bf16 adapters, dropout
    0 / 0.05 / 0.1: the most common fine-tuning setup); the peak inside a layer's backward
    (vocabulary 512) and in the loss (vocabulary 4096). The reentrant ids carry
    ``--recompute-reentrant``."""
    out = []
    for reentrant in (False, True):
        for lora in ({"targets": "qkvo", "r": 16, "dropout": 0.1, "dtype": "fp32"},
                     {"targets": "qkvo", "r": 16, "dropout": 0, "dtype": "fp32"},
                     {"targets": "qv", "r": 8, "dropout": 0.05, "dtype": "bf16"},
                     {"targets": "qv", "r": 8, "dropout": 0, "dtype": "bf16"},
                     {"targets": "all", "r": 16, "dropout": 0, "dtype": "fp32"},
                     {"targets": "all", "r": 16, "dropout": 0.1, "dtype": "fp32"},
                     {"targets": "all", "r": 16, "dropout": 0, "dtype": "bf16"},
                     {"targets": "all", "r": 16, "dropout": 0.05, "dtype": "bf16"}):
            out.append(spec("llama-v512", "bf16", "adamw", recompute="full", B=1, S=512, lora=lora,
                            reentrant=reentrant))
        out.append(spec("llama", "bf16", "adamw", recompute="full", reentrant=reentrant,
                        lora={"targets": "qkvo", "r": 16, "dropout": 0.1, "dtype": "fp32"}))
    return out


def apply_lora(model, lora: dict, torch, cast: bool = False):
    """peft's ``get_peft_model(model, LoraConfig(r, lora_alpha=2r, target_modules,
    lora_dropout))``: ``autocast_adapter_dtype=True`` (peft's default) keeps the
    adapters in fp32 under a bf16 base; ``False`` leaves them in the base dtype
    (bf16, as torchtune and litgpt keep them)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=lora["r"], lora_alpha=2 * lora["r"], target_modules=LORA_TARGETS[lora["targets"]],
                        lora_dropout=lora["dropout"], bias="none")
    peft_model = get_peft_model(model, config, autocast_adapter_dtype=lora["dtype"] == "fp32")
    want = {"fp32": torch.float32, "bf16": torch.bfloat16}[lora["dtype"]]
    if cast:
        # TRL's SFTTrainer on a quantized model: every trainable parameter to bf16.
        for p in peft_model.parameters():
            if p.requires_grad:
                p.data = p.data.to(want)
    dtypes = {p.dtype for p in peft_model.parameters() if p.requires_grad}
    assert dtypes == {want}, (dtypes, want)
    return peft_model


def lora_flags(lora: dict) -> list[str]:
    targets = LORA_TARGETS[lora["targets"]]
    return ["--lora-rank", str(lora["r"]), "--lora-targets",
            targets if isinstance(targets, str) else ",".join(targets),
            "--lora-dropout", str(lora["dropout"]), "--lora-dtype", lora["dtype"]]


# -- --optimizer-in-backward (issue 12) ------------------------------------------
def specs_optimizer_in_backward() -> list[dict]:
    """torchtune's optimizer_in_bwd: one AdamW per parameter, stepped in a
    post-accumulate-grad hook (ids ending ``__inbwd``)."""
    return [spec("llama", "fp32", "adamw", in_bwd=True),
            spec("llama", "bf16", "adamw", in_bwd=True),
            # model states dominate: the gradients a standard step keeps are what goes away
            spec("llama", "fp32", "adamw", B=1, S=16, in_bwd=True),
            spec("llama", "bf16", "adamw", B=1, S=16, in_bwd=True),
            spec("llama", "bf16", "adamw-foreach", B=1, S=16, in_bwd=True),
            spec("llama-v512", "fp32", "adamw", B=1, S=64, in_bwd=True),
            # GaLore's per-layer 8-bit GaLore (torchrun_main.py --optimizer galore_adamw8bit_per_layer)
            spec("llama", "fp32", "galore8bit-perlayer", in_bwd=True),
            spec("llama", "fp32", "galore8bit-perlayer", B=1, S=16, in_bwd=True)]


GALORE_PER_LAYER = {"rank": 64, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std"}


def galore_per_layer(model, torch):
    """GaLore's ``torchrun_main.py --optimizer galore_adamw8bit_per_layer``
    (jiaweizzhao/GaLore): the weights of nn.Linear modules whose name holds
    "attn" or "mlp" get ``GaLoreAdamW8bit([{'params': [p], 'rank', 'update_proj_gap',
    'scale', 'proj_type'}])``, every other parameter ``bnb.optim.Adam8bit([p])``;
    each is stepped and zeroed in ``p.register_post_accumulate_grad_hook``.
    GaLoreAdamW8bit.step calls torch.cuda.synchronize() unconditionally: made
    a no-op here (CPU)."""
    import bitsandbytes as bnb
    from galore_torch import GaLoreAdamW8bit

    torch.cuda.synchronize = lambda *a, **k: None
    galore = {id(m.weight) for n, m in model.named_modules()
              if isinstance(m, torch.nn.Linear) and ("attn" in n or "mlp" in n)}

    def factory(p):
        if id(p) in galore:
            return GaLoreAdamW8bit([{"params": [p], **GALORE_PER_LAYER}], lr=1e-4)
        return bnb.optim.Adam8bit([p], lr=1e-4)

    return OptimizerInBackward(model, factory=factory)


class OptimizerInBackward:
    """torchtune's ``OptimizerInBackwardWrapper`` + ``register_optim_in_bwd_hooks``
    (torchtune/training/memory.py, 0.6.1): ``optim_dict = {p: cls([p], **kw)}``
    and ``p.register_post_accumulate_grad_hook(optim_step)`` where ``optim_step``
    calls ``optim_dict[p].step()`` then ``optim_dict[p].zero_grad()``
    (``set_to_none=True``: the gradient is freed at once). The training loop's
    own ``step()``/``zero_grad()`` are no-ops, as in torchtune's recipes."""

    def __init__(self, model, cls=None, kw=None, factory=None):
        factory = factory or (lambda p: cls([p], **kw))
        self.optim_dict = {p: factory(p) for p in model.parameters()}

        def optim_step(param):
            self.optim_dict[param].step()
            self.optim_dict[param].zero_grad()

        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(optim_step)

    @property
    def state(self):
        return {p: s for o in self.optim_dict.values() for p, s in o.state.items()}

    def step(self):
        pass

    def zero_grad(self, set_to_none=True):
        pass


# ---------------------------------------------------------------------------
# Techniques (issue 12): the loss (--loss) and recomputation (--recompute op,
# --recompute-every N). Each spec carries "trainmem_flags" for tests/timeline.rs.
# ---------------------------------------------------------------------------
def technique(base: dict, suffix: str, flags: list[str], **extra) -> dict:
    out = dict(base, **extra)
    out["id"] = base["id"] + "__" + suffix
    out["trainmem_flags"] = flags
    return out


def loss_and_recompute_specs() -> list[dict]:
    s = []
    # torchtune's CEWithChunkedOutputLoss with the output projection per chunk
    for dtype, B, S, n in (("bf16", 1, 512, 4), ("bf16", 1, 512, 8), ("bf16", 2, 256, 8),
                           ("fp32", 1, 512, 8)):
        s.append(technique(spec("llama", dtype, "adamw", B=B, S=S), f"chunked{n}",
                           ["--loss", f"chunked:{n}"], chunked=n))
    # Apple's cut-cross-entropy, its CPU path (impl="torch_compile")
    for dtype in ("bf16", "fp32"):
        s.append(technique(spec("llama", dtype, "adamw", B=1, S=512), "cce-torch-compile",
                           ["--loss", "fused"], cce=True))
    # transformers' ForCausalLMLoss up to 4.48 (the shifted fp32 logits copied)
    for dtype, B, S in (("bf16", 2, 128), ("fp32", 2, 128), ("bf16", 1, 512)):
        s.append(technique(spec("llama", dtype, "adamw", B=B, S=S), "shift-copy",
                           ["--loss", "shift-copy"], shift_copy=True))
    s.append(technique(spec("llama", "bf16", "adamw", recompute="full", reentrant=True,
                            lora={"targets": "qkvo", "r": 16, "dropout": 0.1, "dtype": "fp32"}),
                       "shift-copy", ["--loss", "shift-copy"], shift_copy=True))
    # torchtitan's per-op selective activation checkpointing on every layer
    for model, dtype in (("llama", "fp32"), ("llama", "bf16"), ("llama-v512", "fp32"),
                         ("llama-v512", "bf16")):
        s.append(spec(model, dtype, "adamw", recompute="op", B=1, S=512))
    # full checkpointing of every N-th layer (torchtune / torchtitan layer SAC)
    for model, dtype, n in (("llama", "fp32", 2), ("llama", "fp32", 3), ("llama-v512", "bf16", 2),
                            ("llama-v512", "bf16", 3)):
        s.append(technique(spec(model, dtype, "adamw", recompute="full", B=1, S=512), f"every{n}",
                           ["--recompute-every", str(n)], every=n))
    return s


def keep_outputs_specs() -> list[dict]:
    """``--keep-outputs`` (issue 24, mechanism 1): accelerate's example loop
    (``examples/nlp_example.py``: ``outputs = model(**batch); loss =
    outputs.loss; accelerator.backward(loss); optimizer.step();
    optimizer.zero_grad()``) run as one ``training_step`` function, so
    ``outputs``, the logits with it, stay referenced through backward and
    the optimizer step and die when the function returns.

    ``--carry-outputs`` (``__carry-outputs`` ids): the same loop as written,
    ``outputs`` bound in the loop body, kept in ``state["carried"]`` until
    the next forward returns (HF: after the loss inside it). Step 2 is
    profiled too (a discarded session) so that the reporter reports the
    free of step 2's outputs in step 3; ``end_bytes`` then equals
    ``end_live_bytes``. The tracker of step 4 cannot see that free (the
    storage predates it): ``tracker_gap_bytes`` is minus the carried bytes."""
    s = []
    for model, dtype, recompute, B, S in (
            ("llama", "fp32", "none", 2, 128), ("llama", "bf16", "none", 2, 128),
            ("llama", "fp32", "full", 1, 512), ("llama", "bf16", "full", 1, 512),
            ("qwen2", "bf16", "none", 2, 128)):
        s.append(technique(spec(model, dtype, "adamw", recompute=recompute, B=B, S=S),
                           "keep-outputs", ["--keep-outputs"], keep_outputs=True))
    # The same loop under accelerate's bf16 autocast: convert_outputs_to_fp32
    # makes `outputs.logits` an fp32 copy, which is what the loop holds.
    for model, recompute, B, S in (("llama", "none", 2, 128), ("llama", "full", 1, 512),
                                   ("llama-v512", "none", 1, 512)):
        s.append(technique(spec(model, "amp-bf16", "adamw", recompute=recompute, B=B, S=S),
                           "keep-outputs", ["--keep-outputs"], keep_outputs=True))
    s.append(technique(spec("llama", "bf16", "adamw", lora={"targets": "all", "r": 16, "dropout": 0,
                                                             "dtype": "fp32"}),
                       "autocast__keep-outputs", ["--autocast", "--keep-outputs"], autocast=True,
                       keep_outputs=True))
    # The loop itself, not a function per step: `outputs = model(**batch)`
    # at the loop's own scope rebinds the variable only when the next
    # forward returns, so the previous step's outputs (and what their graph
    # still references) are alive through the next forward and its loss.
    for model, dtype, recompute, B, S in (
            ("llama", "fp32", "none", 2, 128), ("llama", "bf16", "none", 2, 128),
            ("llama", "fp32", "full", 1, 512), ("llama", "bf16", "full", 1, 512),
            ("qwen2", "bf16", "none", 2, 128), ("llama", "amp-bf16", "none", 2, 128),
            ("llama", "amp-bf16", "full", 1, 512)):
        s.append(technique(spec(model, dtype, "adamw", recompute=recompute, B=B, S=S),
                           "carry-outputs", ["--carry-outputs"], keep_outputs=True,
                           carry_outputs=True))
    return s


def autocast_specs() -> list[dict]:
    """``--precision amp-bf16``: HF Trainer's ``bf16=True`` on an fp32 model,
    whose forward accelerate's ``prepare_model`` wraps in ``torch.autocast``
    and ``convert_outputs_to_fp32`` (``wrap_forward_like_accelerate``); the
    backward and the optimizer run outside autocast, as
    ``accelerator.backward`` does. CPU autocast and CUDA autocast run the
    same ops of these models in bf16 (linear, matmul,
    scaled_dot_product_attention); CUDA's fp32 list has more
    (``cuda_autocast_specs``)."""
    s = []
    for model, recompute, attn, B, S in (
            ("llama", "none", "sdpa", 2, 128), ("llama", "full", "sdpa", 1, 512),
            ("llama", "none", "eager", 2, 128), ("llama-v512", "none", "sdpa", 1, 512),
            ("llama-v512", "full", "sdpa", 1, 512), ("qwen2", "none", "sdpa", 2, 128),
            ("smollm2-135m", "none", "sdpa", 1, 256), ("gpt2", "none", "sdpa", 2, 128)):
        s.append(spec(model, "amp-bf16", "adamw", attn=attn, recompute=recompute, B=B, S=S))
        # +3.4%: written to tests/fixtures/timeline-gaps/ (its README says why)
        s[-1]["gap"] = model == "llama-v512" and recompute == "full"
    # peft LoRA on a bf16-loaded base, fp32 adapters (peft's default), under
    # the same wrapper: HF Trainer's bf16=True over torch_dtype=bfloat16
    # (``--autocast``).
    for lora, recompute in (({"targets": "all", "r": 16, "dropout": 0.05, "dtype": "fp32"}, "none"),
                            ({"targets": "all", "r": 16, "dropout": 0, "dtype": "fp32"}, "none"),
                            ({"targets": "qv", "r": 8, "dropout": 0.05, "dtype": "fp32"}, "none"),
                            ({"targets": "all", "r": 16, "dropout": 0.05, "dtype": "fp32"}, "full")):
        base = spec("llama", "bf16", "adamw", recompute=recompute,
                    B=1 if recompute == "full" else 2, S=512 if recompute == "full" else 128,
                    lora=lora)
        s.append(technique(base, "autocast", ["--autocast"], autocast=True))
    s.extend(hf_qlora_specs())
    s.extend(cuda_autocast_specs())
    # peft LoRA on an fp32 base under the same wrapper (amp-bf16 with LoRA).
    for lora in ({"targets": "all", "r": 16, "dropout": 0.05, "dtype": "fp32"},
                 {"targets": "qv", "r": 8, "dropout": 0, "dtype": "fp32"}):
        s.append(spec("llama", "amp-bf16", "adamw", lora=lora))
    return s


def under_autocast(base: dict, cuda: bool) -> dict:
    """``base`` under accelerate's bf16 autocast (``--autocast`` over bf16
    weights; implied by amp-bf16), with CUDA's op lists emulated when
    ``cuda`` (ids ``__cuda-autocast``, else ``__autocast``)."""
    bf16 = base["dtype"] == "bf16"
    flags = list(base.get("trainmem_flags", [])) + (["--autocast"] if bf16 else [])
    return technique(base, "cuda-autocast" if cuda else "autocast",
                     flags + (["--autocast-ops", "cuda"] if cuda else []),
                     autocast=bf16, cuda_autocast=cuda)


def cuda_autocast_specs() -> list[dict]:
    """Autocast with CUDA's op lists emulated on the CPU
    (``cuda_autocast_mode``: CUDA's fp32-only ops cast to fp32 on top of
    CPU autocast), ids ending ``__cuda-autocast``: what the same steps
    save on a GPU, where ``pow`` (GPT-2's ``NewGELUActivation``),
    ``layer_norm`` and ``softmax`` run in fp32. Llama's RMSNorm upcasts by
    itself, so its steps save the same as under CPU autocast. The encoders
    are measured under both lists (``__autocast`` and ``__cuda-autocast``)."""
    s = []
    for model, dtype, attn, B, S in (
            ("gpt2", "amp-bf16", "sdpa", 2, 128), ("gpt2", "bf16", "sdpa", 2, 128),
            ("gpt2", "bf16", "sdpa", 1, 512), ("gpt2", "bf16", "eager", 2, 128),
            ("llama", "amp-bf16", "sdpa", 2, 128), ("llama", "bf16", "sdpa", 2, 128),
            ("phi", "bf16", "sdpa", 2, 128), ("phi", "amp-bf16", "sdpa", 2, 128)):
        s.append(under_autocast(spec(model, dtype, "adamw", attn=attn, B=B, S=S), cuda=True))
    # BERT (post-norm: the LayerNorms' outputs are the residual stream), ViT
    # (pre-norm, its pixels fp32), RoBERTa's masked-LM (its decoder tied).
    for model, dtype, attn, B, S, task in (
            ("bert-tiny", "bf16", "sdpa", 2, 128, "masked-lm"),
            ("bert-tiny", "amp-bf16", "sdpa", 2, 128, "masked-lm"),
            ("bert-tiny", "bf16", "sdpa", 2, 128, "seq-cls:3"),
            ("vit-tiny", "bf16", "sdpa", 4, 197, "seq-cls:10"),
            ("vit-tiny", "amp-bf16", "eager", 4, 197, "seq-cls:10"),
            ("roberta-tiny", "bf16", "sdpa", 2, 128, "masked-lm"),
            ("bert-tiny", "bf16", "sdpa", 2, 256, "token-cls:9")):
        for cuda in (False, True):
            s.append(under_autocast(spec(model, dtype, "adamw", attn=attn, B=B, S=S, task=task), cuda))
    # The same Phi steps without autocast and under CPU autocast.
    s.append(spec("phi", "bf16", "adamw"))
    s.append(under_autocast(spec("phi", "bf16", "adamw"), cuda=False))
    s.append(spec("phi", "amp-bf16", "adamw"))
    return s


def hf_qlora_specs() -> list[dict]:
    """HF QLoRA (bitsandbytes nf4 with double quantization, ``transformers``'
    4-bit load) under the Trainer's autocast, as it is launched:

    * a bf16 load, peft's fp32 adapters, nothing else (``__bnb-nf4-dq__autocast``);
    * the same after peft's ``prepare_model_for_kbit_training`` (``-kbit-prep``),
      which upcasts every parameter that is not a ``Params4bit`` (the
      embedding, the norms, the output head) to fp32: fp32 weights under
      autocast over a 4-bit base, ``--precision amp-bf16``;
    * TRL 1.16's SFTTrainer on a 4-bit model (``__bnb-nf4-trl``):
      ``ModelConfig.dtype`` (default float32) is both the load dtype and
      ``bnb_4bit_compute_dtype`` (``trl/trainer/utils.py``
      ``get_quantization_config``), and after ``get_peft_model`` it casts
      every trainable parameter to bf16 (``sft_trainer.py``, "When using
      QLoRA, the PEFT adapter weights are converted to bf16")."""
    s = []
    base = spec("llama", "bf16", "adamw", lora={"targets": "all", "r": 16, "dropout": 0,
                                                 "dtype": "fp32"})
    s.append(technique(base, "bnb-nf4-dq__autocast",
                       ["--quantize", "nf4", "--double-quant", "on", "--autocast"],
                       autocast=True, bnb_nf4=True))
    for model, recompute, B, S, lora in (
            ("llama", "none", 2, 128, {"targets": "all", "r": 16, "dropout": 0}),
            ("llama", "none", 2, 128, {"targets": "all", "r": 16, "dropout": 0.05}),
            ("llama", "full", 1, 512, {"targets": "all", "r": 16, "dropout": 0.05}),
            ("llama-v512", "none", 1, 512, {"targets": "qv", "r": 8, "dropout": 0}),
            ("qwen2", "none", 2, 128, {"targets": "all", "r": 16, "dropout": 0.05})):
        base = spec(model, "amp-bf16", "adamw", recompute=recompute, B=B, S=S,
                    lora=dict(lora, dtype="fp32"))
        s.append(technique(base, "bnb-nf4-dq-kbit-prep", ["--quantize", "nf4", "--double-quant", "on"],
                           bnb_nf4=True, kbit_prep=True))
    # bitsandbytes 0.42.0's MatMul4Bit (ported, ``bnb_042_matmul_4bit``):
    # every 4-bit linear whose input needs a gradient holds it until the
    # graph dies; with accelerate's loop as written (``outputs`` at the
    # loop's scope) that is after the next forward.
    # Under reentrant checkpointing the forward runs under no_grad, so the
    # contexts die with it; only the layer rebuilt in backward holds them.
    # loop: "" (Trainer's), "keep" (outputs kept to the step's end), "carry".
    for recompute, B, S, loop, reentrant in (("none", 2, 128, "", False),
                                             ("none", 2, 128, "carry", False),
                                             ("full", 1, 512, "", False),
                                             ("full", 1, 512, "", True),
                                             ("full", 1, 512, "keep", True)):
        base = spec("llama", "amp-bf16", "adamw", recompute=recompute, B=B, S=S,
                    reentrant=reentrant,
                    lora={"targets": "all", "r": 16, "dropout": 0.05, "dtype": "fp32"})
        flags = ["--quantize", "nf4", "--double-quant", "on", "--bitsandbytes", "0.42.0"]
        s.append(technique(base, "bnb-0.42-nf4-dq-kbit-prep" + (f"__{loop}-outputs" if loop else ""),
                           flags + ([f"--{loop}-outputs"] if loop else []), bnb_nf4=True,
                           kbit_prep=True, bnb_042=True, keep_outputs=bool(loop),
                           carry_outputs=loop == "carry"))
    for dtype, recompute, B, S in (("amp-bf16", "none", 2, 128), ("amp-bf16", "full", 1, 512),
                                   ("bf16", "none", 2, 128), ("bf16", "full", 1, 512)):
        base = spec("llama", dtype, "adamw", recompute=recompute, B=B, S=S,
                    lora={"targets": "all", "r": 16, "dropout": 0.05, "dtype": "bf16"})
        s.append(technique(base, "bnb-nf4-trl",
                           ["--quantize", "nf4"] + (["--autocast"] if dtype == "bf16" else []),
                           bnb_nf4=True, autocast=True, trl_adapters=True))
    return s


# CUDA autocast's fp32 policy for the ops CPU autocast leaves alone:
# the functions registered for AutocastCUDA and not AutocastCPU in torch
# 2.15 (``torch._C._dispatch_dump(op)`` over every op name; the policy of
# each from ``aten/src/ATen/autocast_mode.cpp``'s CUDA fp32 list).
CUDA_FP32_ONLY = frozenset({
    "pow", "layer_norm", "group_norm", "rms_norm", "softmax", "log_softmax", "rsqrt", "exp",
    "expm1", "log", "log1p", "log2", "log10", "reciprocal", "softplus", "sum", "cumsum",
    "cumprod", "logsumexp", "norm", "acos", "asin", "cosh", "sinh", "tan", "erfinv"})


def cuda_autocast_mode(torch):
    """A TorchFunctionMode that, while CPU autocast is on, casts the
    floating (non-double) tensor arguments of CUDA autocast's fp32-only
    ops to fp32 before calling them, as CUDA's ``WrapFunction<fp32>``
    does (``cached_cast(at::kFloat, ...)``: a ``.to()`` autograd records),
    so that a CPU step saves what the same step saves under CUDA autocast.
    The lower-precision list (linear, matmul, sdpa) is CPU autocast's own,
    the same ops on both devices."""
    from torch.overrides import TorchFunctionMode

    def cast(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point() \
                and value.dtype not in (torch.float32, torch.float64):
            return value.float()
        if isinstance(value, (list, tuple)):
            return type(value)(cast(v) for v in value)
        return value

    class CudaFp32(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__name__", None) in CUDA_FP32_ONLY and torch.is_autocast_enabled("cpu"):
                args, kwargs = cast(args), {k: cast(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    return CudaFp32


def wrap_forward_like_accelerate(torch, model, cuda_policy: bool = False) -> None:
    """What ``Accelerator.prepare_model`` does to the model under native
    bf16 amp: ``forward`` runs under ``torch.autocast`` and its outputs are
    cast back to fp32 (``convert_outputs_to_fp32``). ``cuda_policy``: with
    CUDA autocast's fp32 casts (``cuda_autocast_mode``) on top."""
    from types import MethodType

    from accelerate.utils import convert_outputs_to_fp32
    forward = torch.autocast(device_type="cpu", dtype=torch.bfloat16)(model.forward.__func__)
    if cuda_policy:
        autocast_forward, mode = forward, cuda_autocast_mode(torch)

        def forward(*args, **kwargs):
            with mode():
                return autocast_forward(*args, **kwargs)
    model.forward = MethodType(forward, model)
    model.forward = MethodType(convert_outputs_to_fp32(model.forward.__func__), model)


def nf4_torchao_specs() -> list[dict]:
    """``--quantize nf4-torchao`` (issue 24, mechanism 3): torchtune's QLoRA
    modules on the HF model (``__nf4-torchao-qv-r8`` ids): every decoder
    linear replaced by torchtune 0.6.1's ``LoRALinear(quantize_base=True)``
    (q_proj, v_proj; rank 8, alpha 16, no dropout, adapters in the base dtype)
    or ``FrozenNF4Linear`` (the others), their weights ``to_nf4`` (torchao
    0.18 ``NF4Tensor``, block 64, scaler block 256) of the HF weights; the
    embeddings, norms and lm_head frozen in the base dtype, as torchtune's
    ``lora_llama3`` with ``quantize_base=True`` builds them. Needs the
    measurement venv with torchtune and torchao (``/work/venv-peaks``)."""
    s = []
    for model, dtype, recompute, B, S in (
            ("llama", "bf16", "none", 2, 128), ("llama", "bf16", "full", 2, 128),
            ("llama-v512", "bf16", "none", 1, 512), ("llama-v512", "bf16", "full", 1, 512),
            ("llama", "fp32", "none", 2, 128)):
        s.append(technique(spec(model, dtype, "adamw", recompute=recompute, B=B, S=S),
                           "nf4-torchao-qv-r8",
                           ["--lora-rank", "8", "--lora-targets", "q_proj,v_proj", "--lora-dropout",
                            "0", "--lora-dtype", dtype, "--quantize", "nf4-torchao"],
                           nf4_torchao=True))
    return s


def apply_bnb_nf4(torch, layers, compute_dtype, double_quant: bool = True) -> None:
    """transformers' bitsandbytes 4-bit load on the CPU: every decoder
    layer's ``nn.Linear`` becomes ``bnb.nn.Linear4bit`` (nf4, double
    quantization, ``compute_dtype``, uint8 storage) with its weight
    quantized by ``bnb.functional.quantize_4bit``, as ``Params4bit._quantize``
    does on a device move."""
    import bitsandbytes as bnb
    for layer in layers:
        for parent in list(layer.modules()):
            for name, child in list(parent.named_children()):
                if type(child) is not torch.nn.Linear:
                    continue
                q = bnb.nn.Linear4bit(child.in_features, child.out_features,
                                      bias=child.bias is not None, compute_dtype=compute_dtype,
                                      compress_statistics=double_quant, quant_type="nf4")
                w4, state = bnb.functional.quantize_4bit(
                    child.weight.data.contiguous(), blocksize=64, compress_statistics=double_quant,
                    quant_type="nf4", quant_storage=torch.uint8)
                q.weight = bnb.nn.Params4bit(w4, requires_grad=False, quant_state=state,
                                             blocksize=64, compress_statistics=double_quant,
                                             quant_type="nf4", quant_storage=torch.uint8,
                                             module=q, bnb_quantized=True)
                if child.bias is not None:
                    q.bias = child.bias
                setattr(parent, name, q)


def bnb_042_matmul_4bit(torch) -> None:
    """bitsandbytes 0.42.0's ``MatMul4Bit`` (``bitsandbytes/autograd/_functions.py``
    lines 494-548 of the 0.42.0 tag), ported over the installed release's
    ``dequantize_4bit`` and put in place of ``bnb.matmul_4bit`` (which
    ``Linear4bit.forward`` calls): the forward dequantizes the weight, runs
    ``F.linear`` and, when any of its inputs needs a gradient, keeps
    ``ctx.tensors = (A, B)``, an attribute autograd does not release after the
    node's backward (0.43.2, #1270, made it keep ``(None, B)`` for a frozen
    weight); the backward dequantizes again for ``grad_A``. The kernels are
    the CPU's, the saved and held tensors those of 0.42.0."""
    import bitsandbytes as bnb
    from bitsandbytes import functional as F

    class MatMul4Bit(torch.autograd.Function):
        @staticmethod
        def forward(ctx, A, B, out=None, bias=None, quant_state=None):
            output = torch.nn.functional.linear(
                A, F.dequantize_4bit(B, quant_state).to(A.dtype), bias)
            ctx.state = quant_state
            ctx.dtype_bias = None if bias is None else bias.dtype
            ctx.tensors = (A, B) if any(ctx.needs_input_grad[:2]) else (None, None)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            req_grad_a, _, _, req_grad_bias, _ = ctx.needs_input_grad
            _, B = ctx.tensors
            grad_a = grad_bias = None
            if req_grad_bias:
                grad_bias = grad_output.sum(0, dtype=ctx.dtype_bias)
            if req_grad_a:
                grad_a = torch.matmul(grad_output,
                                      F.dequantize_4bit(B, ctx.state).to(grad_output.dtype))
            return grad_a, None, None, grad_bias, None

    def matmul_4bit(A, B, quant_state, out=None, bias=None):
        return MatMul4Bit.apply(A, B, out, bias, quant_state)

    bnb.matmul_4bit = matmul_4bit


def apply_nf4_torchao(torch, model, layers) -> None:
    """torchtune's QLoRA linears in place of the decoder layers' nn.Linear
    (see ``nf4_torchao_specs``); everything else frozen."""
    import importlib
    nf4 = importlib.import_module("torchao.quantization.quantize_.workflows.nf4.nf4_tensor")
    # torchtune 0.6.1 imports torchao.dtypes.nf4tensor, which torchao 0.18 moved.
    sys.modules.setdefault("torchao.dtypes.nf4tensor", nf4)
    from torchtune.modules.low_precision import FrozenNF4Linear
    from torchtune.modules.peft import LoRALinear
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if not isinstance(child, torch.nn.Linear):
                    continue
                w = child.weight.detach()
                if name in ("q_proj", "v_proj"):
                    new = LoRALinear(child.in_features, child.out_features, rank=8, alpha=16,
                                     dropout=0.0, use_bias=False, quantize_base=True)
                    new.lora_a.to(w.dtype)
                    new.lora_b.to(w.dtype)
                else:
                    new = FrozenNF4Linear(child.in_features, child.out_features, bias=False,
                                          dtype=w.dtype)
                new.weight = torch.nn.Parameter(nf4.to_nf4(w), requires_grad=False)
                setattr(parent, name, new)
    trainable = {p.dtype for p in model.parameters() if p.requires_grad}
    assert len(trainable) == 1, trainable


def for_causal_lm_loss_448(torch):
    """transformers 4.48.1's ``ForCausalLMLoss`` (``transformers/loss/loss_utils.py``
    of the 4.48.1 wheel), ported verbatim: the logits upcast, then the shifted
    logits copied (``logits[..., :-1, :].contiguous()``) instead of the labels
    padded and shifted as transformers does now."""
    from transformers.loss.loss_utils import fixed_cross_entropy

    def loss(logits, labels, vocab_size, num_items_in_batch=None, ignore_index=-100, **kwargs):
        logits = logits.float()
        labels = labels.to(logits.device)
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        shift_logits = shift_logits.view(-1, vocab_size)
        shift_labels = shift_labels.view(-1)
        shift_labels = shift_labels.to(shift_logits.device)
        return fixed_cross_entropy(shift_logits, shift_labels, num_items_in_batch, ignore_index, **kwargs)

    return loss


def torchtitan_op_policy(torch):
    """torchtitan's per-op SAC policy (torchtitan/distributed/activation_checkpoint.py,
    ``_get_default_save_ops`` and ``SelectiveAC._wrap_block``'s ``wrapped_policy``,
    commit b5bcd76): save the outputs of the compute-intensive ops
    (``get_default_op_list().compute_intensive_ops``: mm, addmm, bmm, the sdpa
    flash/efficient kernels...), the cudnn and math sdpa, ``aten.max``,
    ``aten.linear`` and ``aten.topk``, except every second mm/linear (counted per
    checkpointed call, forward and recompute separately); recompute everything
    else. On CPU sdpa runs ``aten._scaled_dot_product_flash_attention_for_cpu``,
    which torchtitan does not list (it lists the CUDA kernels): added here the
    way the CUDA ones are listed."""
    from torch._functorch.partitioners import get_default_op_list
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    aten = torch.ops.aten
    save_ops = {op.default for op in get_default_op_list().compute_intensive_ops}
    save_ops.update({aten._scaled_dot_product_cudnn_attention.default,
                     aten._scaled_dot_product_attention_math.default,
                     aten._scaled_dot_product_fused_attention_overrideable.default,
                     aten.max.default, aten.linear.default, aten.topk.default,
                     aten._scaled_dot_product_flash_attention_for_cpu.default})
    mm_ops = (aten.mm.default, aten.linear.default)

    def custom_policy():
        meta = {"forward_mm_count": 0, "recompute_mm_count": 0}

        def policy(ctx, func, *args, **kwargs):
            key = ("recompute" if ctx.is_recompute else "forward") + "_mm_count"
            if func in mm_ops:
                meta[key] += 1
            if func in save_ops:
                if func in mm_ops and meta[key] % 2 == 0:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE
        return policy

    return lambda: create_selective_checkpoint_contexts(custom_policy())


def apply_recompute(torch, model, layers, sp) -> None:
    """``full``: HF gradient checkpointing of every decoder layer (non-reentrant);
    with ``every`` N only the layers whose 1-based position is a multiple of N
    (torchtune training/activations.py ``checkpoint_wrapper._count % every_x_layer
    == 0``; torchtitan's layer SAC ``_layer_sac_count % ac_freq == 0``): the other
    layers' ``gradient_checkpointing`` flag is turned back off. ``op``: HF's
    checkpointing with torchtitan's per-op policy as ``context_fn``."""
    if sp["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": sp.get("reentrant", False)})
        every = sp.get("every", 1)
        for i, layer in enumerate(layers):
            if (i + 1) % every != 0:
                layer.gradient_checkpointing = False
    elif sp["recompute"] == "op":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={
            "use_reentrant": False, "context_fn": torchtitan_op_policy(torch)})


def chunked_loss_step(torch, model, lm_head, ids, n, ignore_cache):
    """torchtune's step with ``num_output_chunks`` n (recipes/full_finetune_single_device.py
    ``_loss_step``): the decoder's hidden states after the final norm, the output
    projection per chunk (modules/transformer.py ``chunked_output``:
    ``[self.output(chunk) for chunk in h.chunk(n, dim=1)]``), labels shifted outside
    the model (``torch.hstack((labels[..., 1:], ignore_labels_cache[:B]))``) and
    ``CEWithChunkedOutputLoss`` (modules/loss/ce_chunked_output_loss.py, loaded from
    the installed torchtune file), then ``del logits``."""
    import importlib.util
    # torchtune's package __init__ needs torchao pieces not installed here: load the
    # loss file itself (it imports only torch).
    root = Path(importlib.util.find_spec("torchtune").submodule_search_locations[0])
    path = root / "modules" / "loss" / "ce_chunked_output_loss.py"
    spec_ = importlib.util.spec_from_file_location("ce_chunked_output_loss", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    loss_fn = module.CEWithChunkedOutputLoss(num_output_chunks=n)

    def step():
        h = model.model(input_ids=ids).last_hidden_state
        logits = [lm_head(chunk) for chunk in h.chunk(n, dim=1)]
        del h
        labels = torch.hstack((ids[..., 1:], ignore_cache[: ids.shape[0]]))
        loss = loss_fn(logits, labels)
        del logits, labels
        return loss
    return step


def cce_loss_step(torch, model, lm_head, ids, enter_loss):
    """Apple's cut-cross-entropy 25.1.1 on the decoder's hidden states
    (cut_cross_entropy/linear_cross_entropy.py ``linear_cross_entropy(e, c,
    targets, shift=...)``, the labels shifted inside), with
    ``impl="torch_compile"`` (torch_compile.py: ``logits = e @ c.T`` and
    ``F.cross_entropy(logits.float(), ...)`` under ``torch.compile``): the
    implementation CCE names for machines without its Triton kernel ("CCE does
    not support MacOS. Please use torch_compile"); the default ``cce`` needs CUDA.
    ``enter_loss`` closes the forward phase when the hidden states are ready
    (``lm_head`` itself never runs)."""
    from cut_cross_entropy import linear_cross_entropy

    def step():
        h = model.model(input_ids=ids).last_hidden_state
        enter_loss()
        loss = linear_cross_entropy(h, lm_head.weight, ids, impl="torch_compile", shift=1)
        del h
        return loss
    return step


# ---------------------------------------------------------------------------
# Activation offloading (--offload-activations)
# ---------------------------------------------------------------------------
MIN_OFFLOAD_SIZE = 1024  # torchtune OffloadActivations(min_offload_size=1024)


def offload_hooks(torch, np, decoder, host):
    """torchtune's ``OffloadActivations`` (torchtune/training/_activation_offloading.py,
    0.6.1) without streams (``use_streams=False``: there is no CUDA stream on CPU),
    installed the way torchtune's recipes use it: a ``saved_tensors_hooks`` context
    around the decoder only (embeddings, layers, final norm), so the output head and
    the loss save their tensors normally (torchtune: ``NoOpManager`` on ``model.output``
    and the loss outside the context).

    ``pack_tensor``'s rule, exactly: a saved tensor is offloaded when
    ``element_size() * nelement() >= min_offload_size`` and it is neither an
    ``nn.Parameter`` nor an ``nn.Buffer`` (views of parameters, ``weight.t()``, are
    offloaded too); each pack is its own copy. The copy goes to numpy memory, which
    torch's CPU allocator (and so the profiler) never sees: on CPU the host and the
    device are one allocator, numpy stands for the host. ``unpack`` brings the copy
    back with a torch allocation (``.to("cuda")`` in torchtune). ``host["bytes"]``
    keeps the host bytes live, ``host["peak"]`` their maximum."""
    def pack(t):
        nbytes = t.element_size() * t.nelement()
        if nbytes < MIN_OFFLOAD_SIZE or isinstance(t, (torch.nn.Parameter, torch.nn.Buffer)):
            return (False, t)
        raw = np.empty(nbytes, dtype=np.uint8)
        copy = torch.from_numpy(raw).view(t.dtype).view(t.shape)
        copy.copy_(t)
        host["bytes"] += nbytes
        host["peak"] = max(host["peak"], host["bytes"])
        return (True, copy, nbytes)

    def unpack(packed):
        if not packed[0]:
            return packed[1]
        host["bytes"] -= packed[2]
        return packed[1].clone()

    ctx = {"hooks": None}

    def pre(mod, args, kwargs):
        ctx["hooks"] = torch.autograd.graph.saved_tensors_hooks(pack, unpack)
        ctx["hooks"].__enter__()

    def post(mod, args, kwargs, out):
        ctx["hooks"].__exit__(None, None, None)

    return [decoder.register_forward_pre_hook(pre, with_kwargs=True),
            decoder.register_forward_hook(post, with_kwargs=True, always_call=True)]


# ---------------------------------------------------------------------------
# Worker: one fixture, in a fresh process
# ---------------------------------------------------------------------------
LAYER_RE = re.compile(r"(^|\.)(layers|h|layer)\.(\d+)(\.|$)")


def layer_pattern(path: str) -> str:
    return LAYER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}.*{m.group(4)}", path)


def resolve_dims(cfg) -> dict:
    cfg = getattr(cfg, "vision_config", cfg)   # CLIP's classifier runs its vision tower
    g = lambda *ks: next((getattr(cfg, k) for k in ks if getattr(cfg, k, None) is not None), None)  # noqa: E731
    h = g("hidden_size", "n_embd")
    a = g("num_attention_heads", "n_head")
    f = g("intermediate_size", "n_inner")
    if f is None and cfg.model_type == "gpt2":
        f = 4 * h
    return {"hidden_size": h, "intermediate_size": f, "num_attention_heads": a,
            "num_key_value_heads": g("num_key_value_heads") or a,
            "head_dim": g("head_dim") or (h // a if a else None), "vocab_size": g("vocab_size"),
            "num_hidden_layers": g("num_hidden_layers", "n_layer"),
            "tie_word_embeddings": bool(getattr(cfg, "tie_word_embeddings", False))}


def live_tensor_storages(torch) -> dict[int, int]:
    """data_ptr -> nbytes of the unique CPU storages of every tensor gc reaches."""
    gc.collect()
    out = {}
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor) and o.device.type == "cpu":
                st = o.untyped_storage()
                if st.nbytes():
                    out[st.data_ptr()] = st.nbytes()
        except Exception:
            pass
    return out


def storage_bytes(tensors) -> dict[int, int]:
    out = {}
    for t in tensors:
        inner = getattr(t, "__tensor_flatten__", None)
        if inner is not None and type(t).__name__ == "NF4Tensor":
            # a wrapper subclass: its bytes are its inner tensors'
            names, _ = inner()
            out.update(storage_bytes(getattr(t, n) for n in names))
            continue
        st = t.untyped_storage()
        out[st.data_ptr()] = st.nbytes()
    return out


def walk_tree(roots):
    """Yield (node, ancestors list) depth first, children in order."""
    stack = [(r, ()) for r in reversed(roots)]
    while stack:
        node, anc = stack.pop()
        yield node, anc
        kids = node.children
        if kids:
            a2 = anc + (node,)
            stack.extend((c, a2) for c in reversed(kids))


def worker(sid: str) -> dict:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import AutoConfig
    transformers.logging.set_verbosity_error()
    sp = next(s for s in specs() if s["id"] == sid)
    if sp.get("shift_copy"):
        import transformers.loss.loss_utils as loss_utils
        loss_utils.LOSS_MAPPING["ForCausalLM"] = for_causal_lm_loss_448(torch)
    torch.set_num_threads(sp["threads"])
    model_type, config = MODELS[sp["model"]]
    torch.manual_seed(0)
    cfg = AutoConfig.for_model(model_type, **config)
    cfg.use_cache = False
    model = task_class(sp.get("task"), cfg, transformers).from_config(
        cfg, attn_implementation=sp["attn"])
    # amp-bf16: fp32 weights, the forward (the model's loss inside it) under
    # torch.autocast, as accelerate's prepare_model wraps it (below).
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "amp-bf16": torch.float32}[sp["dtype"]]
    # peft's prepare_model_for_kbit_training runs on a model loaded (and
    # quantized) in bf16, and upcasts what is not 4-bit to fp32 after.
    model.to(torch.bfloat16 if sp.get("kbit_prep") else dtype).train()
    hf = model
    if sp.get("nf4_torchao"):
        apply_nf4_torchao(torch, model, list(hf.model.layers))
    if sp.get("bnb_042"):
        bnb_042_matmul_4bit(torch)
    if sp.get("bnb_nf4"):
        # transformers' bnb_4bit_compute_dtype: TRL ties it to the load dtype.
        apply_bnb_nf4(torch, list(hf.model.layers),
                      dtype if sp.get("trl_adapters") else torch.bfloat16,
                      double_quant=not sp.get("trl_adapters"))
        if sp.get("kbit_prep"):
            # What peft's QLoRA guides (and TRL's experimental ORPO/CPO trainers) run.
            from peft import prepare_model_for_kbit_training
            prepare_model_for_kbit_training(hf, use_gradient_checkpointing=False)
            assert {p.dtype for p in hf.parameters() if p.dtype.is_floating_point} == {torch.float32}
    if sp.get("lora"):
        model = apply_lora(model, sp["lora"], torch, cast=sp.get("trl_adapters", False))
    if hasattr(hf, "model") and hasattr(hf.model, "layers"):
        apply_recompute(torch, model, list(hf.model.layers), sp)
    elif sp["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if sp["dtype"] == "amp-bf16" or sp.get("autocast"):
        wrap_forward_like_accelerate(torch, model, cuda_policy=sp.get("cuda_autocast", False))
    opt_cls, opt_kw = OPTIMIZERS[sp["opt"]]
    if sp["opt"] == "galore8bit-perlayer":
        optimizer = galore_per_layer(model, torch)
    elif sp.get("in_bwd"):
        optimizer = OptimizerInBackward(model, getattr(torch.optim, opt_cls), opt_kw)
    else:
        optimizer = getattr(torch.optim, opt_cls)(model.parameters(), **opt_kw)
    if model_type in VISION:
        # fp32 pixels, as an image processor returns them; one label per image
        vision = getattr(cfg, "vision_config", cfg)
        ids = torch.randn(sp["B"], vision.num_channels, vision.image_size, vision.image_size)
        labels = torch.randint(0, cfg.num_labels, (sp["B"],))
    else:
        ids = torch.randint(0, cfg.vocab_size, (sp["B"], sp["S"]))
        labels = task_labels(sp.get("task"), torch, ids)
    host = {"bytes": 0, "peak": 0}
    if sp.get("offload"):
        import numpy as np
        offload_hooks(torch, np, model.model if hasattr(model, "model") else model.transformer, host)

    names = {id(p): n for n, p in model.named_parameters()}
    if hasattr(hf, "model") and hasattr(hf.model, "layers"):
        layers = list(hf.model.layers)
    elif hasattr(hf, "transformer"):
        layers = list(hf.transformer.h)
    elif model_type == "clip":  # the vision tower's vision_model.encoder.layers
        layers = list(hf.vision_model.encoder.layers)
    elif model_type in VISION or model_type in ("mamba", "mamba2"):  # vit.layers, backbone.layers
        layers = list(getattr(hf, hf.base_model_prefix).layers)
    else:  # an encoder: bert.encoder.layer, roberta.encoder.layer
        layers = list(getattr(hf, hf.base_model_prefix).encoder.layer)
    # The module whose output is the logits: lm_head, the masked-LM decoder, a classifier.
    lm_head = hf.get_output_embeddings() or hf.classifier

    # -- instrumentation shared by steps 3 and 4 -----------------------------------
    state = {"phase": None, "rf": None, "logits_ptr": None, "labels": False}
    enter = torch.ops.profiler._record_function_enter_new
    leave = torch.ops.profiler._record_function_exit

    def mark(name):
        leave(enter(name, None))

    def phase_begin(name):
        state["phase"] = name
        state["rf"] = enter("phase:" + name, None)

    def phase_end():
        leave(state["rf"])
        state["rf"] = None

    def first_tensor(x):
        if isinstance(x, torch.Tensor):
            return x
        if isinstance(x, (tuple, list)):
            for y in x:
                t = first_tensor(y)
                if t is not None:
                    return t
        return getattr(x, "last_hidden_state", None) if x is not None else None

    handles = []
    mod_rf = {}

    def mod_pre(name):
        def hook(mod, args):
            mod_rf.setdefault(name, []).append(enter("module:" + name, None))
        return hook

    def mod_post(name):
        def hook(mod, args, out):
            st = mod_rf.get(name)
            if st:
                leave(st.pop())
        return hook

    for name, mod in model.named_modules():
        if name:
            handles.append(mod.register_forward_pre_hook(mod_pre(name)))
            handles.append(mod.register_forward_hook(mod_post(name), always_call=True))

    def layer_pre(i):
        def hook(mod, args, kwargs):
            if state["phase"] == "forward":
                mark(f"mark:fwd_enter:{i}")
                h = args[0] if args else kwargs.get("hidden_states")
                if isinstance(h, torch.Tensor) and h.requires_grad:
                    h.register_hook(lambda g, i=i: mark(f"mark:bwd_exit:{i}"))
            elif state["phase"] == "backward":
                mark(f"mark:recompute_enter:{i}")
        return hook

    def layer_post(i):
        def hook(mod, args, kwargs, out):
            if state["phase"] == "forward":
                mark(f"mark:fwd_exit:{i}")
                h = first_tensor(out)
                if isinstance(h, torch.Tensor) and h.requires_grad:
                    h.register_hook(lambda g, i=i: mark(f"mark:bwd_enter:{i}"))
            elif state["phase"] == "backward":
                mark(f"mark:recompute_exit:{i}")
        return hook

    for i, lay in enumerate(layers):
        # registered after the module-range hooks: the pre mark is inside module:<layer>
        handles.append(lay.register_forward_pre_hook(layer_pre(i), with_kwargs=True))
        handles.append(lay.register_forward_hook(layer_post(i), with_kwargs=True))

    def lm_head_post(mod, args, out):
        # runs after lm_head's module-range hook: close "forward", open "loss"
        if state["phase"] == "forward":
            state["logits_ptr"] = out.untyped_storage().data_ptr()
            phase_end()
            phase_begin("loss")

    handles.append(lm_head.register_forward_hook(lm_head_post))

    chunked_step = None
    if sp.get("chunked"):
        ignore_cache = torch.full((sp["B"], 1), -100, dtype=ids.dtype)
        chunked_step = chunked_loss_step(torch, model, lm_head, ids, sp["chunked"], ignore_cache)
    if sp.get("cce"):
        def enter_loss():
            if state["phase"] == "forward":
                phase_end()
                phase_begin("loss")
        chunked_step = cce_loss_step(torch, model, lm_head, ids, enter_loss)

    def one_step():
        phase_begin("forward")
        if chunked_step is not None:
            loss = chunked_step()
        else:
            if model_type in VISION:
                outputs = model(pixel_values=ids, labels=labels)
            else:
                outputs = model(input_ids=ids, labels=labels)
            loss = outputs.loss
            if sp.get("carry_outputs"):
                # `outputs = model(**batch)` in the loop's scope: the
                # previous step's outputs die only now, as it is rebound.
                state["carried"] = outputs
            if not sp.get("keep_outputs"):
                del outputs
        phase_end()
        phase_begin("backward")
        loss.backward()
        del loss
        grads = {}
        for p in model.parameters():
            if p.grad is not None:
                grads[p.grad.untyped_storage().data_ptr()] = names[id(p)]
        mark("mark:after_backward")
        phase_end()
        phase_begin("optimizer")
        optimizer.step()
        phase_end()
        phase_begin("zero_grad")
        optimizer.zero_grad(set_to_none=True)
        phase_end()
        state["phase"] = None
        # --keep-outputs: the loop body of accelerate's examples (a
        # `training_step` function) holds `outputs` until it returns.
        outputs = None  # noqa: F841
        return grads

    for warm in range(2):
        if warm == 1 and (sp["opt"] == "galore8bit-perlayer" or sp.get("carry_outputs")):
            # GaLoreAdamW8bit replaces p.data by a clone every step: the old
            # storage is freed in the next step, and the profiler's reporter
            # reports the free of a block only if it saw its allocation while
            # profiling. Profiling step 2 too puts those clones in its table,
            # so their frees in step 3 are seen (as frees of blocks that
            # existed before step 3, counted in baseline_bytes). The same
            # for --carry-outputs: step 2's outputs are freed in step 3.
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
                one_step()
        else:
            one_step()

    # -- baseline ------------------------------------------------------------------
    live0 = live_tensor_storages(torch)
    base_params = storage_bytes(model.parameters())
    base_bufs = {k: v for k, v in storage_bytes(model.buffers()).items() if k not in base_params}
    st_tensors = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    base_states = storage_bytes(st_tensors)
    base_ids = storage_bytes([ids, labels])
    known = {**base_params, **base_bufs, **base_states, **base_ids}
    baseline_bytes = sum(live0.values())
    baseline = {"parameters": sum(base_params.values()), "buffers": sum(base_bufs.values()),
                "optimizer_states": sum(base_states.values()), "inputs": sum(base_ids.values()),
                "other": sum(v for k, v in live0.items() if k not in known),
                "known_not_found": sum(v for k, v in known.items() if k not in live0)}

    def profiled_step():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            grads = one_step()
        return prof, grads

    # -- step 3: the measured step -------------------------------------------------
    prof3, grads3 = profiled_step()
    end_live = sum(live_tensor_storages(torch).values())

    # -- step 4: same, plus tracker and labelling hooks ----------------------------
    saved_ptrs: dict[int, str] = {}
    stack_names = [""]

    def pack(t):
        try:
            ptr = t.untyped_storage().data_ptr()
        except Exception:
            return t
        if state["phase"] in ("forward", "loss") and ptr not in saved_ptrs:
            saved_ptrs[ptr] = state["phase"]
        return t

    tr = {"cur": 0, "peak": 0, "live": {}, "pre": set(live_tensor_storages(torch))}

    def on_free(ptr, nb):
        if tr["live"].get(ptr) == nb:
            del tr["live"][ptr]
            tr["cur"] -= nb

    class Tracker(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            res = func(*args, **(kwargs or {}))
            for r in torch.utils._pytree.tree_leaves(res):
                if isinstance(r, torch.Tensor) and r.device.type == "cpu":
                    try:
                        st = r.untyped_storage()
                    except Exception:
                        continue
                    ptr, nb = st.data_ptr(), st.nbytes()
                    if nb == 0 or ptr in tr["pre"] or ptr in tr["live"]:
                        continue
                    tr["live"][ptr] = nb
                    tr["cur"] += nb
                    weakref.finalize(st, on_free, ptr, nb)
                    if tr["cur"] > tr["peak"]:
                        tr["peak"] = tr["cur"]
            return res

    # torch.compile refuses to run under a Python dispatch mode: the
    # compiled-loss fixtures (cce) go without the cross-check tracker.
    import contextlib
    tracking = not sp.get("cce")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with Tracker() if tracking else contextlib.nullcontext():
            prof4, grads4 = profiled_step()
    gc.collect()
    tracker_end = tr["cur"]

    for h in handles:
        h.remove()

    a3 = analyse(prof3, baseline_bytes, len(layers), grads3, None, None)
    a4 = analyse(prof4, baseline_bytes, len(layers), grads4, saved_ptrs, state["logits_ptr"],
                 account=True)

    impl = a3["optimizer_ops"]
    if any("_fused_" in o for o in impl):
        implementation = "fused"
    elif any("_foreach_" in o for o in impl):
        implementation = "foreach"
    else:
        implementation = "single_tensor"

    notes = []
    if sp["model"] == "gpt2-dropout":
        notes.append("dropout 0.1 (resid, embd, attn): CPU F.dropout keeps a mask in the activation dtype")
    if sp.get("chunked"):
        notes.append(f"torchtune chunked output + CEWithChunkedOutputLoss({sp['chunked']}): labels shifted "
                     "outside the model, the loss run on hidden states from model.model")
    if sp.get("cce"):
        notes.append("cut-cross-entropy linear_cross_entropy(h, lm_head.weight, ids, impl='torch_compile', "
                     "shift=1) on hidden states from model.model: Inductor-compiled on CPU")
    if sp.get("shift_copy"):
        notes.append("transformers 4.48.1's ForCausalLMLoss (ported): fp32 upcast, then the shifted logits "
                     "copied (logits[..., :-1, :].contiguous())")
    if sp.get("carry_outputs"):
        notes.append("accelerate's example loop as written (outputs = model(**batch) in the loop's own "
                     "scope): the previous step's outputs stay referenced until the next forward "
                     "returns and rebinds the variable; the measured step starts with them alive")
    elif sp.get("keep_outputs"):
        notes.append("accelerate-style loop: outputs (the logits) referenced until the step returns, "
                     "through backward, optimizer.step() and zero_grad()")
    if sp.get("bnb_042"):
        notes.append("bitsandbytes 0.42.0's MatMul4Bit, ported (bnb_042_matmul_4bit): ctx.tensors = (A, B) "
                     "for every 4-bit linear whose input needs a gradient, held until the graph dies")
    if sp.get("nf4_torchao"):
        notes.append("torchtune 0.6.1 LoRALinear(quantize_base=True) on q_proj/v_proj (r 8, alpha 16), "
                     "FrozenNF4Linear elsewhere in the layers; torchao 0.18 NF4Tensor weights (linear_nf4: "
                     "weight.to(dtype) in forward and backward)")
    if sp.get("every"):
        notes.append(f"checkpointing only layers whose 1-based index is a multiple of {sp['every']}")
    if sp["recompute"] == "op":
        notes.append("torchtitan per-op SAC (every second mm saved, sdpa saved; CPU flash sdpa op added "
                     "to the save list), HF non-reentrant checkpoint with context_fn")
    if sp["recompute"] == "full" and sp.get("reentrant"):
        notes.append("reentrant checkpointing (use_reentrant=True) of every decoder layer: CheckpointFunction "
                     "re-runs the whole layer in backward; layer forward hooks re-fire there "
                     "(recompute_enter/exit marks)")
    elif sp["recompute"] == "full":
        notes.append("non-reentrant checkpointing of every decoder layer; layer forward hooks re-fire "
                     "inside the backward (recompute_enter/exit marks)")
    if sp["attn"] == "sdpa" and sp["model"] != "gpt2-dropout":
        notes.append("sdpa on CPU: _scaled_dot_product_flash_attention_for_cpu")
    if sp["attn"] == "sdpa" and sp["model"] == "gpt2-dropout":
        notes.append("sdpa with attention dropout: CPU math backend")

    if sp.get("in_bwd"):
        # the steps run inside backward: read the implementation from the ops there
        impl = {o for o in a3.get("backward_ops", [])}
        implementation = "foreach" if any("_foreach_" in o for o in impl) else "single_tensor"
        notes.append("optimizer in backward (torchtune optimizer_in_bwd): one optimizer per "
                     "parameter, step() and zero_grad() in a post-accumulate-grad hook")
    if sp["opt"] == "galore8bit-perlayer":
        notes.append("per-layer GaLore: GaLoreAdamW8bit (rank 64, update_proj_gap 200, scale 0.25, std) "
                     "for the attn/mlp linear weights, bnb Adam8bit for the rest, one per parameter in "
                     "post-accumulate-grad hooks; step 3 does not recompute the projection (SVD)")
    opt_info = {"name": opt_cls.lower(), "foreach": opt_kw.get("foreach"), "fused": opt_kw.get("fused"),
                "momentum": opt_kw.get("momentum"), "lr": opt_kw["lr"], "implementation": implementation}
    params = sum(p.numel() for p in model.parameters())
    fx = {
        "id": sid, "model": sp["model"], "model_type": model_type,
        "config": {"model_type": model_type, **config},
        "dims": resolve_dims(model.config),
        "dtype": sp["dtype"], "attention": sp["attn"], "batch": sp["B"], "seq_len": sp["S"],
        "optimizer": opt_info, "recompute": sp["recompute"],
        "parameters": params, "parameter_bytes": baseline["parameters"],
        "baseline_bytes": baseline_bytes, "baseline": baseline,
        **{k: a3[k] for k in ("peak_bytes", "peak_phase", "peak_layer", "peak_op", "phases", "layers",
                              "grad_bytes", "end_bytes", "events", "outside_phase_bytes",
                              "unmatched_frees")},
        "allocator_counter_check": a3["counter_check"],
        "end_live_bytes": end_live,
        "tracker_peak_bytes": baseline_bytes + tr["peak"] if tracking else None,
        "tracker_gap_bytes": a4["peak_bytes"] - (baseline_bytes + tr["peak"]) if tracking else None,
        "tracker_end_delta": tracker_end,
        "labelled_step_peak_bytes": a4["peak_bytes"],
        "alive_at_peak_by_phase": a3["alive_by_phase"],
        "alive_at_peak_by_category": a4["alive_by_category"],
        "alive_at_peak": a4["alive_groups"],
        "alive_at_peak_rest": a4["alive_rest"],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        **({"bitsandbytes": __import__("bitsandbytes").__version__} if sp.get("bnb_nf4") else {}),
        **({"bitsandbytes_matmul_4bit": "0.42.0 (ported)"} if sp.get("bnb_042") else {}),
        "notes": notes,
    }
    if sp.get("trainmem_flags"):
        fx["trainmem_flags"] = sp["trainmem_flags"]
    if sp.get("reentrant"):
        fx["reentrant"] = True
        fx["trainmem_flags"] = fx.get("trainmem_flags", []) + ["--recompute-reentrant"]
    if sp.get("lora"):
        fx["lora"] = sp["lora"]
        fx["trainmem_flags"] = fx.get("trainmem_flags", []) + lora_flags(sp["lora"])
    if sp["opt"] == "galore8bit-perlayer":
        fx["trainmem_flags"] = fx.get("trainmem_flags", []) + [
            "--optimizer-option", f"rank={GALORE_PER_LAYER['rank']}",
            "--optimizer-option", "adamw_embeddings=true"]
    if sp.get("in_bwd"):
        fx["optimizer_in_backward"] = True
        fx["trainmem_flags"] = fx.get("trainmem_flags", []) + ["--optimizer-in-backward"]
    if sp.get("offload"):
        fx["trainmem_flags"] = fx.get("trainmem_flags", []) + ["--offload-activations"]
        fx["offload_host_peak_bytes"] = host["peak"]
        fx["notes"].append("torchtune OffloadActivations(use_streams=False) around the decoder; "
                           "saved tensors of >= 1024 bytes that are not parameters or buffers are "
                           "copied to numpy memory (the host) and cloned back in backward")
    return fx


def analyse(prof, baseline, n_layers, grads, saved_ptrs, logits_ptr, account=False) -> dict:
    roots = prof.profiler.kineto_results.experimental_event_tree()
    mem = []      # (t, order, delta, ptr, alloc_id, ancestors)
    ranges = {}   # phase -> (start, end)
    marks = []    # (t, name)
    spans = []    # (start, end, kind, name): module ranges and autograd nodes
    reported = []  # the reporter's own running total after each event, in tree order
    order = 0
    for node, anc in walk_tree(roots):
        order += 1
        name = node.name
        if name == "[memory]":
            ef = node.extra_fields
            if str(ef.device).startswith("cpu"):
                mem.append((node.start_time_ns, order, ef.alloc_size, ef.ptr, None, anc))
                reported.append(ef.total_allocated)
        elif name.startswith("phase:"):
            ranges[name[6:]] = (node.start_time_ns, node.end_time_ns)
        elif name.startswith("mark:"):
            marks.append((node.start_time_ns, name[5:]))
        elif name.startswith("module:"):
            spans.append((node.start_time_ns, node.end_time_ns, "module", name[7:]))
        elif name.startswith("autograd::engine::evaluate_function: "):
            spans.append((node.start_time_ns, node.end_time_ns, "node", name.split(": ", 1)[1]))
    # Cross-check of the ordering and of the API: the reporter's own counter
    # (``total_allocated``, 0 when the first profiling session of the process
    # starts) must equal the cumulative sum of alloc_size in time order.
    rep = {e[1]: r for e, r in zip(mem, reported)}
    mem.sort(key=lambda e: (e[0], e[1]))
    cum, counter_mismatch = 0, 0
    first_offset = None
    for e in mem:
        cum += e[2]
        if first_offset is None:
            first_offset = rep[e[1]] - cum
        if rep[e[1]] - cum != first_offset:
            counter_mismatch += 1
    # Match each free to the allocation of its pointer (``allocation_id`` is only
    # filled in with record_shapes=True): a pointer is live once at a time. The
    # allocation's id is its index in ``mem``.
    live_ptr = {}
    unmatched_frees = 0
    for k, e in enumerate(mem):
        if e[2] > 0:
            live_ptr[e[3]] = k
            mem[k] = (e[0], e[1], e[2], e[3], k, e[5])
        else:
            a = live_ptr.pop(e[3], None)
            if a is None or mem[a][2] != -e[2]:
                unmatched_frees += 1
            mem[k] = (e[0], e[1], e[2], e[3], a, e[5])
    times = [e[0] for e in mem]
    totals = []
    cur = baseline
    for e in mem:
        cur += e[2]
        totals.append(cur)

    import bisect

    def total_at(t):  # after all events with time <= t
        i = bisect.bisect_right(times, t)
        return totals[i - 1] if i else baseline

    def peak_between(t0, t1):
        i0, i1 = bisect.bisect_left(times, t0), bisect.bisect_right(times, t1)
        best = total_at(t0)
        for k in range(i0, i1):
            best = max(best, totals[k])
        return best

    def phase_of(t):
        for p, (a, b) in ranges.items():
            if a <= t <= b:
                return p
        return "outside"

    phases = []
    for p in PHASES:
        if p not in ranges:
            continue
        a, b = ranges[p]
        i0, i1 = bisect.bisect_left(times, a), bisect.bisect_right(times, b)
        phases.append({"name": p, "start_bytes": total_at(a - 1), "peak_bytes": peak_between(a, b),
                       "end_bytes": total_at(b),
                       "allocated_bytes": sum(mem[k][2] for k in range(i0, i1) if mem[k][2] > 0),
                       "freed_bytes": -sum(mem[k][2] for k in range(i0, i1) if mem[k][2] < 0)})
    outside = sum(e[2] for e in mem if phase_of(e[0]) == "outside")

    mk: dict[str, list] = {}
    for t, n in sorted(marks):
        mk.setdefault(n, []).append(t)

    def m(kind, i, which=0):
        ts = mk.get(f"{kind}:{i}")
        return ts[which] if ts and len(ts) > which else None

    fwd, bwd = [], []
    for i in range(n_layers):
        a, b = m("fwd_enter", i), m("fwd_exit", i)
        if a is not None and b is not None:
            fwd.append({"layer": i, "enter_bytes": total_at(a), "exit_bytes": total_at(b),
                        "peak_bytes": peak_between(a, b)})
    for i in reversed(range(n_layers)):
        a, b = m("bwd_enter", i), m("bwd_exit", i)
        if a is None or b is None:
            continue
        row = {"layer": i, "enter_bytes": total_at(a), "exit_bytes": total_at(b),
               "peak_bytes": peak_between(a, b)}
        ra, rb = m("recompute_enter", i), m("recompute_exit", i)
        if ra is not None and rb is not None:
            row["recompute_enter_bytes"] = total_at(ra)
            row["recompute_exit_bytes"] = total_at(rb)
        bwd.append(row)

    k_peak = max(range(len(totals)), key=lambda k: (totals[k], -k)) if totals else None
    peak = totals[k_peak] if totals else baseline
    t_peak = mem[k_peak][0] if totals else None
    peak_phase = phase_of(t_peak) if totals else None
    peak_layer = None
    if peak_phase == "forward":
        for r in fwd:
            a, b = m("fwd_enter", r["layer"]), m("fwd_exit", r["layer"])
            if a <= t_peak <= b:
                peak_layer = r["layer"]
    elif peak_phase == "backward":
        for i in range(n_layers):
            a, b = m("bwd_enter", i), m("bwd_exit", i)
            if a is not None and b is not None and a <= t_peak <= b:
                peak_layer = i

    # Module and autograd node by time (innermost enclosing span): the tree's
    # nesting of user ranges is not reliable while a Python dispatch mode is active.
    span_idx = {}
    for kind in ("module", "node"):
        sp = sorted((a, b, n) for a, b, k, n in spans if k == kind)
        span_idx[kind] = ([x[0] for x in sp], sp)

    def innermost(kind, t):
        starts, sp = span_idx[kind]
        i = bisect.bisect_right(starts, t) - 1
        while i >= 0:
            a, b, n = sp[i]
            if b >= t:
                return n
            i -= 1
        return None

    def describe(e):
        op = kernel = None
        for a in e[5]:
            n = a.name
            if n.startswith("aten::") or n.startswith("profiler::"):
                if op is None:
                    op = n
                kernel = n
        return op, kernel, innermost("module", e[0]), innermost("node", e[0])

    peak_op = None
    if totals:
        op, kernel, module, node = describe(mem[k_peak])
        peak_op = {"op": op, "kernel": kernel, "module": module, "autograd_node": node,
                   "bytes": mem[k_peak][2]}

    # allocations alive at the peak
    alive = {}
    freed_at = {}
    for k, e in enumerate(mem):
        if e[2] > 0:
            alive[e[4]] = k
        else:
            freed_at[e[4]] = k
    alive_now = [mem[k] for aid, k in alive.items()
                 if k <= k_peak and freed_at.get(aid, 10**18) > k_peak] if totals else []
    by_phase = {}
    for e in alive_now:
        p = phase_of(e[0])
        by_phase[p] = by_phase.get(p, 0) + e[2]

    # optimizer implementation: ops seen in the optimizer phase
    opt_ops = set()
    if "optimizer" in ranges:
        a, b = ranges["optimizer"]
        for node, anc in walk_tree(roots):
            if node.name.startswith("aten::") and a <= node.start_time_ns <= b:
                opt_ops.add(node.name)

    out = {"peak_bytes": peak, "peak_phase": peak_phase, "peak_layer": peak_layer, "peak_op": peak_op,
           "phases": phases, "layers": {"forward": fwd, "backward": bwd},
           "end_bytes": totals[-1] if totals else baseline, "events": len(mem),
           "outside_phase_bytes": outside, "alive_by_phase": by_phase,
           "unmatched_frees": unmatched_frees,
           "counter_check": {"offset": first_offset, "mismatches": counter_mismatch},
           "optimizer_ops": sorted(opt_ops)}
    if "backward" in ranges:
        a, b = ranges["backward"]
        out["backward_ops"] = sorted({node.name for node, _ in walk_tree(roots)
                                      if node.name.startswith("aten::_foreach_")
                                      and a <= node.start_time_ns <= b})

    # gradients: the allocation holding each .grad pointer at the end of the backward
    t_bwd_end = ranges.get("backward", (0, 0))[1]
    k_bwd_end = bisect.bisect_right(times, t_bwd_end) - 1

    by_ptr: dict[int, list] = {}
    for k, e in enumerate(mem):
        by_ptr.setdefault(e[3], []).append(k)

    def holder_fast(ptr, k_at):
        best = None
        for k in by_ptr.get(ptr, ()):
            if k > k_at:
                break
            best = mem[k][4] if mem[k][2] > 0 else None
        return best

    grad_aids = {}
    for ptr, pname in grads.items():
        aid = holder_fast(ptr, k_bwd_end)
        if aid is not None:
            grad_aids[aid] = pname
    aid_size = {e[4]: e[2] for e in mem if e[2] > 0}
    out["grad_bytes"] = sum(aid_size[a] for a in grad_aids)

    if account and totals:
        t_fwd_end = ranges["loss"][1]
        k_fwd_end = bisect.bisect_right(times, t_fwd_end) - 1
        saved_aids = set()
        for ptr in (saved_ptrs or {}):
            aid = holder_fast(ptr, k_fwd_end)
            if aid is not None:
                saved_aids.add(aid)
        t_lm = ranges["forward"][1]
        k_lm = bisect.bisect_right(times, t_lm) - 1
        logits_aid = holder_fast(logits_ptr, k_lm) if logits_ptr is not None else None
        groups = {}
        cats = {}
        for e in alive_now:
            aid = e[4]
            op, kernel, module, node = describe(e)
            if aid in grad_aids:
                cat = "grad"
                what = grad_aids[aid]
            elif aid == logits_aid:
                cat = "logits"
                what = None
            elif aid in saved_aids:
                cat = "saved"
                what = None
            else:
                cat = "other"
                what = None
            p = phase_of(e[0])
            key = (cat, p, layer_pattern(module or ""), layer_pattern(what) if what else None,
                   op, kernel, node, e[2])
            g = groups.setdefault(key, 0)
            groups[key] = g + 1
            cats[cat] = cats.get(cat, 0) + e[2]
        rows = []
        for (cat, p, module, what, op, kernel, node, nb), cnt in groups.items():
            rows.append({"category": cat, "phase": p, "module": module or None, "param": what,
                         "op": op, "kernel": kernel, "autograd_node": node, "bytes": nb,
                         "count": cnt, "total_bytes": nb * cnt})
        rows.sort(key=lambda r: (-r["total_bytes"], r["phase"], str(r["module"]), str(r["op"])))
        out["alive_groups"] = rows[:ALIVE_GROUPS]
        rest = rows[ALIVE_GROUPS:]
        out["alive_rest"] = {"groups": len(rest), "bytes": sum(r["total_bytes"] for r in rest)}
        out["alive_by_category"] = cats
    return out


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
def dump(fx: dict) -> str:
    """2-space JSON, keys sorted, one list entry per line for the long lists."""
    long = ("phases", "alive_at_peak")
    body = {k: ("@@" + k) if k in long else v for k, v in fx.items()}
    layers = fx["layers"]
    body["layers"] = {"forward": "@@fwd", "backward": "@@bwd"}
    text = json.dumps(body, indent=2, sort_keys=True)
    for key, v in (("phases", fx["phases"]), ("alive_at_peak", fx["alive_at_peak"]),
                   ("fwd", layers["forward"]), ("bwd", layers["backward"])):
        ind = "      " if key in ("fwd", "bwd") else "    "
        close = "    ]" if key in ("fwd", "bwd") else "  ]"
        lines = ",\n".join(ind + json.dumps(x, sort_keys=True) for x in v)
        text = text.replace(f'"@@{key}"', "[\n" + lines + "\n" + close if v else "[]")
    return text + "\n"


def mib(n):
    return f"{n / 2**20:.2f}"


def summary() -> int:
    rows = []
    for p in sorted(FIXTURES_DIR.glob("*.json")):
        fx = json.loads(p.read_text())
        rows.append(fx)
    hdr = (f"{'id':<56} {'baseline':>9} {'peak':>9} {'phase':>9} {'layer':>5} "
           f"{'+fwd':>8} {'+loss':>8} {'+bwd':>8} {'+opt':>8} {'tracker':>9} {'gap':>7}")
    print("MiB (2^20 bytes); +phase = bytes allocated in that phase and alive at the peak "
          "(peak - baseline split by phase)")
    print(hdr)
    for fx in rows:
        bp = fx["alive_at_peak_by_phase"]
        lay = fx["peak_layer"]
        print(f"{fx['id']:<56} {mib(fx['baseline_bytes']):>9} {mib(fx['peak_bytes']):>9} "
              f"{fx['peak_phase']:>9} {'' if lay is None else lay:>5} "
              f"{mib(bp.get('forward', 0)):>8} {mib(bp.get('loss', 0)):>8} "
              f"{mib(bp.get('backward', 0)):>8} {mib(bp.get('optimizer', 0)):>8} "
              f"{mib(fx['tracker_peak_bytes'] or 0):>9} {mib(fx['tracker_gap_bytes'] or 0):>7}")
    print(f"{len(rows)} fixtures")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="measure only the ids containing this substring")
    ap.add_argument("--list", action="store_true", help="print the ids and exit")
    ap.add_argument("--summary", action="store_true", help="print a table of the fixtures and exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        fx = worker(args.worker)
        sys.stdout.write("@@FIXTURE@@" + json.dumps(fx) + "\n")
        return 0
    if args.summary:
        return summary()
    all_specs = specs()
    ids = [s["id"] for s in all_specs]
    assert len(ids) == len(set(ids)), "duplicate fixture ids"
    todo = [s for s in all_specs if not args.only or args.only in s["id"]]
    if args.list:
        print("\n".join(s["id"] for s in todo))
        return 0
    FIXTURES_DIR.mkdir(parents=True, exist_ok=True)
    if not args.only:
        for p in FIXTURES_DIR.glob("*.json"):
            p.unlink()
    t0 = time.time()
    failed = []
    for i, sp in enumerate(todo, 1):
        t = time.time()
        r = subprocess.run([sys.executable, __file__, "--worker", sp["id"]], capture_output=True,
                           text=True)
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@FIXTURE@@")), None)
        if r.returncode or line is None:
            err = (r.stderr.strip().splitlines() or ["?"])[-1]
            failed.append((sp["id"], err))
            print(f"[{i}/{len(todo)}] {sp['id']}: FAILED {err}", flush=True)
            continue
        fx = json.loads(line[len("@@FIXTURE@@"):])
        (GAPS_DIR if sp.get("gap") else FIXTURES_DIR).joinpath(f"{sp['id']}.json").write_text(dump(fx))
        print(f"[{i}/{len(todo)}] {sp['id']}: baseline {fx['baseline_bytes']} peak {fx['peak_bytes']} "
              f"({fx['peak_phase']}, layer {fx['peak_layer']}) tracker {fx['tracker_peak_bytes']} "
              f"step4 {fx['labelled_step_peak_bytes']} end-live {fx['end_bytes'] - fx['end_live_bytes']} "
              f"{time.time() - t:.1f}s", flush=True)
    print(f"{len(todo) - len(failed)} fixtures written in {time.time() - t0:.0f}s; "
          f"{len(failed)} failed", flush=True)
    for sid, err in failed:
        print(f"  FAILED {sid}: {err}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
