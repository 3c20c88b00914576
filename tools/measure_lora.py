#!/usr/bin/env python3
"""Measure exact LoRA (peft) parameter counts; write test fixtures.

This is the reference ("ground truth") side of trainmem's LoRA accounting.
For every configuration listed in ``all_cases()`` it

1. writes the raw config dict to a temporary folder as ``config.json`` and
   loads it with ``transformers.AutoConfig.from_pretrained(folder)`` (as
   ``tools/measure_params.py`` does);
2. builds ``AutoModelForCausalLM.from_config(cfg)`` under
   ``with torch.device("meta"):`` (no memory is allocated, so 47B-parameter
   models are fine);
3. wraps it with ``peft.get_peft_model(model, LoraConfig(r=..., lora_alpha=...,
   target_modules=..., lora_dropout=0.0, bias=..., modules_to_save=...,
   use_dora=..., use_rslora=...), low_cpu_mem_usage=True)`` (the flag only
   skips adapter initialisation; counts are identical without it);
4. records

   * ``base_total``: ``sum(p.numel() for p in model.parameters())`` before
     wrapping (tied weights once);
   * ``total``: the same sum over the peft model (``model.parameters()``
     yields every Parameter object once, so tied weights are counted once);
     this includes frozen base weights, LoRA A/B, DoRA magnitudes and the
     trainable copies that ``modules_to_save`` adds;
   * ``trainable``: the sum over parameters with ``requires_grad``;
   * ``trainable_tensors``: ``[{name, shape}]`` of the trainable parameters in
     ``named_parameters()`` order (full peft names);
   * ``targets``: one entry per peft tuner layer (``BaseTunerLayer``):
     ``name`` (base-model module name; for a ``lora.ParamWrapper``, which
     adapts an ``nn.Parameter`` such as a fused 3-D MoE expert tensor, the
     module name plus the parameter name), ``in_features``, ``out_features``,
     ``class`` (class of the wrapped base module), ``wrapper`` (peft class),
     ``r`` (the effective rank for that target, after ``rank_pattern``), and
     for ParamWrapper also ``parameter``, ``num_experts`` and ``param_shape``;
   * ``resolved``: what peft actually matched: ``target_modules`` and
     ``target_parameters`` after resolving ``"all-linear"`` and after peft's
     transformers-v5 MoE conversion (``rank_pattern``/``alpha_pattern`` too);

5. writes ``tests/fixtures/lora/<id>.json``.

Configurations that peft rejects (e.g. DoRA on fused MoE experts) are written
with ``"error": "<ExceptionType>: <message>"`` and no counts, so the Rust side
can check that it refuses (or warns about) the same thing.

Ids: ``preset__<name>__<variant>`` for ``presets/<name>.json`` and
``<params-fixture-id>__<variant>`` for small synthetic configurations, whose
raw config is the ``config`` field of ``tests/fixtures/params/<id>.json``.
Target lists are given by module name per architecture (see ``TARGETS``).

Fixture format (2-space indented JSON, keys sorted, one tensor/target per
line)::

    {
      "base_total": 6738415616,
      "config": {...raw config dict...},
      "id": "preset__llama-2-7b__qv_r8",
      "lora": {"bias": "none", "lora_alpha": 16, "modules_to_save": null,
               "r": 8, "target_modules": ["q_proj", "v_proj"],
               "use_dora": false, "use_rslora": false},
      "model_type": "llama",
      "notes": "...",
      "peft_version": "...", "torch_version": "...", "transformers_version": "...",
      "resolved": {"alpha_pattern": {}, "rank_pattern": {},
                   "target_modules": [...], "target_parameters": [...]},
      "source": "preset llama-2-7b" | "synthetic: params fixture llama__tiny",
      "targets": [{"class": "Linear", "in_features": 4096, "name": "model.layers.0.self_attn.q_proj",
                   "out_features": 4096, "r": 8, "wrapper": "Linear"}, ...],
      "total": 6742609920,
      "trainable": 4194304,
      "trainable_tensors": [{"name": "...lora_A.default.weight", "shape": [8, 4096]}, ...]
    }

Run from the repository root (about one to two minutes on 2 CPU cores)::

    /work/venv/bin/python tools/measure_lora.py

It deletes ``tests/fixtures/lora/*.json`` and rewrites them all. Options:
``--only SUBSTRING`` measures (and rewrites) only the ids containing
SUBSTRING, keeping the others; ``--check`` compares with the existing
fixtures without writing.

Needs: torch, transformers, peft (no network access: configs are local).
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
PARAMS_DIR = REPO / "tests" / "fixtures" / "params"
FIXTURES_DIR = REPO / "tests" / "fixtures" / "lora"
MAX_LISTED = 3000
PEFT_PREFIX = "base_model.model."

# ---------------------------------------------------------------------------
# Target module names per architecture
# ---------------------------------------------------------------------------
# "qv": the classic LoRA paper choice; "attn": every attention projection;
# "attn_mlp": attention + MLP projections spelled out by name (for MoE models
# the transformers-v4 expert names, which peft maps onto the fused v5 expert
# parameters); "all-linear" is peft's special value, passed as a string.
_LLAMA = {
    "qv": ["q_proj", "v_proj"],
    "attn": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "attn_mlp": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
TARGETS = {
    "llama": _LLAMA, "mistral": _LLAMA, "qwen2": _LLAMA, "qwen3": _LLAMA, "gemma": _LLAMA,
    "gemma2": _LLAMA, "qwen2_moe": _LLAMA, "qwen3_moe": _LLAMA,
    # Mixtral's v4 expert names are w1 (gate), w3 (up), w2 (down)
    "mixtral": {**_LLAMA, "attn_mlp": ["q_proj", "k_proj", "v_proj", "o_proj", "w1", "w2", "w3"]},
    # Phi-3 fuses q/k/v into qkv_proj and gate/up into gate_up_proj
    "phi3": {"qv": ["qkv_proj"], "attn": ["qkv_proj", "o_proj"],
             "attn_mlp": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]},
    # GPT-2 uses Conv1D (weight stored [in, out]; peft sets fan_in_fan_out)
    "gpt2": {"qv": ["c_attn"], "attn": ["c_attn", "attn.c_proj"],
             "attn_mlp": ["c_attn", "c_proj", "c_fc"]},
}


def lora(kind: str, r: int, model_type: str, **extra) -> dict:
    """LoraConfig kwargs: target set `kind` ('qv', 'attn', 'attn_mlp', 'all-linear')."""
    tm = "all-linear" if kind == "all-linear" else list(TARGETS[model_type][kind])
    kw = {"r": r, "lora_alpha": 16, "target_modules": tm, "bias": "none",
          "modules_to_save": None, "use_dora": False, "use_rslora": False}
    kw.update(extra)
    return kw


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------
MAIN_PRESETS = ["llama-2-7b", "llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "gemma-2-9b",
                "phi-3-mini", "gpt2", "mixtral-8x7b", "qwen3-30b-a3b", "qwen1.5-moe-a2.7b"]
# the standard sweep run on every main preset and synthetic config
STANDARD = [("qv_r8", "qv", 8), ("attn_r16", "attn", 16), ("attn_mlp_r64", "attn_mlp", 64),
            ("all_linear_r8", "all-linear", 8), ("all_linear_r64", "all-linear", 64)]

SYNTHETIC = ["llama__tiny", "llama__tied", "llama__odd_sizes", "llama__gqa", "llama__both_bias",
             "mistral__tiny", "qwen2__tiny", "qwen2__tied", "gemma2__tiny",
             "phi3__tiny", "gpt2__tiny", "gpt2__untied", "mixtral__tiny", "qwen3_moe__tiny",
             "qwen2_moe__tiny"]


def extra_variants(model_type: str, tied: bool) -> list[tuple[str, dict, str]]:
    """Variants beyond STANDARD: ranks, bias, modules_to_save, DoRA, rsLoRA."""
    mt = model_type
    moe = mt in ("mixtral", "qwen3_moe")  # MoE types whose experts peft wraps (ParamWrapper)
    head = "lm_head"
    emb = "wte" if mt == "gpt2" else "embed_tokens"
    v = [
        ("qv_r1", lora("qv", 1, mt), "rank 1"),
        ("qv_r16", lora("qv", 16, mt), "rank 16"),
        ("qv_r64", lora("qv", 64, mt), "rank 64"),
        ("all_linear_r1", lora("all-linear", 1, mt), "rank 1, all-linear"),
        ("all_linear_r16", lora("all-linear", 16, mt), "rank 16, all-linear"),
        ("qv_r8_bias_all", lora("qv", 8, mt, bias="all"),
         "bias='all': every bias in the model becomes trainable (targeted or not)"),
        ("qv_r8_bias_lora_only", lora("qv", 8, mt, bias="lora_only"),
         "bias='lora_only': only the biases of targeted modules become trainable"),
        ("attn_mlp_r8_bias_all", lora("attn_mlp", 8, mt, bias="all"), "bias='all' with attention+MLP"),
        ("qv_r8_save_head", lora("qv", 8, mt, modules_to_save=[head]),
         "modules_to_save lm_head: a trainable copy of the head is added (frozen original kept)"
         + ("; the model ties lm_head to the embeddings" if tied else "")),
        ("qv_r8_save_embed", lora("qv", 8, mt, modules_to_save=[emb]),
         f"modules_to_save {emb}: a trainable copy of the embeddings is added"),
        ("qv_r8_save_both", lora("qv", 8, mt, modules_to_save=[head, emb]),
         "modules_to_save lm_head and embeddings"),
        ("all_linear_r8_save_head", lora("all-linear", 8, mt, modules_to_save=[head]),
         "all-linear plus modules_to_save lm_head"),
        ("qv_r8_dora", lora("qv", 8, mt, use_dora=True),
         "use_dora: one magnitude vector of out_features per target"),
        ("attn_r16_dora", lora("attn", 16, mt, use_dora=True), "use_dora on all attention projections"),
        ("all_linear_r8_dora", lora("all-linear", 8, mt, use_dora=True),
         "use_dora with all-linear" + (" (peft rejects DoRA on fused MoE experts)" if moe else "")),
        ("qv_r8_rslora", lora("qv", 8, mt, use_rslora=True), "use_rslora: scaling only, no size effect"),
        ("all_linear_r8_rslora", lora("all-linear", 8, mt, use_rslora=True),
         "use_rslora with all-linear: no size effect"),
    ]
    if mt == "mixtral":
        v.append(("w1_w2_r8", lora("qv", 8, mt, target_modules=["w1", "w2"]),
                  "targets w1 without w3: peft refuses because both live in the fused gate_up_proj"))
        v.append(("gate_r8", lora("qv", 8, mt, target_modules=["gate"]),
                  "router only: peft maps 'gate' to the router's weight parameter"))
    if mt in ("qwen2_moe", "qwen3_moe"):
        v.append(("experts_r8", lora("qv", 8, mt, target_modules=["gate_proj", "up_proj", "down_proj"]),
                  "MLP names only: qwen3_moe maps them onto the fused expert parameters; "
                  "qwen2_moe matches only the shared expert's Linear layers"))
    return v


PRESET_EXTRAS = {
    # preset -> variant ids from extra_variants() to run on it (full sweep for llama-2-7b)
    "llama-2-7b": None,
    "mistral-7b": ["qv_r8_dora", "all_linear_r8_dora", "qv_r8_save_head"],
    "qwen2.5-7b": ["qv_r8_bias_all", "qv_r8_bias_lora_only", "attn_mlp_r8_bias_all", "qv_r8_dora"],
    "gemma-2-9b": ["qv_r8_save_head", "qv_r8_save_embed", "qv_r8_save_both", "qv_r8_dora"],
    "gpt2": ["qv_r8_bias_all", "qv_r8_bias_lora_only", "qv_r8_save_head", "qv_r8_save_embed",
             "qv_r8_dora", "all_linear_r8_dora"],
    "phi-3-mini": ["qv_r8_dora", "all_linear_r16"],
    "mixtral-8x7b": ["all_linear_r8_dora", "w1_w2_r8", "gate_r8", "all_linear_r16"],
    "qwen3-30b-a3b": ["experts_r8", "all_linear_r1"],
    "qwen1.5-moe-a2.7b": ["experts_r8"],
    "llama-3.1-8b": ["qv_r1", "qv_r64", "all_linear_r16"],
}


# Vision-language models: peft's all-linear (every nn.Linear but lm_head,
# the vision tower and projector included), q/v by name (which matches the
# vision tower's q_proj/v_proj too where it has them), and all-linear with
# the vision tower and projector left out by peft's `exclude_modules` regex,
# which trainmem reaches with `--freeze vision_tower --freeze
# multi_modal_projector` (the fixture's `trainmem_freeze`).
VISION_LANGUAGE_TYPES = {"llava", "qwen2_vl", "qwen2_5_vl", "gemma3", "mllama"}
VISION_LANGUAGE = ["llava__tiny", "qwen2_vl__tiny", "qwen2_5_vl__tiny", "gemma3__tiny",
                   "gemma3__no_head", "mllama__tiny"]
VISION_PARTS = r".*\.(vision_tower|visual|vision_model|multi_modal_projector)(\..*)?"
# the vision tower alone: Qwen2-VL's patch_embed and blocks (its merger is the projector)
VISION_TOWER = r".*\.(vision_tower|vision_model|visual\.blocks|visual\.patch_embed)(\..*)?"
VISION_LANGUAGE_VARIANTS = [
    ("all_linear_r8", {"r": 8, "lora_alpha": 16, "target_modules": "all-linear", "bias": "none",
                       "modules_to_save": None, "use_dora": False, "use_rslora": False},
     "all-linear: peft targets the vision tower's and projector's linears too", None),
    ("qv_r8", lora("qv", 8, "llama"), "q_proj,v_proj by name: vision towers with q_proj too", None),
    ("language_all_linear_r8",
     {"r": 8, "lora_alpha": 16, "target_modules": "all-linear", "bias": "none",
      "modules_to_save": None, "use_dora": False, "use_rslora": False,
      "exclude_modules": VISION_PARTS},
     "all-linear in the language model only (exclude_modules: the vision tower and projector)",
     ["vision_tower", "multi_modal_projector"]),
    ("projector_language_all_linear_r8",
     {"r": 8, "lora_alpha": 16, "target_modules": "all-linear", "bias": "none",
      "modules_to_save": None, "use_dora": False, "use_rslora": False,
      "exclude_modules": VISION_TOWER},
     "all-linear but the vision tower (exclude_modules): the projector and language model",
     ["vision_tower"]),
]


def _is_tied(raw: dict) -> bool:
    from transformers import AutoConfig
    cfg = _load_config(raw, AutoConfig)
    return bool(getattr(cfg, "tie_word_embeddings", False))


def _load_config(raw: dict, AutoConfig):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as fh:
            json.dump(raw, fh)
        return AutoConfig.from_pretrained(tmp)


def all_cases():
    """Yield (id, model_type, source, raw_config, lora_kwargs, notes)."""
    for name in MAIN_PRESETS:
        raw = json.loads((PRESETS_DIR / f"{name}.json").read_text())
        mt = raw["model_type"]
        for vid, kind, r in STANDARD:
            yield (f"preset__{name}__{vid}", mt, f"preset {name}", raw, lora(kind, r, mt),
                   f"{kind} targets, rank {r}")
        wanted = PRESET_EXTRAS.get(name, [])
        for vid, kw, note in extra_variants(mt, _is_tied(raw)):
            if wanted is None or vid in wanted:
                yield f"preset__{name}__{vid}", mt, f"preset {name}", raw, kw, note
    for pid in SYNTHETIC:
        raw = json.loads((PARAMS_DIR / f"{pid}.json").read_text())["config"]
        mt = raw["model_type"]
        src = f"synthetic: params fixture {pid}"
        for vid, kind, r in STANDARD:
            yield f"{pid}__{vid}", mt, src, raw, lora(kind, r, mt), f"{kind} targets, rank {r}"
        for vid, kw, note in extra_variants(mt, _is_tied(raw)):
            yield f"{pid}__{vid}", mt, src, raw, kw, note
    for pid in VISION_LANGUAGE:
        raw = json.loads((PARAMS_DIR / f"{pid}.json").read_text())["config"]
        mt = raw["model_type"]
        src = f"synthetic: params fixture {pid}"
        for vid, kw, note, freeze in VISION_LANGUAGE_VARIANTS:
            kw = dict(kw)
            if freeze:
                kw["trainmem_freeze"] = freeze
            yield f"{pid}__{vid}", mt, src, raw, kw, note


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------

def _quiet():
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _strip(name: str) -> str:
    """Base-model module name: drop the peft prefix and any '.base_layer' hops."""
    name = name.removeprefix(PEFT_PREFIX)
    return ".".join(p for p in name.split(".") if p != "base_layer")


def _jsonable(x):
    if isinstance(x, (set, frozenset, tuple)):
        return sorted(_jsonable(v) for v in x)
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return x


def measure(raw: dict, lora_kw: dict) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from peft.tuners.tuners_utils import BaseTunerLayer
    from transformers import AutoConfig, AutoModelForCausalLM

    from transformers import AutoModelForImageTextToText

    cfg = _load_config(raw, AutoConfig)
    auto = (AutoModelForImageTextToText if raw.get("model_type") in VISION_LANGUAGE_TYPES
            else AutoModelForCausalLM)
    with torch.device("meta"):
        model = auto.from_config(cfg)
    base_total = sum(p.numel() for p in model.parameters())
    kw = dict(lora_kw)
    kw.pop("trainmem_freeze", None)
    tm = kw.pop("target_modules")
    config = LoraConfig(target_modules=tm if isinstance(tm, str) else list(tm),
                        lora_dropout=0.0, **kw)
    # low_cpu_mem_usage only skips adapter weight initialisation (everything is on
    # the meta device anyway); shapes and counts are identical, and fused MoE
    # experts wrap ~10x faster.
    peft_model = get_peft_model(model, config, low_cpu_mem_usage=True)

    params = list(peft_model.parameters())
    total = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    tensors = [{"name": n, "shape": list(p.shape)}
               for n, p in peft_model.named_parameters() if p.requires_grad]

    targets = []
    for name, mod in peft_model.named_modules():
        if not isinstance(mod, BaseTunerLayer):
            continue
        entry = {
            "name": _strip(name),
            "wrapper": type(mod).__name__,
            "class": type(mod.get_base_layer()).__name__,
            "in_features": getattr(mod, "in_features", None),
            "out_features": getattr(mod, "out_features", None),
            "r": mod.r.get("default") if hasattr(mod, "r") else None,
        }
        if type(mod).__name__ == "ParamWrapper":
            pname = mod.parameter_name
            entry["name"] = f"{_strip(name)}.{pname}"
            entry["parameter"] = pname
            entry["num_experts"] = getattr(mod, "num_experts", None)
            entry["param_shape"] = list(getattr(mod.get_base_layer(), pname).shape)
        if getattr(mod, "fan_in_fan_out", False):
            entry["fan_in_fan_out"] = True
        targets.append(entry)

    pc = peft_model.peft_config["default"]
    resolved = {
        "target_modules": _jsonable(pc.target_modules),
        "target_parameters": _jsonable(getattr(pc, "target_parameters", None)),
        "rank_pattern": _jsonable(getattr(pc, "rank_pattern", None) or {}),
        "alpha_pattern": _jsonable(getattr(pc, "alpha_pattern", None) or {}),
    }
    return {"base_total": base_total, "total": total, "trainable": trainable,
            "trainable_tensors": tensors, "trainable_tensor_count": len(tensors),
            "targets": targets, "target_count": len(targets), "resolved": resolved}


def _observations(model_type: str, result: dict) -> str:
    """Extra notes derived from what peft matched (MoE handling in particular)."""
    out = []
    tp = result["resolved"]["target_parameters"]
    if tp:
        out.append("peft's transformers-v5 MoE conversion mapped the v4 expert/router names onto "
                   f"nn.Parameters {tp} (lora.ParamWrapper: A is [r*E, in], B is [out, r*E] for E "
                   "experts)")
        if result["resolved"]["rank_pattern"]:
            out.append("fused gate_up_proj gets rank 2r (and alpha 2*alpha) via rank_pattern, "
                       "because it holds two v4 projections")
    elif model_type in ("qwen2_moe",):
        out.append("no v4->v5 MoE conversion for model_type qwen2_moe in this peft version: the "
                   "fused 3-D routed experts and the router (not nn.Linear) are not targeted; "
                   "only nn.Linear layers (attention, shared expert, shared_expert_gate) are")
    return "".join("; " + o for o in out)


def render(doc: dict) -> str:
    """2-space indented, key-sorted JSON with one tensor / target per line."""
    doc = dict(doc)
    lists = {}
    for key in ("trainable_tensors", "targets"):
        if key in doc:
            lists[key] = doc.pop(key)
            doc[key] = f"@@{key}@@"
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True)
    for key, items in lists.items():
        rows = ",\n".join("    " + json.dumps(t, sort_keys=True) for t in items)
        text = text.replace(f'"@@{key}@@"', "[\n" + rows + "\n  ]" if rows else "[]")
    return text + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="only ids containing this substring (other fixtures are kept)")
    ap.add_argument("--check", action="store_true", help="compare with existing fixtures, write nothing")
    args = ap.parse_args(argv)

    _quiet()
    import peft
    import torch
    import transformers
    transformers.logging.set_verbosity_error()

    versions = {"peft_version": peft.__version__, "transformers_version": transformers.__version__,
                "torch_version": torch.__version__}
    cases = [c for c in all_cases() if not args.only or args.only in c[0]]
    ids = [c[0] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    FIXTURES_DIR.mkdir(parents=True, exist_ok=True)
    if not args.check and not args.only:
        for old in FIXTURES_DIR.glob("*.json"):
            old.unlink()

    mismatches, errors = [], 0
    start = time.time()
    for case_id, model_type, source, raw, lora_kw, notes in cases:
        t0 = time.time()
        doc = {"id": case_id, "model_type": model_type, "source": source, "config": raw,
               "lora": _jsonable(lora_kw), "notes": notes, **versions}
        try:
            result = measure(raw, lora_kw)
        except Exception as exc:  # peft refuses the configuration: record it
            errors += 1
            doc["error"] = f"{type(exc).__name__}: {exc}"
            print(f"ERROR {case_id}: {doc['error'][:150]}")
        else:
            if result["trainable_tensor_count"] > MAX_LISTED:
                del result["trainable_tensors"]
            if result["target_count"] > MAX_LISTED:
                del result["targets"]
            doc.update(result)
            doc["notes"] = notes + _observations(model_type, result)
            print(f"{case_id:58s} {doc['total']:>16,d} {doc['trainable']:>14,d} {time.time() - t0:6.2f}s")
        out = FIXTURES_DIR / f"{case_id}.json"
        if args.check:
            old = json.loads(out.read_text()) if out.exists() else None
            keys = ("total", "trainable", "trainable_tensors", "targets", "error")
            if old is None or any(old.get(k) != doc.get(k) for k in keys):
                mismatches.append(case_id)
                print(f"DIFF  {case_id}", file=sys.stderr)
        else:
            out.write_text(render(doc))

    print(f"\n{len(cases)} cases ({errors} rejected by peft, recorded with 'error'), "
          f"{len(mismatches)} differ, {time.time() - start:.1f}s "
          f"(peft {versions['peft_version']}, transformers {versions['transformers_version']}, "
          f"torch {versions['torch_version']})")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
