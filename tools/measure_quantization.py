#!/usr/bin/env python3
"""Measure the storage of bitsandbytes 4-bit / 8-bit base weights; write test fixtures.

This is the reference side of trainmem's QLoRA / 8-bit base-weight accounting.
Everything runs on CPU: bitsandbytes >= 0.45 ships CPU kernels for
``quantize_4bit`` and ``int8_vectorwise_quant``, and transformers can load a
``BitsAndBytesConfig`` model with ``device_map="cpu"``. The tensors that
persist are the same ones a CUDA load keeps (``Params4bit._quantize`` and
``Int8Params._quantize`` call the same functions on whatever device).

Part 1, per tensor (``tests/fixtures/quantization/tensor__<rows>x<cols>.json``)
    For each sample weight shape, a seeded random bf16 tensor is quantized

    * 4-bit: ``bitsandbytes.functional.quantize_4bit(w, blocksize, quant_type=
      "nf4"|"fp4", compress_statistics=False|True)`` (blocksize 64, plus 128
      and 32 for a few shapes; fp16/fp32 inputs for one shape);
    * 8-bit: ``bnb.nn.Linear8bitLt`` with an ``Int8Params`` weight moved with
      ``.to("cpu")``, which calls ``Int8Params._quantize`` ->
      ``bitsandbytes.functional.int8_vectorwise_quant`` (the ``Linear8bitLt``
      path transformers uses for ``load_in_8bit``).

    Every tensor that persists is recorded (role, shape, dtype, bytes =
    numel * element_size): 4-bit: packed data, ``QuantState.absmax``,
    ``QuantState.code`` and, with double quantization (``compress_statistics``),
    ``QuantState.offset``, ``state2.absmax``, ``state2.code``; 8-bit: ``CB``
    (the int8 weight, same storage as ``.data``) and ``SCB``. The sum is
    compared with the closed-form formula (``formula_bytes``), for n = numel,
    B = blocksize, nb = ceil(n / B)::

        4-bit:       ceil(n/2) + 4*nb + 64
        4-bit + DQ:  ceil(n/2) + nb + 4*ceil(nb/256) + 64 + 4 + 1024
        int8:        n + 4*rows

    (64 = the 16-entry fp32 code table, 4 = the fp32 0-d offset, 1024 = the
    256-entry fp32 dynamic code table of the nested state; ``code`` tensors are
    per-tensor copies in this bitsandbytes version, so they count per weight).
    ``cuda_alloc_bytes`` adds the CUDA caching allocator's rounding of each
    tensor to a multiple of 512 B (a derived number, not measured here).

Part 2, whole models (``tests/fixtures/quantization/model__<id>.json``)
    * ``measured`` models: a small llama/mistral/qwen2/gemma2/phi3/gpt2/
      mixtral/qwen3_moe model with random bf16 weights is saved to a temporary
      folder and loaded back with ``AutoModelForCausalLM.from_pretrained(folder,
      quantization_config=BitsAndBytesConfig(...), device_map="cpu",
      dtype=torch.bfloat16)``. For every module with parameters it records
      whether it was quantized and the bytes of every stored tensor (parameters,
      quantization state, buffers separately; shared storages counted once).
      The same config is also run through the meta-device prediction below and
      the two totals must agree (``prediction_matches``).
    * ``predicted`` presets (``presets/<name>.json``): the model is built on
      the meta device and passed through the transformers bnb quantizer's
      ``_process_model_before_weight_loading`` (``get_modules_to_not_convert``
      + ``replace_with_bnb_linear``), i.e. exactly the module replacement a real
      load does; each replaced Linear is then sized with the per-tensor formula
      and every other parameter as bf16 (``measured: false``).

    Which modules stay unquantized: ``replace_with_bnb_linear`` replaces only
    modules whose type is exactly ``nn.Linear`` (or GPT-2 ``Conv1D``) and not
    in ``modules_to_not_convert`` = ``get_keys_to_not_convert(model)`` (tied
    weights, the module of the last parameter, the output embedding, i.e.
    ``lm_head``) + ``llm_int8_skip_modules`` + ``_keep_in_fp32_modules``.
    Embeddings, norms, biases, MoE routers (custom modules) and fused 3-D MoE
    expert parameters therefore stay in the load dtype.

Run from the repository root (about 2 to 3 minutes on 2 CPU cores)::

    /work/venv/bin/python tools/measure_quantization.py

It deletes ``tests/fixtures/quantization/*.json`` and rewrites them all.
``--only SUBSTRING`` measures only ids containing SUBSTRING (keeping the
others); ``--check`` compares the byte totals with the existing fixtures and
writes nothing.

Needs: torch, transformers, bitsandbytes (no network access, no GPU).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRESETS_DIR = REPO / "presets"
FIXTURES_DIR = REPO / "tests" / "fixtures" / "quantization"

SHAPES = [[4096, 4096], [11008, 4096], [4096, 11008], [300, 77], [64, 64], [1000, 64],
          [32000, 4096], [127, 129], [1, 64], [65, 1]]
EXTRA_BLOCKSIZES = {(4096, 4096): [128], (300, 77): [32, 128], (127, 129): [128]}
EXTRA_INPUT_DTYPES = {(300, 77): ["float16", "float32"]}
CUDA_ROUND = 512
NESTED_BLOCKSIZE = 256  # quantize_4bit double-quantizes absmax with blocksize 256
CODE4_BYTES = 16 * 4    # nf4/fp4 code table: 16 fp32
OFFSET_BYTES = 4        # fp32 0-d offset
CODE8_BYTES = 256 * 4   # dynamic 8-bit code table: 256 fp32


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------

def bytes_4bit(n: int, blocksize: int = 64, double_quant: bool = True) -> int:
    nb = math.ceil(n / blocksize)
    data = math.ceil(n / 2)
    if not double_quant:
        return data + 4 * nb + CODE4_BYTES
    return (data + nb + 4 * math.ceil(nb / NESTED_BLOCKSIZE)
            + CODE4_BYTES + OFFSET_BYTES + CODE8_BYTES)


def bytes_int8(rows: int, cols: int) -> int:
    return rows * cols + 4 * rows


FORMULA_4BIT = "ceil(n/2) + 4*ceil(n/B) + 64"
FORMULA_4BIT_DQ = "ceil(n/2) + ceil(n/B) + 4*ceil(ceil(n/B)/256) + 64 + 4 + 1024"
FORMULA_INT8 = "rows*cols + 4*rows"


def tensors_4bit_formula(n: int, blocksize: int, double_quant: bool) -> list[dict]:
    """The tensors quantize_4bit keeps, sized by formula (for meta predictions)."""
    nb = math.ceil(n / blocksize)
    t = [{"role": "data", "shape": [math.ceil(n / 2), 1], "dtype": "uint8", "bytes": math.ceil(n / 2)}]
    if double_quant:
        nb2 = math.ceil(nb / NESTED_BLOCKSIZE)
        t += [{"role": "absmax", "shape": [nb], "dtype": "uint8", "bytes": nb},
              {"role": "code", "shape": [16], "dtype": "float32", "bytes": CODE4_BYTES},
              {"role": "offset", "shape": [], "dtype": "float32", "bytes": OFFSET_BYTES},
              {"role": "state2.absmax", "shape": [nb2], "dtype": "float32", "bytes": 4 * nb2},
              {"role": "state2.code", "shape": [256], "dtype": "float32", "bytes": CODE8_BYTES}]
    else:
        t += [{"role": "absmax", "shape": [nb], "dtype": "float32", "bytes": 4 * nb},
              {"role": "code", "shape": [16], "dtype": "float32", "bytes": CODE4_BYTES}]
    return t


def cuda_round(b: int) -> int:
    return max(1, math.ceil(b / CUDA_ROUND)) * CUDA_ROUND


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def _quiet():
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _dt(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _tinfo(role: str, t) -> dict:
    return {"role": role, "shape": list(t.shape), "dtype": _dt(t), "bytes": t.numel() * t.element_size()}


def quant_state_tensors(qs, prefix: str = "") -> list[tuple[str, object]]:
    """(role, tensor) for every tensor held by a bitsandbytes QuantState (recursing into state2)."""
    import torch
    out = []
    for field in ("absmax", "code", "offset"):
        v = getattr(qs, field, None)
        if isinstance(v, torch.Tensor):
            out.append((prefix + field, v))
    if getattr(qs, "state2", None) is not None:
        out += quant_state_tensors(qs.state2, prefix + "state2.")
    return out


def _load_config(raw: dict):
    from transformers import AutoConfig
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as fh:
            json.dump(raw, fh)
        return AutoConfig.from_pretrained(tmp)


def _bnb_config(method: str):
    import torch
    from transformers import BitsAndBytesConfig
    if method == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    qt, _, dq = method.partition("+")
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=qt,
                              bnb_4bit_use_double_quant=(dq == "dq"),
                              bnb_4bit_compute_dtype=torch.bfloat16)


def _method_doc(method: str) -> dict:
    if method == "int8":
        return {"load_in_8bit": True, "llm_int8_threshold": 6.0, "llm_int8_has_fp16_weight": False}
    qt, _, dq = method.partition("+")
    return {"load_in_4bit": True, "bnb_4bit_quant_type": qt, "bnb_4bit_use_double_quant": dq == "dq",
            "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8", "blocksize": 64}


# ---------------------------------------------------------------------------
# Part 1: per-tensor storage
# ---------------------------------------------------------------------------

def measure_tensor(shape: list[int]) -> dict:
    import torch
    import bitsandbytes as bnb
    import bitsandbytes.functional as F

    rows, cols = shape
    n = rows * cols
    gen = torch.Generator().manual_seed(rows * 100003 + cols)
    w32 = torch.randn(rows, cols, generator=gen)
    variants = []

    combos = [(qt, dq, 64, "bfloat16") for qt in ("nf4", "fp4") for dq in (False, True)]
    for bs in EXTRA_BLOCKSIZES.get(tuple(shape), []):
        combos += [("nf4", False, bs, "bfloat16"), ("nf4", True, bs, "bfloat16")]
    for dt in EXTRA_INPUT_DTYPES.get(tuple(shape), []):
        combos += [("nf4", False, 64, dt), ("nf4", True, 64, dt)]

    for qt, dq, bs, in_dt in combos:
        w = w32.to(getattr(torch, in_dt))
        data, qs = F.quantize_4bit(w, blocksize=bs, quant_type=qt, compress_statistics=dq)
        tensors = [_tinfo("data", data)] + [_tinfo(r, t) for r, t in quant_state_tensors(qs)]
        total = sum(t["bytes"] for t in tensors)
        formula = bytes_4bit(n, bs, dq)
        variants.append({
            "method": f"{qt}{'+dq' if dq else ''}", "quant_type": qt, "double_quant": dq,
            "blocksize": bs, "input_dtype": in_dt,
            "quant_state": {"shape": list(qs.shape), "dtype": str(qs.dtype).removeprefix("torch."),
                            "blocksize": qs.blocksize, "quant_type": qs.quant_type, "nested": qs.nested,
                            **({"state2_blocksize": qs.state2.blocksize} if dq else {})},
            "tensors": tensors, "bytes": total,
            "cuda_alloc_bytes": sum(cuda_round(t["bytes"]) for t in tensors),
            "bits_per_param": 8 * total / n,
            "formula": FORMULA_4BIT_DQ if dq else FORMULA_4BIT, "formula_bytes": formula,
            "matches_formula": total == formula,
        })

    # 8-bit: the Linear8bitLt / Int8Params path used by load_in_8bit
    lin = bnb.nn.Linear8bitLt(cols, rows, bias=False, has_fp16_weights=False, threshold=6.0)
    lin.weight = bnb.nn.Int8Params(w32.to(torch.float16), requires_grad=False, has_fp16_weights=False)
    lin = lin.to("cpu")  # Int8Params._quantize -> int8_vectorwise_quant
    p = lin.weight
    assert p.CB is not None and p.CB.untyped_storage().data_ptr() == p.data.untyped_storage().data_ptr()
    tensors = [_tinfo("CB", p.CB), _tinfo("SCB", p.SCB)]
    total = sum(t["bytes"] for t in tensors)
    variants.append({
        "method": "int8", "path": "bnb.nn.Linear8bitLt + Int8Params._quantize -> "
                                  "bitsandbytes.functional.int8_vectorwise_quant",
        "input_dtype": "float16", "tensors": tensors, "bytes": total,
        "cuda_alloc_bytes": sum(cuda_round(t["bytes"]) for t in tensors),
        "bits_per_param": 8 * total / n,
        "formula": FORMULA_INT8, "formula_bytes": bytes_int8(rows, cols),
        "matches_formula": total == bytes_int8(rows, cols),
        "notes": "CB is the int8 weight (same storage as .data); SCB is the fp32 per-row absmax. "
                 "Outlier columns (threshold 6.0) are extracted per forward, not stored.",
    })
    return {"id": f"tensor__{rows}x{cols}", "kind": "tensor", "shape": shape, "numel": n,
            "measured": True, "device": "cpu", "variants": variants}


# ---------------------------------------------------------------------------
# Part 2: whole models
# ---------------------------------------------------------------------------

def _tiny(**kw) -> dict:
    return {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
            "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
            "max_position_embeddings": 256, **kw}


# (id, description, raw config, method)
MEASURED_MODELS = [
    ("llama__nf4_dq", "untied llama, GQA 8/2, odd intermediate 688", {"model_type": "llama", **_tiny()}, "nf4+dq"),
    ("llama__nf4", "as llama__nf4_dq, no double quantization", {"model_type": "llama", **_tiny()}, "nf4"),
    ("llama__fp4_dq", "as llama__nf4_dq with fp4", {"model_type": "llama", **_tiny()}, "fp4+dq"),
    ("llama__int8", "as llama__nf4_dq with load_in_8bit", {"model_type": "llama", **_tiny()}, "int8"),
    ("llama_tied__nf4_dq", "llama with tie_word_embeddings true",
     {"model_type": "llama", **_tiny(tie_word_embeddings=True)}, "nf4+dq"),
    ("llama_tied__int8", "tied llama, load_in_8bit",
     {"model_type": "llama", **_tiny(tie_word_embeddings=True)}, "int8"),
    ("llama_bias__nf4_dq", "llama with attention_bias and mlp_bias (biases stay bf16)",
     {"model_type": "llama", **_tiny(attention_bias=True, mlp_bias=True)}, "nf4+dq"),
    ("mistral__nf4_dq", "mistral", {"model_type": "mistral", **_tiny()}, "nf4+dq"),
    ("qwen2__nf4_dq", "qwen2 (q/k/v biases)", {"model_type": "qwen2", **_tiny()}, "nf4+dq"),
    ("gemma2__nf4_dq", "gemma2 (tied embeddings, extra norms)",
     {"model_type": "gemma2", **_tiny(head_dim=32)}, "nf4+dq"),
    ("phi3__nf4_dq", "phi3 (fused qkv_proj, gate_up_proj)", {"model_type": "phi3", **_tiny(pad_token_id=0)}, "nf4+dq"),
    ("gpt2__nf4_dq", "gpt2 (Conv1D is replaced too; tied lm_head)",
     {"model_type": "gpt2", "n_embd": 256, "n_head": 8, "n_layer": 2, "n_positions": 128,
      "vocab_size": 1000}, "nf4+dq"),
    ("gpt2__int8", "gpt2, load_in_8bit",
     {"model_type": "gpt2", "n_embd": 256, "n_head": 8, "n_layer": 2, "n_positions": 128,
      "vocab_size": 1000}, "int8"),
    ("mixtral__nf4_dq", "mixtral, 4 experts: fused 3-D experts and router are not nn.Linear",
     {"model_type": "mixtral", **_tiny(intermediate_size=344, num_local_experts=4)}, "nf4+dq"),
    ("qwen3_moe__nf4_dq", "qwen3_moe, 4 experts",
     {"model_type": "qwen3_moe", **_tiny(moe_intermediate_size=96, num_experts=4,
                                          num_experts_per_tok=2)}, "nf4+dq"),
]

# (preset, method)
PREDICTED_PRESETS = [
    ("llama-2-7b", "nf4+dq"), ("llama-2-7b", "nf4"), ("llama-2-7b", "fp4+dq"), ("llama-2-7b", "int8"),
    ("llama-3.1-8b", "nf4+dq"), ("mistral-7b", "nf4+dq"), ("qwen2.5-7b", "nf4+dq"),
    ("gemma-2-9b", "nf4+dq"), ("phi-3-mini", "nf4+dq"), ("gpt2", "nf4+dq"),
    ("mixtral-8x7b", "nf4+dq"), ("qwen3-30b-a3b", "nf4+dq"), ("llama-3.1-70b", "nf4+dq"),
]


def _summary(modules: list[dict], buffers_bytes: int) -> dict:
    q_params = sum(m["quantized_params"] for m in modules)
    q_bytes = sum(m["quantized_bytes"] for m in modules)
    u_params = sum(m["unquantized_params"] for m in modules)
    u_bytes = sum(m["unquantized_bytes"] for m in modules)
    total = q_bytes + u_bytes
    by_class: dict[str, int] = {}
    for m in modules:
        if m["unquantized_params"]:
            by_class[m["class"]] = by_class.get(m["class"], 0) + m["unquantized_params"]
    return {
        "unquantized_params_by_class": by_class,
        "quantized_linear_count": sum(1 for m in modules if m["quantized"]),
        "quantized_params": q_params, "quantized_bytes": q_bytes,
        "quantized_bits_per_param": (8 * q_bytes / q_params) if q_params else None,
        "unquantized_params": u_params, "unquantized_bytes": u_bytes,
        "total_params": q_params + u_params, "total_bytes": total,
        "total_gb": total / 1e9, "total_gib": total / 2**30,
        "buffer_bytes": buffers_bytes,
    }


def predict(raw: dict, method: str, dtype_bytes: int = 2) -> dict:
    """Meta-device prediction: the quantizer's module replacement + per-tensor formulas."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.quantizers import AutoHfQuantizer
    import bitsandbytes as bnb

    cfg = _load_config(raw)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    keep_fp32 = sorted(getattr(model, "_keep_in_fp32_modules", None) or [])
    quantizer = AutoHfQuantizer.from_config(_bnb_config(method), pre_quantized=False)
    quantizer._process_model_before_weight_loading(model, device_map={"": "cpu"})
    not_convert = sorted(quantizer.modules_to_not_convert)

    modules, seen = [], set()
    for name, mod in model.named_modules():
        own = [(pn, p) for pn, p in mod.named_parameters(recurse=False) if id(p) not in seen]
        if not own:
            continue
        for _, p in own:
            seen.add(id(p))
        quantized = isinstance(mod, (bnb.nn.Linear4bit, bnb.nn.Linear8bitLt))
        row = {"name": name, "class": type(mod).__name__, "quantized": quantized,
               "quantized_params": 0, "quantized_bytes": 0, "unquantized_params": 0,
               "unquantized_bytes": 0, "tensors": []}
        for pn, p in own:
            if quantized and pn == "weight":
                n = mod.in_features * mod.out_features
                if method == "int8":
                    ts = [{"role": "CB", "shape": [mod.out_features, mod.in_features], "dtype": "int8",
                           "bytes": n},
                          {"role": "SCB", "shape": [mod.out_features], "dtype": "float32",
                           "bytes": 4 * mod.out_features}]
                else:
                    ts = tensors_4bit_formula(n, 64, method.endswith("+dq"))
                for t in ts:
                    t["role"] = f"weight.{t['role']}"
                row["quantized_params"] += n
                row["quantized_bytes"] += sum(t["bytes"] for t in ts)
                row["tensors"] += ts
            else:
                fp32 = any(k in name.split(".") or name.endswith(k) for k in keep_fp32)
                eb = 4 if fp32 else dtype_bytes
                b = p.numel() * eb
                row["unquantized_params"] += p.numel()
                row["unquantized_bytes"] += b
                row["tensors"].append({"role": pn, "shape": list(p.shape),
                                       "dtype": "float32" if fp32 else "bfloat16", "bytes": b})
        row["bytes"] = row["quantized_bytes"] + row["unquantized_bytes"]
        modules.append(row)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return {"modules": modules, "modules_to_not_convert": not_convert,
            "keep_in_fp32_modules": keep_fp32, **_summary(modules, buffers)}


