#!/usr/bin/env python3
"""Measure CPU training steps of model code other than transformers (issue 24).

The same measurement as ``tools/measure_timeline.py`` (torch's profiler on
CPU, every allocation and free of one step, the baseline from a gc scan of
the live tensors; its ``analyse`` is reused), with the model and the loop of
another implementation; fixtures go to ``tests/fixtures/timeline/`` with
``trainmem_flags`` naming ``--implementation`` (and ``--keep-outputs`` where
the loop keeps its logits), and ``config`` a transformers config.json of the
same architecture, which is what trainmem reads.

Pinned (the venv of the measurement): torch 2.15.0 (CPU), transformers
5.24.0, litgpt 0.5.13, torchtune 0.6.1, torchao 0.18.0 (torchtune 0.6.1
imports ``torchao.dtypes.nf4tensor``, which torchao 0.18 moved to
``torchao.quantization.quantize_.workflows.nf4.nf4_tensor``: aliased in
``measure_timeline.apply_nf4_torchao``), torchtitan 0.2.2 (the PyPI wheel,
``pip install --no-deps torchtitan==0.2.2`` plus its ``tensorboard``
dependency, which ``torchtitan.components.metrics`` imports; the whole
package imports, no stubs). torchtitan 0.3.0 (with ``spmd_types==0.2.3`` and
``torch_checkpointing``) imports too, but its language models accept only
``flex`` or ``varlen`` attention (``models/common/config_utils.py``
``get_attention_config``: "sdpa is no longer supported for language
models"), both behind ``torch.compile``; 0.2.2 is the last release whose
Llama 3 runs eagerly with sdpa (its default ``attn_type``), so it is the
one measured.

litgpt (``lit-*`` ids): ``litgpt.GPT(Config(...))`` (``litgpt/model.py``),
``.to(dtype)``, called as ``fabric.setup(model)`` wraps it (``fabric_forward``:
the logits come back as Fabric's fp32 copy), the step of
``litgpt/finetune/full.py`` ``fit``::

    logits = model(input_ids)
    loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
    loss.backward()                       # fabric.backward on one CPU device
    optimizer.step(); optimizer.zero_grad()

``logits`` stays referenced until the step returns (``--keep-outputs``).
``recompute full``: ``apply_activation_checkpointing`` on every ``Block``
(non-reentrant ``checkpoint_wrapper``), what litgpt's FSDP strategy does with
``activation_checkpointing_policy={Block}``. Input ids [B, S] random,
targets = ids.

torchtune (``tt-*`` ids, ``torchtune_worker``): its own Llama 3 builder of the
same shape and the step of ``recipes/full_finetune_single_device.py`` with
``CEWithChunkedOutputLoss`` (8 output chunks), ``--implementation torchtune
--loss chunked:8``.

torchtitan (``titan-*`` ids, ``torchtitan_worker``): 0.2.2's own Llama 3
(``torchtitan/models/llama3/model/model.py``) of the same shape (and with a
512-token vocabulary, ``titan-llama-v512``, where the layers rather than the
loss make the peak) and the step of ``torchtitan/train.py``: the fp32 loss on
the whole logits, ``del pred`` before backward, ``clip_grad_norm_``, fused
AdamW (torchtitan's default ``implementation``); ``recompute`` none, full
(``apply_ac`` mode full) or op (mode selective, option op, Llama 3's
``_op_sac_save_list`` as shipped), ``--implementation torchtitan``.

    /work/venv/bin/python tools/measure_implementations.py [--only SUBSTRING]
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_timeline as mt  # noqa: E402

LIT_LLAMA = dict(n_layer=4, n_embd=256, n_head=8, n_query_groups=4, intermediate_size=704,
                 vocab_size=4096, padded_vocab_size=4096, block_size=1024, bias=False,
                 norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP", rotary_percentage=1.0,
                 parallel_residual=False, norm_eps=1e-5)
HF_LLAMA = {"model_type": "llama", **mt.LLAMA}
# Phi-2's layout (litgpt/config.py "phi-2"): parallel residual with one shared
# LayerNorm, partial rotary 0.4, biases, lm_head bias, tanh GELU MLP.
LIT_PHI = dict(n_layer=4, n_embd=256, n_head=8, n_query_groups=8, intermediate_size=1024,
               vocab_size=4096, padded_vocab_size=4096, block_size=1024, bias=True,
               lm_head_bias=True, norm_class_name="LayerNorm", mlp_class_name="GptNeoxMLP",
               gelu_approximate="tanh", rotary_percentage=0.4, parallel_residual=True,
               shared_attention_norm=True, norm_eps=1e-5)
HF_PHI = {"model_type": "phi", "hidden_size": 256, "intermediate_size": 1024,
          "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
          "partial_rotary_factor": 0.4, "vocab_size": 4096, "max_position_embeddings": 1024,
          "hidden_act": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0,
          "attention_dropout": 0.0, "layer_norm_eps": 1e-5}
MODELS = {"lit-llama": (LIT_LLAMA, HF_LLAMA), "lit-phi": (LIT_PHI, HF_PHI)}


def specs() -> list[dict]:
    s = []
    for model in ("lit-llama", "lit-phi"):
        for dtype, recompute, B, S in (("fp32", "none", 2, 128), ("bf16", "none", 2, 128),
                                       ("bf16", "full", 1, 512), ("fp32", "full", 1, 512)):
            sid = f"{model}__{dtype}__adamw__sdpa__{recompute}__b{B}s{S}__litgpt-full"
            s.append({"id": sid, "model": model, "dtype": dtype, "recompute": recompute,
                      "B": B, "S": S})
    # finetune/lora.py: LoRA r 8 on the query and value of the fused qkv, the
    # head in 128-position chunks (lm_head_chunk_size=128)
    # (recompute full: what litgpt's FSDP strategy and `--train.activation_checkpointing`
    # wrap, every Block; dropout 0.05: one nn.Dropout on the fused qkv input);
    # with lora_head: true (``qvh``, the config hub's phi-2, tiny-llama and gemma
    # LoRA runs) the head's LoRALinear too, in each chunk, in the model's dtype
    lora_steps = {
        "qv": (("lit-llama", "bf16", "none", 2, 256, 0.0), ("lit-llama", "bf16", "none", 1, 512, 0.0),
               ("lit-llama", "fp32", "none", 2, 256, 0.0), ("lit-phi", "bf16", "none", 2, 256, 0.0),
               ("lit-llama", "bf16", "full", 1, 512, 0.0), ("lit-llama", "fp32", "full", 2, 256, 0.0),
               ("lit-llama", "bf16", "none", 1, 512, 0.05), ("lit-phi", "bf16", "full", 2, 256, 0.05),
               # the twins of qvh steps
               ("lit-llama", "bf16", "none", 2, 256, 0.05), ("lit-phi", "bf16", "none", 2, 256, 0.05)),
        "qvh": (("lit-llama", "bf16", "none", 2, 256, 0.05), ("lit-llama", "bf16", "none", 1, 512, 0.0),
                ("lit-llama", "fp32", "none", 2, 256, 0.05), ("lit-phi", "bf16", "none", 2, 256, 0.05),
                ("lit-llama", "bf16", "full", 1, 512, 0.05), ("lit-phi", "bf16", "full", 2, 256, 0.0)),
    }
    for targets, steps in lora_steps.items():
        for model, dtype, recompute, B, S, p in steps:
            drop = f"-d{p}" if p else ""
            sid = f"{model}__{dtype}__adamw__sdpa__{recompute}__b{B}s{S}__litgpt-lora-{targets}-r8{drop}"
            s.append({"id": sid, "model": model, "dtype": dtype, "recompute": recompute, "B": B,
                      "S": S, "lora": True, "lora_dropout": p, "lora_head": targets == "qvh"})
    # finetune/lora.py with --quantize bnb.nf4 / bnb.nf4-dq: Lightning's
    # BitsandbytesPrecision on every nn.Linear (head included), quantized on
    # the CPU as its _Linear4bit.quantize does on CUDA; the optimizer built
    # over model.parameters(), then wte replaced by bitsandbytes'
    # StableEmbedding (trainable, in no optimizer: its gradient stays across
    # steps, and the optimizer keeps the old embedding). torch AdamW, not
    # PagedAdamW (bitsandbytes' paged buffers are CUDA managed memory).
    for model, dtype, recompute, B, S, quant in (
            ("lit-llama", "bf16", "none", 1, 512, "nf4"), ("lit-llama", "bf16", "none", 2, 256, "nf4-dq"),
            ("lit-llama", "bf16", "full", 1, 512, "nf4"), ("lit-llama", "fp32", "none", 2, 256, "nf4")):
        sid = f"{model}__{dtype}__adamw__sdpa__{recompute}__b{B}s{S}__litgpt-qlora-{quant}-qv-r8"
        s.append({"id": sid, "model": model, "dtype": dtype, "recompute": recompute, "B": B,
                  "S": S, "lora": True, "lora_dropout": 0.0, "quantize": quant})
    # The loop as litgpt writes it (``fit``: ``logits = model(...)`` in the
    # loop body, ``loss`` rebound to a float with ``log_interval`` 1): the
    # step before's logits, and what its graph holds, die only as this
    # forward returns (``__carry-outputs``); bitsandbytes 0.42.0's
    # MatMul4Bit (ported, ``mt.bnb_042_matmul_4bit``) holds each 4-bit
    # linear's input in that graph (``__bnb-0.42``).
    for quant, bnb_042, carry in ((None, False, True), ("nf4-dq", True, False),
                                  ("nf4-dq", True, True), ("nf4-dq", False, True)):
        kind = f"litgpt-qlora-{quant}-qv-r8" if quant else "litgpt-lora-qv-r8"
        sid = (f"lit-llama__bf16__adamw__sdpa__none__b2s256__{kind}"
               + ("__bnb-0.42" if bnb_042 else "") + ("__carry-outputs" if carry else ""))
        s.append({"id": sid, "model": "lit-llama", "dtype": "bf16", "recompute": "none", "B": 2,
                  "S": 256, "lora": True, "lora_dropout": 0.0, "carry": carry,
                  **({"quantize": quant} if quant else {}), **({"bnb_042": True} if bnb_042 else {})})
    # torchtune (``tt-*`` ids): ``torchtune.models.llama3.llama3`` of the same
    # shape, the full_finetune_single_device step with CEWithChunkedOutputLoss
    for dtype, recompute, B, S in (("fp32", "none", 2, 128), ("bf16", "none", 2, 128),
                                   ("bf16", "full", 1, 512), ("fp32", "full", 1, 512)):
        sid = f"tt-llama__{dtype}__adamw__sdpa__{recompute}__b{B}s{S}__torchtune-full-chunked8"
        s.append({"id": sid, "model": "tt-llama", "dtype": dtype, "recompute": recompute,
                  "B": B, "S": S, "torchtune": True})
    # torchtitan (``titan-*`` ids): its own Llama 3 of the same shape and the
    # step of ``torchtitan/train.py`` (0.2.2)
    for dtype, recompute, B, S in (("fp32", "none", 2, 128), ("bf16", "none", 2, 128),
                                   ("bf16", "full", 1, 512), ("fp32", "full", 1, 512),
                                   ("bf16", "op", 1, 512), ("fp32", "op", 1, 512)):
        sid = f"titan-llama__{dtype}__adamw-fused__sdpa__{recompute}__b{B}s{S}__torchtitan"
        s.append({"id": sid, "model": "titan-llama", "dtype": dtype, "recompute": recompute,
                  "B": B, "S": S, "torchtitan": True})
    # vocabulary 512: the layers' saved tensors, not the loss, make the peak
    # ("mixed-bf16", "none") and ("mixed-bf16", "full") (torchtitan's single-device
    # autocast) measured 77649072 and 58920048 bytes, trainmem -3.71% and -0.35%:
    # under autocast each linear casts its fp32 input to bf16 separately (q, k, v
    # and w1, w3 each save their own copy), which trainmem's mixed-bf16 does not
    # price yet (transformers' modules too); not kept as fixtures until it does.
    for dtype, recompute in (("bf16", "none"), ("fp32", "none"), ("bf16", "op"),
                             ("bf16", "full")):
        sid = f"titan-llama-v512__{dtype}__adamw-fused__sdpa__{recompute}__b1s512__torchtitan"
        s.append({"id": sid, "model": "titan-llama-v512", "dtype": dtype,
                  "recompute": recompute, "B": 1, "S": 512, "torchtitan": True})
    return s


def torchtune_worker(sp: dict) -> dict:
    """torchtune 0.6.1's ``recipes/full_finetune_single_device.py`` step on
    its own Llama 3 (``torchtune.models.llama3.llama3``: ``TransformerDecoder``,
    ``MultiHeadAttention`` with separate q/k/v projections, ``RMSNorm``,
    ``RotaryPositionalEmbeddings``, ``FeedForward``), ``set_num_output_chunks(8)``
    with ``CEWithChunkedOutputLoss`` (the recipes' default loss)::

        logits = model(tokens)          # a list of 8 chunks
        labels = torch.hstack((labels[..., 1:], ignore_labels_cache[:B]))
        loss = loss_fn(logits, labels)
        del logits
        loss.backward(); optimizer.step(); optimizer.zero_grad(set_to_none=True)

    ``recompute full``: what ``training.set_activation_checkpointing(model,
    auto_wrap_policy={TransformerSelfAttentionLayer})`` runs
    (``apply_activation_checkpointing`` with ``ModuleWrapPolicy``, non-reentrant)."""
    warnings.filterwarnings("ignore")
    import importlib
    import torch
    from torch.profiler import ProfilerActivity, profile
    nf4 = importlib.import_module("torchao.quantization.quantize_.workflows.nf4.nf4_tensor")
    sys.modules.setdefault("torchao.dtypes.nf4tensor", nf4)  # torchtune 0.6.1 vs torchao 0.18
    from torchtune.models.llama3 import llama3
    from torchtune.modules import TransformerSelfAttentionLayer
    from torchtune.modules.loss import CEWithChunkedOutputLoss
    torch.set_num_threads(1)
    torch.manual_seed(0)
    hf = HF_LLAMA
    model = llama3(vocab_size=hf["vocab_size"], num_layers=hf["num_hidden_layers"],
                   num_heads=hf["num_attention_heads"], num_kv_heads=hf["num_key_value_heads"],
                   embed_dim=hf["hidden_size"], max_seq_len=hf["max_position_embeddings"],
                   intermediate_dim=hf["intermediate_size"])
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[sp["dtype"]]
    model.to(dtype).train()
    loss_fn = CEWithChunkedOutputLoss()
    model.set_num_output_chunks(loss_fn.num_output_chunks)
    if sp["recompute"] == "full":
        # torchtune.training.set_activation_checkpointing is exactly this
        # (torchtune/training/activations.py); importing torchtune.training
        # fails against torchao 0.18 (TensorCoreTiledLayout moved).
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            apply_activation_checkpointing)
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        apply_activation_checkpointing(
            model, auto_wrap_policy=ModuleWrapPolicy({TransformerSelfAttentionLayer}))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    ids = torch.randint(0, hf["vocab_size"], (sp["B"], sp["S"]))
    ignore = torch.full((sp["B"], 1), loss_fn.ignore_index, dtype=ids.dtype)
    names = {id(p): n for n, p in model.named_parameters()}
    enter = torch.ops.profiler._record_function_enter_new
    leave = torch.ops.profiler._record_function_exit
    state = {"rf": None, "phase": None, "chunks": 0}

    def phase_begin(name):
        state["phase"] = name
        state["rf"] = enter("phase:" + name, None)

    def phase_end():
        leave(state["rf"])

    def head_post(mod, args, out):
        state["chunks"] += 1
        if state["phase"] == "forward" and state["chunks"] == loss_fn.num_output_chunks:
            phase_end()
            phase_begin("loss")

    model.output.register_forward_hook(head_post)

    def one_step():
        state["chunks"] = 0
        phase_begin("forward")
        logits = model(ids)
        labels = torch.hstack((ids[..., 1:], ignore))
        loss = loss_fn(logits, labels)
        del logits
        phase_end()
        phase_begin("backward")
        loss.backward()
        del loss
        grads = {p.grad.untyped_storage().data_ptr(): names[id(p)]
                 for p in model.parameters() if p.grad is not None}
        phase_end()
        phase_begin("optimizer")
        optimizer.step()
        phase_end()
        phase_begin("zero_grad")
        optimizer.zero_grad(set_to_none=True)
        phase_end()
        return grads

    for _ in range(2):
        one_step()
    gc.collect()
    live0 = mt.live_tensor_storages(torch)
    baseline_bytes = sum(live0.values())
    params = mt.storage_bytes(model.parameters())
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        grads = one_step()
    end_live = sum(mt.live_tensor_storages(torch).values())
    a = mt.analyse(prof, baseline_bytes, hf["num_hidden_layers"], grads, None, None)
    return {
        "id": sp["id"], "model": sp["model"], "model_type": "llama", "config": hf,
        "implementation": "torchtune",
        "dtype": sp["dtype"], "attention": "sdpa", "batch": sp["B"], "seq_len": sp["S"],
        "optimizer": {"name": "adamw", "foreach": False, "fused": None, "momentum": None,
                      "lr": 1e-4, "implementation": "single_tensor"},
        "recompute": sp["recompute"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": sum(params.values()),
        "baseline_bytes": baseline_bytes,
        **{k: a[k] for k in ("peak_bytes", "peak_phase", "peak_layer", "peak_op", "phases", "layers", "events",
                             "grad_bytes", "end_bytes", "outside_phase_bytes", "unmatched_frees")},
        "allocator_counter_check": a["counter_check"],
        "end_live_bytes": end_live,
        "alive_at_peak_by_phase": a["alive_by_phase"],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__, "torchtune": "0.6.1",
        "notes": ["torchtune full_finetune_single_device step: logits = model(tokens) (8 output "
                  "chunks), CEWithChunkedOutputLoss (each chunk upcast to fp32), del logits "
                  "before backward"]
                 + (["training.set_activation_checkpointing(TransformerSelfAttentionLayer), "
                     "non-reentrant"] if sp["recompute"] == "full" else []),
        "trainmem_flags": ["--implementation", "torchtune", "--loss", "chunked:8"],
    }


def torchtitan_worker(sp: dict) -> dict:
    """torchtitan 0.2.2's step (``torchtitan/train.py`` ``Trainer.forward_backward_step``
    and ``train_step``, lines 481-604) on its own Llama 3
    (``torchtitan/models/llama3/model/model.py``: ``Transformer`` with separate
    ``wq``/``wk``/``wv``, ``nn.RMSNorm``, complex RoPE ``apply_rotary_emb``,
    ``ScaledDotProductAttentionWrapper`` with ``enable_gqa``)::

        pred = model(inputs)                 # labels are the shifted tokens
        loss_sum = cross_entropy_loss(pred, labels)   # pred.flatten(0, 1).float()
        loss = loss_sum / global_valid_tokens
        del pred                             # "free pred before bwd"
        loss.backward()
        clip_grad_norm_(params, max_norm=1.0)          # foreach get_total_norm
        optimizer.step()                     # AdamW, implementation "fused"

    torchtitan calls ``optimizers.zero_grad()`` at the start of the next step;
    here it closes the step (the gradients are freed before the next forward
    either way). ``recompute full``: ``apply_ac`` with ``mode = "full"``
    (``ptd_checkpoint_wrapper`` on every ``TransformerBlock``, non-reentrant,
    ``torchtitan/distributed/activation_checkpoint.py``). ``recompute op``:
    ``mode = "selective"``, ``selective_ac_option = "op"`` with the Llama 3
    ``_op_sac_save_list`` (``models/llama3/infra/parallelize.py``), unchanged:
    it lists the CUDA sdpa kernels, so on CPU
    ``aten._scaled_dot_product_flash_attention_for_cpu`` is recomputed.
    The model is cast whole to the dtype (``model.to(dtype)``); torchtitan's
    single-device default is ``torch.autocast`` over fp32 weights
    (``maybe_enable_amp``), with FSDP2 a bf16 ``MixedPrecisionPolicy``."""
    warnings.filterwarnings("ignore")
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torchtitan.components.loss import cross_entropy_loss
    from torchtitan.config.job_config import ActivationCheckpoint
    from torchtitan.distributed.activation_checkpoint import apply_ac
    from torchtitan.distributed.utils import clip_grad_norm_
    from torchtitan.models.llama3.infra.parallelize import _op_sac_save_list
    from torchtitan.models.llama3.model.args import TransformerModelArgs
    from torchtitan.models.llama3.model.model import Transformer
    torch.set_num_threads(1)
    torch.manual_seed(0)
    hf = {"titan-llama": HF_LLAMA, "titan-llama-v512": {**HF_LLAMA, "vocab_size": 512}}[sp["model"]]
    # FeedForward: int(2 * 4 * dim / 3) = 682 rounded up to multiple_of 64 = 704
    args = TransformerModelArgs(dim=hf["hidden_size"], n_layers=hf["num_hidden_layers"],
                                n_heads=hf["num_attention_heads"],
                                n_kv_heads=hf["num_key_value_heads"], vocab_size=hf["vocab_size"],
                                multiple_of=64, max_seq_len=sp["S"], attn_type="sdpa")
    model = Transformer(args)
    with torch.no_grad():  # as train.py does after materializing the meta model
        model.init_weights()
    # mixed-bf16: torchtitan's single-device default, fp32 weights under
    # torch.autocast(bf16) around the forward and the loss (maybe_enable_amp)
    autocast = sp["dtype"] == "mixed-bf16"
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16,
             "mixed-bf16": torch.float32}[sp["dtype"]]
    model.to(dtype).train()
    # Module.to casts the complex64 RoPE buffer to a real dtype (discarding
    # its imaginary part); torchtitan never casts it: rebuild it in complex64
    model.freqs_cis = model._precompute_freqs_cis()
    if sp["recompute"] != "none":
        ac = ActivationCheckpoint(mode="full" if sp["recompute"] == "full" else "selective",
                                  selective_ac_option="op")
        apply_ac(model, ac, op_sac_save_list=_op_sac_save_list)
    params = [p for p in model.parameters()]
    optimizer = torch.optim.AdamW(params, lr=8e-4, betas=(0.9, 0.95), eps=1e-8,
                                  weight_decay=0.1, fused=True)
    ids = torch.randint(0, hf["vocab_size"], (sp["B"], sp["S"]))
    labels = torch.randint(0, hf["vocab_size"], (sp["B"], sp["S"]))
    global_valid_tokens = torch.tensor(float(sp["B"] * sp["S"]))
    names = {id(p): n for n, p in model.named_parameters()}
    enter = torch.ops.profiler._record_function_enter_new
    leave = torch.ops.profiler._record_function_exit
    state = {"rf": None, "phase": None}

    def phase_begin(name):
        state["phase"] = name
        state["rf"] = enter("phase:" + name, None)

    def phase_end():
        leave(state["rf"])

    def head_post(mod, args, out):
        if state["phase"] == "forward":
            phase_end()
            phase_begin("loss")

    model.output.register_forward_hook(head_post)

    def one_step():
        phase_begin("forward")
        with (torch.autocast("cpu", dtype=torch.bfloat16) if autocast
              else contextlib.nullcontext()):
            pred = model(ids)
            loss_sum = cross_entropy_loss(pred, labels)
            loss = loss_sum / global_valid_tokens
        del pred
        phase_end()
        phase_begin("backward")
        loss.backward()
        del loss, loss_sum
        grads = {p.grad.untyped_storage().data_ptr(): names[id(p)]
                 for p in model.parameters() if p.grad is not None}
        phase_end()
        phase_begin("optimizer")
        clip_grad_norm_(params, 1.0, foreach=True)
        optimizer.step()
        phase_end()
        phase_begin("zero_grad")
        optimizer.zero_grad(set_to_none=True)
        phase_end()
        return grads

    for _ in range(2):
        one_step()
    gc.collect()
    live0 = mt.live_tensor_storages(torch)
    baseline_bytes = sum(live0.values())
    pbytes = mt.storage_bytes(model.parameters())
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        grads = one_step()
    end_live = sum(mt.live_tensor_storages(torch).values())
    a = mt.analyse(prof, baseline_bytes, hf["num_hidden_layers"], grads, None, None)
    flags = ["--implementation", "torchtitan"]
    return {
        "id": sp["id"], "model": sp["model"], "model_type": "llama", "config": hf,
        "implementation": "torchtitan",
        "dtype": sp["dtype"], "attention": "sdpa", "batch": sp["B"], "seq_len": sp["S"],
        "optimizer": {"name": "adamw", "foreach": False, "fused": True, "momentum": None,
                      "lr": 8e-4, "implementation": "fused"},
        "recompute": sp["recompute"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": sum(pbytes.values()),
        "baseline_bytes": baseline_bytes,
        **{k: a[k] for k in ("peak_bytes", "peak_phase", "peak_layer", "peak_op", "phases", "layers", "events",
                             "grad_bytes", "end_bytes", "outside_phase_bytes", "unmatched_frees")},
        "allocator_counter_check": a["counter_check"],
        "end_live_bytes": end_live,
        "alive_at_peak_by_phase": a["alive_by_phase"],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__, "torchtitan": "0.2.2",
        "notes": ["torchtitan 0.2.2 train.py step: pred = model(inputs); cross_entropy_loss("
                  "pred.flatten(0, 1).float(), labels, reduction='sum') / global_valid_tokens; "
                  "del pred before backward; clip_grad_norm_(max_norm=1.0, foreach); fused AdamW"]
                 + ({"full": ["apply_ac(mode='full'): ptd_checkpoint_wrapper on every "
                              "TransformerBlock, non-reentrant"],
                     "op": ["apply_ac(mode='selective', selective_ac_option='op') with llama3's "
                            "_op_sac_save_list: on CPU the sdpa kernel "
                            "(_scaled_dot_product_flash_attention_for_cpu) is not in it and is "
                            "recomputed"]}.get(sp["recompute"], [])),
        "trainmem_flags": flags,
    }


def quantize_litgpt(model, mode: str, dtype) -> None:
    """litgpt's QLoRA set-up on the CPU: ``BitsandbytesPrecision(mode, dtype)
    .convert_module`` (``_convert_layers``: every ``nn.Linear`` becomes
    ``_NF4Linear``/``_NF4DQLinear``), each weight quantized as
    ``_Linear4bit.quantize`` does (``weight.to(torch.half)``, then
    ``bnb.functional.quantize_4bit``; Lightning refuses a non-CUDA device
    there, so the same calls are made here)."""
    import bitsandbytes as bnb
    import lightning.fabric.plugins.precision.bitsandbytes as lbnb
    from lightning.fabric.plugins import BitsandbytesPrecision
    import torch
    BitsandbytesPrecision(mode, dtype).convert_module(model)
    for mod in model.modules():
        if isinstance(mod, bnb.nn.Linear4bit):
            w = mod.weight
            w4, state = bnb.functional.quantize_4bit(
                w.data.contiguous().to(torch.half), blocksize=w.blocksize,
                compress_statistics=w.compress_statistics, quant_type=w.quant_type,
                quant_storage=w.quant_storage)
            mod.weight = lbnb._replace_param(w, w4, state)
            mod.weight.bnb_quantized = True


def stable_embedding(model) -> None:
    """``finetune/lora.py`` (litgpt 0.5.0 and later; 0.5.13 lines 218-229):
    after the optimizer is built over ``model.parameters()``,
    ``transformer.wte`` becomes bitsandbytes' ``StableEmbedding``, a new
    parameter that requires grad, with the old weights, cast back to the
    model's dtype. The optimizer still holds the old, frozen embedding and
    not the new one, so the new one's gradient is never zeroed."""
    import bitsandbytes as bnb
    import torch
    old = model.transformer.wte
    new = bnb.nn.StableEmbedding(old.num_embeddings, old.embedding_dim)
    with torch.no_grad():
        new.weight.copy_(old.weight)
    model.transformer.wte = new.to(device=old.weight.device, dtype=old.weight.dtype)


