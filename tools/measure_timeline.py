#!/usr/bin/env python3
"""Measure the CPU memory timeline of real training steps; write test fixtures.

This is the reference side of trainmem's step timeline (``--platform cpu``):
the sequence of allocations and frees of one training step, whose maximum is
the peak. For every configuration in ``specs()`` it builds a small HuggingFace
causal LM with random weights (no hub: the config is a local dict, exactly as
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
all bf16 except Adam's fp32 ``step`` scalars), ``.train()``; ``recompute
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

Fixture id: ``<model>__<fp32|bf16>__<optimizer>__<attn>__<none|full>__b<B>s<S>[__offload]``.
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
ALIVE_GROUPS = 40
PHASES = ("forward", "loss", "backward", "optimizer", "zero_grad")

LLAMA = {"hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 4096,
         "max_position_embeddings": 1024}
QWEN2 = dict(LLAMA)  # class defaults: q/k/v biases; embeddings untied (transformers 5.24)
GPT2 = {"n_embd": 256, "n_layer": 4, "n_head": 8, "n_positions": 1024, "vocab_size": 4096,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
GPT2_DROPOUT = {**GPT2, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1}
# HuggingFaceTB/SmolLM2-135M's config.json (the fields that shape memory)
SMOLLM2_135M = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
                "max_position_embeddings": 8192, "tie_word_embeddings": True,
                "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu"}

MODELS = {  # id part -> (model_type, config)
    "llama": ("llama", LLAMA),
    "qwen2": ("qwen2", QWEN2),
    "gpt2": ("gpt2", GPT2),
    "gpt2-dropout": ("gpt2", GPT2_DROPOUT),
    "smollm2-135m": ("llama", SMOLLM2_135M),
    # small vocabulary: the loss buffers no longer dominate, the peak moves into the layers
    "llama-v512": ("llama", {**LLAMA, "vocab_size": 512}),
}

OPTIMIZERS = {  # id part -> (class, kwargs)
    "adamw": ("AdamW", {"lr": 1e-4, "foreach": False}),
    "adamw-foreach": ("AdamW", {"lr": 1e-4, "foreach": True}),
    "adamw-fused": ("AdamW", {"lr": 1e-4, "fused": True}),
    "sgd": ("SGD", {"lr": 1e-3, "momentum": 0.0, "foreach": False}),
    "sgd-m0.9": ("SGD", {"lr": 1e-3, "momentum": 0.9, "foreach": False}),
    "sgd-m0.9-foreach": ("SGD", {"lr": 1e-3, "momentum": 0.9, "foreach": True}),
}


def spec(model, dtype="fp32", opt="adamw", attn="sdpa", recompute="none", B=2, S=128, threads=1,
         offload=False):
    sid = f"{model}__{dtype}__{opt}__{attn}__{recompute}__b{B}s{S}" + (f"__t{threads}" if threads != 1 else "")
    sid += "__offload" if offload else ""
    return {"id": sid, "model": model, "dtype": dtype, "opt": opt, "attn": attn,
            "recompute": recompute, "B": B, "S": S, "threads": threads, "offload": offload}


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
    # --offload-activations: torchtune's OffloadActivations rule, packed to numpy memory
    for dtype in ("fp32", "bf16"):
        for recompute in ("none", "full"):
            s.append(spec("llama", dtype, recompute=recompute, offload=True))
            s.append(spec("llama-v512", dtype, recompute=recompute, B=1, S=512, offload=True))
    s.append(spec("qwen2", "bf16", B=1, S=512, offload=True))
    return s


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
LAYER_RE = re.compile(r"(^|\.)(layers|h)\.(\d+)(\.|$)")


def layer_pattern(path: str) -> str:
    return LAYER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}.*{m.group(4)}", path)


def resolve_dims(cfg) -> dict:
    g = lambda *ks: next((getattr(cfg, k) for k in ks if getattr(cfg, k, None) is not None), None)  # noqa: E731
    h = g("hidden_size", "n_embd")
    a = g("num_attention_heads", "n_head")
    f = g("intermediate_size", "n_inner")
    if f is None and cfg.model_type == "gpt2":
        f = 4 * h
    return {"hidden_size": h, "intermediate_size": f, "num_attention_heads": a,
            "num_key_value_heads": g("num_key_value_heads") or a,
            "head_dim": g("head_dim") or h // a, "vocab_size": g("vocab_size"),
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
    from transformers import AutoConfig, AutoModelForCausalLM
    transformers.logging.set_verbosity_error()
    sp = next(s for s in specs() if s["id"] == sid)
    torch.set_num_threads(sp["threads"])
    model_type, config = MODELS[sp["model"]]
    torch.manual_seed(0)
    cfg = AutoConfig.for_model(model_type, **config)
    cfg.use_cache = False
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=sp["attn"])
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[sp["dtype"]]
    model.to(dtype).train()
    if sp["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt_cls, opt_kw = OPTIMIZERS[sp["opt"]]
    optimizer = getattr(torch.optim, opt_cls)(model.parameters(), **opt_kw)
    ids = torch.randint(0, cfg.vocab_size, (sp["B"], sp["S"]))
    host = {"bytes": 0, "peak": 0}
    if sp.get("offload"):
        import numpy as np
        offload_hooks(torch, np, model.model if hasattr(model, "model") else model.transformer, host)

    names = {id(p): n for n, p in model.named_parameters()}
    if hasattr(model, "model") and hasattr(model.model, "layers"):
        layers = list(model.model.layers)
    else:
        layers = list(model.transformer.h)
    lm_head = model.get_output_embeddings()

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

    def one_step():
        phase_begin("forward")
        outputs = model(input_ids=ids, labels=ids)
        loss = outputs.loss
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
        return grads

    for _ in range(2):
        one_step()

    # -- baseline ------------------------------------------------------------------
    live0 = live_tensor_storages(torch)
    base_params = storage_bytes(model.parameters())
    base_bufs = {k: v for k, v in storage_bytes(model.buffers()).items() if k not in base_params}
    st_tensors = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    base_states = storage_bytes(st_tensors)
    base_ids = storage_bytes([ids])
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

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with Tracker():
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
    if sp["recompute"] == "full":
        notes.append("non-reentrant checkpointing of every decoder layer; layer forward hooks re-fire "
                     "inside the backward (recompute_enter/exit marks)")
    if sp["attn"] == "sdpa" and sp["model"] != "gpt2-dropout":
        notes.append("sdpa on CPU: _scaled_dot_product_flash_attention_for_cpu")
    if sp["attn"] == "sdpa" and sp["model"] == "gpt2-dropout":
        notes.append("sdpa with attention dropout: CPU math backend")

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
        "tracker_peak_bytes": baseline_bytes + tr["peak"],
        "tracker_gap_bytes": a4["peak_bytes"] - (baseline_bytes + tr["peak"]),
        "tracker_end_delta": tracker_end,
        "labelled_step_peak_bytes": a4["peak_bytes"],
        "alive_at_peak_by_phase": a3["alive_by_phase"],
        "alive_at_peak_by_category": a4["alive_by_category"],
        "alive_at_peak": a4["alive_groups"],
        "alive_at_peak_rest": a4["alive_rest"],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "notes": notes,
    }
    if sp.get("offload"):
        fx["trainmem_flags"] = ["--offload-activations"]
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
              f"{mib(fx['tracker_peak_bytes']):>9} {mib(fx['tracker_gap_bytes']):>7}")
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
        (FIXTURES_DIR / f"{sp['id']}.json").write_text(dump(fx))
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