def measure_model(raw: dict, method: str) -> dict:
    """Real CPU load with BitsAndBytesConfig; record every stored tensor per module."""
    import torch
    import bitsandbytes as bnb
    from transformers import AutoModelForCausalLM

    cfg = _load_config(raw)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        del model
        qmodel = AutoModelForCausalLM.from_pretrained(
            tmp, quantization_config=_bnb_config(method), device_map="cpu", dtype=torch.bfloat16)

    seen: set[int] = set()

    def take(t) -> bool:
        key = t.untyped_storage().data_ptr() if t.numel() else id(t)
        if key in seen:
            return False
        seen.add(key)
        return True

    modules = []
    for name, mod in qmodel.named_modules():
        own = list(mod.named_parameters(recurse=False))
        if not own:
            continue
        quantized = isinstance(mod, (bnb.nn.Linear4bit, bnb.nn.Linear8bitLt))
        row = {"name": name, "class": type(mod).__name__, "quantized": quantized,
               "quantized_params": 0, "quantized_bytes": 0, "unquantized_params": 0,
               "unquantized_bytes": 0, "tensors": []}
        for pn, p in own:
            if isinstance(p, bnb.nn.Params4bit):
                items = [("data", p.data)] + quant_state_tensors(p.quant_state)
                n = math.prod(p.quant_state.shape)
            elif isinstance(p, bnb.nn.Int8Params):
                items = [("CB", p.data), ("SCB", p.SCB)]
                n = p.numel()
            else:
                if take(p):
                    row["unquantized_params"] += p.numel()
                    row["unquantized_bytes"] += p.numel() * p.element_size()
                    row["tensors"].append({**_tinfo(pn, p)})
                continue
            row["quantized_params"] += n
            for role, t in items:
                if take(t):
                    info = _tinfo(f"{pn}.{role}", t)
                    row["quantized_bytes"] += info["bytes"]
                    row["tensors"].append(info)
        # any other tensor the module keeps (e.g. Linear8bitLt.state) -- shared storages skip
        state = getattr(mod, "state", None)
        if state is not None and quantized:
            for k, v in vars(state).items():
                if isinstance(v, torch.Tensor) and take(v):
                    info = _tinfo(f"state.{k}", v)
                    row["quantized_bytes"] += info["bytes"]
                    row["tensors"].append(info)
        row["bytes"] = row["quantized_bytes"] + row["unquantized_bytes"]
        if row["tensors"] or row["quantized_params"]:
            modules.append(row)
    buffers = [{"name": n, "shape": list(b.shape), "dtype": _dt(b), "bytes": b.numel() * b.element_size()}
               for n, b in qmodel.named_buffers()]
    quantizer = getattr(qmodel, "hf_quantizer", None)
    not_convert = sorted(getattr(quantizer, "modules_to_not_convert", []) or [])
    return {"modules": modules, "modules_to_not_convert": not_convert, "buffers": buffers,
            **_summary(modules, sum(b["bytes"] for b in buffers))}


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def render(doc: dict) -> str:
    """2-space indented, key-sorted JSON; module rows, variants' tensors and buffers one per line."""
    doc = dict(doc)
    placeholders = {}
    for key in ("modules", "buffers"):
        if key in doc:
            placeholders[key] = doc.pop(key)
            doc[key] = f"@@{key}@@"
    if "variants" in doc:
        vs = []
        for i, v in enumerate(doc["variants"]):
            v = dict(v)
            placeholders[f"t{i}"] = v.pop("tensors")
            v["tensors"] = f"@@t{i}@@"
            vs.append(v)
        doc["variants"] = vs
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True)
    for key, items in placeholders.items():
        indent = "        " if key.startswith("t") else "    "
        rows = ",\n".join(indent + json.dumps(t, sort_keys=True) for t in items)
        close = indent[:-2] + "]"
        text = text.replace(f'"@@{key}@@"', "[\n" + rows + "\n" + close if rows else "[]")
    return text + "\n"