def fabric_forward(model, precision):
    """The model as litgpt's scripts call it, through ``fabric.setup_module``:
    ``_FabricModule.forward`` (lightning/fabric/wrappers.py 2.6.6)
    converts the inputs, runs the module under the precision's
    ``forward_context()`` and converts the outputs with ``convert_output``,
    which casts floating tensors to ``torch.get_default_dtype()``: under
    ``bf16-true`` (``HalfPrecision``) and ``BitsandbytesPrecision`` the
    logits the loop computes its loss on are an fp32 copy. Fabric refuses
    ``BitsandbytesPrecision`` off CUDA, so the wrapper's three calls are made
    here with the precision plugin itself (the backward hook it registers
    does nothing on one device)."""
    def forward(*args, **kwargs):
        args, kwargs = precision.convert_input((args, kwargs))
        with precision.forward_context():
            output = model(*args, **kwargs)
        return precision.convert_output(output)
    return forward


def fabric_precision(sp: dict, dtype):
    """The precision plugin of ``fabric = L.Fabric(precision=...)`` for a
    spec: ``BitsandbytesPrecision(quantize[4:], dtype)`` with
    ``--quantize`` (finetune/lora.py), else ``bf16-true``'s
    ``HalfPrecision`` or ``32-true``'s ``Precision``."""
    import torch
    from lightning.fabric.plugins import BitsandbytesPrecision, HalfPrecision, Precision
    if sp.get("quantize"):
        return BitsandbytesPrecision(sp["quantize"], dtype)
    return HalfPrecision("bf16-true") if dtype == torch.bfloat16 else Precision()


def worker(sid: str) -> dict:
    warnings.filterwarnings("ignore")
    titan = next((s for s in specs() if s["id"] == sid and s.get("torchtitan")), None)
    if titan:  # without litgpt imported
        return torchtitan_worker(titan)
    import torch
    from torch.profiler import ProfilerActivity, profile
    import litgpt
    from litgpt.model import GPT, Block, Config
    from litgpt.utils import chunked_cross_entropy
    sp = next(s for s in specs() if s["id"] == sid)
    if sp.get("torchtune"):
        return torchtune_worker(sp)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lit, hf = MODELS[sp["model"]]
    if sp.get("lora"):
        from litgpt.lora import GPT as LoraGPT, Config as LoraConfig, mark_only_lora_as_trainable
        lit = dict(lit, lora_r=8, lora_alpha=16, lora_dropout=sp.get("lora_dropout", 0.0),
                   lora_query=True, lora_value=True, lora_head=sp.get("lora_head", False))
        model = LoraGPT(LoraConfig(**lit))
        mark_only_lora_as_trainable(model)
    else:
        model = GPT(Config(**lit))
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[sp["dtype"]]
    model.to(dtype).train()
    if sp.get("quantize"):
        quantize_litgpt(model, sp["quantize"], dtype)
    if sp.get("bnb_042"):
        mt.bnb_042_matmul_4bit(torch)
    if sp["recompute"] == "full":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            apply_activation_checkpointing)
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
    if sp.get("quantize"):
        # finetune/lora.py: instantiate_bnb_optimizer(optimizer, model.parameters())
        # (torch's AdamW here: PagedAdamW's buffers are CUDA managed memory),
        # then the StableEmbedding swap
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        stable_embedding(model)
    else:
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                      lr=1e-4, foreach=False)
    ids = torch.randint(0, lit["vocab_size"], (sp["B"], sp["S"]))
    targets = ids
    names = {id(p): n for n, p in model.named_parameters()}
    enter = torch.ops.profiler._record_function_enter_new
    leave = torch.ops.profiler._record_function_exit
    state = {"rf": None}

    def phase_begin(name):
        state["phase"] = name
        state["rf"] = enter("phase:" + name, None)

    def phase_end():
        leave(state["rf"])

    def head_post(mod, args, out):
        # the head's last chunk closes the forward (lm_head_chunk_size)
        state["chunks"] = state.get("chunks", 0) + 1
        if state["phase"] == "forward" and state["chunks"] == -(-sp["S"] // head_chunk):
            phase_end()
            phase_begin("loss")

    model.lm_head.register_forward_hook(head_post)

    head_chunk = 128 if sp.get("lora") else sp["S"]

    # BitsandbytesPrecision's forward_context is _DtypeContextManager(dtype):
    # the default dtype is the compute dtype while the model runs
    # (StableEmbedding's `emb.to(torch.get_default_dtype())` reads it)
    forward = fabric_forward(model, fabric_precision(sp, dtype))

    def one_step():
        state["chunks"] = 0
        phase_begin("forward")
        if sp.get("lora"):  # finetune/lora.py fit()
            logits = forward(ids, lm_head_chunk_size=128)
            if sp.get("carry"):
                # the loop's own variable: the step before's dies only now
                state["carried"] = logits
            logits[-1] = logits[-1][..., :-1, :]
            loss = chunked_cross_entropy(logits, targets[..., 1:])
        else:  # finetune/full.py fit()
            logits = forward(ids)
            loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
        phase_end()
        phase_begin("backward")
        loss.backward()
        del loss
        grads = {p.grad.untyped_storage().data_ptr(): names[id(p)]
                 for p in model.parameters() if p.grad is not None}
        phase_end()
        phase_begin("optimizer")
        optimizer.step()
        phase_end()
        phase_begin("zero_grad")
        optimizer.zero_grad(set_to_none=True)
        phase_end()
        del logits  # the loop's local dies with the step
        return grads

    for warm in range(2):
        if warm == 1 and sp.get("carry"):
            # the profiler reports the free of a block only if it saw its
            # allocation: step 2's outputs die in step 3
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
                one_step()
        else:
            one_step()
    gc.collect()
    live0 = mt.live_tensor_storages(torch)
    baseline_bytes = sum(live0.values())
    params = mt.storage_bytes(model.parameters())
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        grads = one_step()
    end_live = sum(mt.live_tensor_storages(torch).values())
    a = mt.analyse(prof, baseline_bytes, lit["n_layer"], grads, None, None)
    flags = ["--implementation", "litgpt", "--keep-outputs"]
    if sp.get("lora"):
        if sp.get("quantize"):
            flags += ["--quantize", "nf4", "--double-quant",
                      "on" if sp["quantize"].endswith("-dq") else "off"]
        targets = "q_proj,v_proj,lm_head" if sp.get("lora_head") else "q_proj,v_proj"
        flags += ["--lora-rank", "8", "--lora-targets", targets, "--lora-dropout",
                  str(sp.get("lora_dropout", 0.0)).rstrip("0").rstrip(".") or "0",
                  "--lora-dtype", sp["dtype"]]
    if sp.get("bnb_042"):
        flags += ["--bitsandbytes", "0.42.0"]
    if sp.get("carry"):
        flags += ["--carry-outputs"]
    return {
        "id": sid, "model": sp["model"], "model_type": hf["model_type"], "config": hf,
        "implementation": "litgpt", "litgpt_config": lit,
        "dtype": sp["dtype"], "attention": "sdpa", "batch": sp["B"], "seq_len": sp["S"],
        "optimizer": {"name": "adamw", "foreach": False, "fused": None, "momentum": None,
                      "lr": 1e-4, "implementation": "single_tensor"},
        "recompute": sp["recompute"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": sum(params.values()),
        "baseline_bytes": baseline_bytes,
        **{k: a[k] for k in ("peak_bytes", "peak_phase", "peak_layer", "peak_op", "phases", "layers", "events",
                             "grad_bytes", "end_bytes", "outside_phase_bytes", "unmatched_frees")},
        "allocator_counter_check": a["counter_check"],
        "end_live_bytes": end_live,
        "alive_at_peak_by_phase": a["alive_by_phase"],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__, "litgpt": "0.5.13",
        **({"lightning": __import__("lightning").__version__} if sp.get("lora") else {}),
        **({"bitsandbytes": __import__("bitsandbytes").__version__, "quantize": sp["quantize"]}
           if sp.get("quantize") else {}),
        **({"bitsandbytes_matmul_4bit": "0.42.0 (ported)"} if sp.get("bnb_042") else {}),
        "notes": (["litgpt finetune/lora.py step: litgpt.lora.GPT, mark_only_lora_as_trainable; "
                   "logits = model(ids, lm_head_chunk_size=128) (a list of 128-position chunks); "
                   "logits[-1] = logits[-1][..., :-1, :]; chunked_cross_entropy(logits, "
                   "targets[..., 1:]); logits referenced until the step returns"]
                  if sp.get("lora") else
                  ["litgpt finetune/full.py step: logits = model(ids); chunked_cross_entropy("
                   "logits[..., :-1, :], targets[..., 1:]) (128-row chunks); logits referenced "
                   "until the step returns"])
                 + ["the model called as fabric.setup wraps it (_FabricModule.forward: "
                    "convert_input, the precision's forward_context, convert_output): the "
                    "logits come back as an fp32 copy and the loss runs in fp32"]
                 + (["the loop as written: the step before's logits (and its graph) alive until this "
                     "forward returns and rebinds the variable"] if sp.get("carry") else [])
                 + (["bitsandbytes 0.42.0's MatMul4Bit, ported: ctx.tensors = (A, B) for every 4-bit "
                     "linear whose input needs a gradient, held until the graph dies"]
                    if sp.get("bnb_042") else [])
                 + (["apply_activation_checkpointing(check_fn=Block), non-reentrant"]
                    if sp["recompute"] == "full" else []),
        "trainmem_flags": flags,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.worker:
        sys.stdout.write("@@FIXTURE@@" + json.dumps(worker(args.worker)) + "\n")
        return 0
    failed = 0
    for sp in specs():
        if args.only and args.only not in sp["id"]:
            continue
        t = time.time()
        r = subprocess.run([sys.executable, __file__, "--worker", sp["id"]], capture_output=True,
                           text=True)
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@FIXTURE@@")), None)
        if r.returncode or line is None:
            failed += 1
            print(sp["id"], "FAILED", (r.stderr.strip().splitlines() or ["?"])[-1], flush=True)
            continue
        fx = json.loads(line[len("@@FIXTURE@@"):])
        (mt.FIXTURES_DIR / f"{sp['id']}.json").write_text(json.dumps(fx, indent=1) + "\n")
        print(sp["id"], fx["peak_bytes"], fx["peak_phase"], fx["peak_op"],
              fx["end_bytes"] - fx["end_live_bytes"], f"{time.time() - t:.0f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