def all_cases():
    for shape in SHAPES:
        yield f"tensor__{shape[0]}x{shape[1]}", ("tensor", shape)
    for mid, desc, raw, method in MEASURED_MODELS:
        yield f"model__{mid}", ("measured", mid, desc, raw, method)
    for name, method in PREDICTED_PRESETS:
        tag = method.replace("+", "_")
        yield f"model__preset__{name}__{tag}", ("predicted", name, method)


def run_case(kind) -> dict:
    if kind[0] == "tensor":
        return measure_tensor(kind[1])
    if kind[0] == "measured":
        _, mid, desc, raw, method = kind
        measured = measure_model(raw, method)
        pred = predict(raw, method)
        same = (pred["total_bytes"] == measured["total_bytes"]
                and [(m["name"], m["quantized"], m["bytes"]) for m in pred["modules"]]
                == [(m["name"], m["quantized"], m["bytes"]) for m in measured["modules"]])
        experts = [c for c in measured["unquantized_params_by_class"] if "Experts" in c or "Router" in c]
        notes = ("real CPU load with BitsAndBytesConfig; per-module tensors are the stored ones "
                 "(shared storages once); buffers listed separately and not in total_bytes")
        if experts:
            notes += (f"; MoE: {', '.join(experts)} hold nn.Parameters (fused 3-D experts, router) that "
                      "replace_with_bnb_linear does not touch, so they stay bf16")
        return {"kind": "model", "measured": True, "device": "cpu", "source": f"synthetic: {desc}",
                "notes": notes,
                "model_type": raw["model_type"], "config": raw, "method": method,
                "bnb_config": _method_doc(method), **measured,
                "predicted_total_bytes": pred["total_bytes"], "prediction_matches": same}
    _, name, method = kind
    raw = json.loads((PRESETS_DIR / f"{name}.json").read_text())
    pred = predict(raw, method)
    moe = [c for c in pred["unquantized_params_by_class"] if "Experts" in c or "Router" in c]
    moe_note = (f" MoE: {', '.join(moe)} are not nn.Linear (fused 3-D expert parameters, router), so "
                "they stay bf16." if moe else "")
    return {"kind": "model", "measured": False, "source": f"preset {name}",
            "model_type": raw["model_type"], "config": raw, "method": method,
            "bnb_config": _method_doc(method), **pred,
            "notes": "meta-device prediction: transformers' bnb quantizer decides which modules are "
                     "replaced (_process_model_before_weight_loading); replaced Linear weights are sized "
                     "with the per-tensor formula (verified in tensor__* and the measured model__* "
                     "fixtures); every other parameter is bf16. buffer_bytes are the model's buffers "
                     "(not included in total_bytes)." + moe_note}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="only ids containing this substring (other fixtures are kept)")
    ap.add_argument("--check", action="store_true", help="compare with existing fixtures, write nothing")
    args = ap.parse_args(argv)

    _quiet()
    import bitsandbytes
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    versions = {"bitsandbytes_version": bitsandbytes.__version__,
                "transformers_version": transformers.__version__, "torch_version": torch.__version__}

    cases = [c for c in all_cases() if not args.only or args.only in c[0]]
    FIXTURES_DIR.mkdir(parents=True, exist_ok=True)
    if not args.check and not args.only:
        for old in FIXTURES_DIR.glob("*.json"):
            old.unlink()

    problems = []
    start = time.time()
    for case_id, kind in cases:
        t0 = time.time()
        doc = {"id": case_id, **run_case(kind), **versions}
        if doc["kind"] == "tensor":
            bad = [v["method"] for v in doc["variants"] if not v["matches_formula"]]
            line = " ".join(f"{v['method']}{'' if v.get('blocksize', 64) == 64 else '/' + str(v['blocksize'])}"
                            f"{'' if v['input_dtype'] == 'bfloat16' or v['method'] == 'int8' else '/' + v['input_dtype']}"
                            f"={v['bytes']}" for v in doc["variants"])
        else:
            bad = [] if doc.get("prediction_matches", True) else ["prediction"]
            line = (f"q {doc['quantized_params']:,} p -> {doc['quantized_bytes']:,} B "
                    f"({doc['quantized_bits_per_param'] or 0:.4f} b/p), "
                    f"unq {doc['unquantized_params']:,} p -> {doc['unquantized_bytes']:,} B, "
                    f"total {doc['total_bytes']:,} B ({doc['total_gb']:.3f} GB)")
        if bad:
            problems.append((case_id, bad))
        print(f"{case_id:42s} {line} [{time.time() - t0:.1f}s]{'  MISMATCH ' + str(bad) if bad else ''}")
        out = FIXTURES_DIR / f"{case_id}.json"
        if args.check:
            old = json.loads(out.read_text()) if out.exists() else None
            key = (lambda d: [v["bytes"] for v in d["variants"]]) if doc["kind"] == "tensor" \
                else (lambda d: d["total_bytes"])
            if old is None or key(old) != key(doc):
                problems.append((case_id, "differs from fixture"))
                print(f"DIFF  {case_id}", file=sys.stderr)
        else:
            out.write_text(render(doc))

    print(f"\n{len(cases)} cases, {len(problems)} problems, {time.time() - start:.1f}s "
          f"(bitsandbytes {versions['bitsandbytes_version']}, transformers "
          f"{versions['transformers_version']}, torch {versions['torch_version']})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
