#!/usr/bin/env python3
"""Measure the state every supported optimizer keeps, tensor by tensor.

trainmem computes optimizer-state memory from rules ("Adam keeps two tensors of
the parameter's shape and dtype, plus a 0-d fp32 step"). This script produces
the golden fixtures those rules are tested against: it builds a fixed set of
parameter tensors, runs one real optimizer step on CPU, then walks
``optimizer.state`` (and any state the implementation keeps elsewhere) and
records every tensor it finds with its shape, dtype, device and byte size.

Run from the repository root::

    /work/venv/bin/python tools/measure_optimizers.py            # all optimizers
    /work/venv/bin/python tools/measure_optimizers.py adam lion  # a subset

It writes one JSON file per optimizer, variant and parameter dtype to
``tests/fixtures/optimizers/<name>[_<variant>]__<fp32|bf16>.json`` (2-space
indented, keys in a fixed order) and prints one summary line per file. The
whole run takes under a minute on a 2-core CPU (no GPU needed: bitsandbytes
0.50 runs its 8-bit optimizers on CPU; AdaLomo's unconditional .cuda() calls
are kept on CPU). A variant (``galore-adamw_rank4``, ``lbfgs_history10``,
``adafactor-hf_beta1-0.9``, ``adam-mini_transformer-names``, ``soap_reference``)
is the same trainmem optimizer under other options; the file without a variant
uses the defaults.

Packages (the versions the committed fixtures were measured with; each fixture
records the version it actually saw)::

    torch 2.15.0            sgd ... asgd, adafactor, muon, lbfgs
    transformers 5.24.0     adafactor-hf (and lomo-optim imports it)
    bitsandbytes 0.50.2     adamw-8bit, paged-adamw-8bit, lion-8bit (CPU backend)
    torchao 0.18.0          adamw-4bit, adamw-fp8
    lion-pytorch 0.2.5      lion
    sophia-opt 0.2.2        sophia (SophiaG)
    pytorch-optimizer 4.1.0 lamb, lars, adan, shampoo, soap
    came-pytorch 0.1.3      came
    adam-mini 1.1.1         adam-mini
    schedulefree 1.4.1      schedule-free-adamw
    galore-torch 1.0        galore-adamw
    lomo-optim 0.1.1        lomo, adalomo

Install the extras without letting pip touch torch::

    /work/venv/bin/pip install lion-pytorch sophia-opt came-pytorch adam-mini \
        schedulefree galore-torch pytorch-optimizer lomo-optim

Fixture format (one file)::

    {"optimizer": trainmem name, "variant": null | "rank4" | ...,
     "measured": true, "package": "torch 2.15.0", "class": "torch.optim.adam.Adam",
     "options": {settings that shape the state, passed or fixed},
     "hyperparameters": {the last param group, as the optimizer holds it},
     "param_dtype": "fp32" | "bf16",
     "params": [{"name", "shape", "dtype"}],
     "state": [{"param", "key", "shape", "dtype", "device", "numel",
                "element_size", "bytes"} | {"param", "key", "type", "value", "bytes": 0}],
     "global_state": [same record shape, "param": null],
     "total_bytes": bytes of every distinct storage the state holds, "notes": "..."}

``bytes`` is numel * element_size of the tensor itself. A tensor record carries
``"alias_of"`` when its storage is the storage of an earlier record, a parameter
or a gradient, and ``"storage_bytes"`` when it is a view into a larger storage.
``total_bytes`` sums ``storage_bytes`` (else ``bytes``) over the records that
are not aliases: the memory the state really pins. Tensor subclasses (torchao's
quantized states) are flattened into their inner tensors, with the key
``<state key>.<inner name>`` and a ``"wrapper"`` field naming the subclass.
Keys inside nested containers read ``GG[0]``, ``projector.ortho_matrix``.

Derived fixtures (an implementation that is not on PyPI, read from its source)
carry ``"measured": false`` and ``"derived_from": "<repo>/<path>@<commit>"``
and the same ``state`` records, built by a function that documents the rule.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import math
import os
import sys
import time
import traceback
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = REPO_ROOT / "tests" / "fixtures" / "optimizers"

# The parameter inventory every optimizer is measured on (name, shape).
PARAM_SHAPES: list[tuple[str, tuple[int, ...]]] = [
    ("vector_small", (100,)),
    ("vector", (4096,)),
    ("vector_odd", (5000,)),
    ("matrix", (256, 512)),
    ("matrix_odd", (300, 77)),
    ("tiny_matrix", (16, 16)),  # under the 4096-element 8-bit threshold
    ("experts", (4, 64, 96)),  # 3-D stack
    ("conv", (32, 16, 3, 3)),  # 4-D
    ("embedding", (1000, 64)),
    ("scalar_like", (1,)),
]

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

SEED = 0


# --------------------------------------------------------------------------
# Parameters and gradients
# --------------------------------------------------------------------------


def make_params(dtype: torch.dtype, only: Callable[[str, tuple], bool] | None = None):
    """Fresh named parameters on CPU, seeded so every run sees the same values."""
    torch.manual_seed(SEED)
    named = []
    for name, shape in PARAM_SHAPES:
        if only is not None and not only(name, shape):
            continue
        named.append((name, torch.nn.Parameter(torch.randn(shape, dtype=dtype))))
    return named


def set_random_grads(named) -> None:
    for _, p in named:
        p.grad = torch.randn_like(p)


class ParamModule(torch.nn.Module):
    """A module holding the inventory, for optimizers that take a model (LOMO)."""

    def __init__(self, named):
        super().__init__()
        for name, p in named:
            self.register_parameter(name, p)
        torch.manual_seed(SEED + 1)
        # A fixed random direction per parameter: loss = sum(p * c) gives grad = c.
        self.directions = {name: torch.randn_like(p.detach()) for name, p in named}

    def loss(self):
        return sum((p * self.directions[n]).sum() for n, p in self.named_parameters())


# --------------------------------------------------------------------------
# Walking state
# --------------------------------------------------------------------------


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def json_safe(value: Any) -> Any:
    """Hyper-parameter values as JSON (tensors become numbers, tuples lists)."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else f"tensor{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    return repr(value)


class StateWalker:
    """Turns arbitrary optimizer state into flat records, detecting aliases."""

    def __init__(self, named_params):
        self.storage_owner: dict[int, str] = {}
        for name, p in named_params:
            self._claim(p, f"param:{name}")
            if p.grad is not None:
                self._claim(p.grad, f"grad:{name}")

    def _claim(self, t: torch.Tensor, label: str) -> str | None:
        """Remember who owns t's storage; return the earlier owner if any."""
        if t.numel() == 0 or t.device.type == "meta":
            return None
        ptr = t.untyped_storage().data_ptr()
        if ptr in self.storage_owner:
            return self.storage_owner[ptr]
        self.storage_owner[ptr] = label
        return None

    def walk(self, param: str | None, key: str, value: Any, out: list, wrapper: str | None = None):
        if isinstance(value, torch.Tensor):
            if is_traceable_wrapper_subclass(value):
                inner_names, _ = value.__tensor_flatten__()
                desc = (
                    f"{type(value).__name__}(shape={list(value.shape)}, "
                    f"dtype={dtype_name(value.dtype)})"
                )
                for inner in inner_names:
                    self.walk(param, f"{key}.{inner}", getattr(value, inner), out, wrapper=desc)
                return
            record = {
                "param": param,
                "key": key,
                "shape": list(value.shape),
                "dtype": dtype_name(value.dtype),
                "device": str(value.device),
                "numel": value.numel(),
                "element_size": value.element_size(),
                "bytes": value.numel() * value.element_size(),
            }
            storage_bytes = value.untyped_storage().nbytes()
            if storage_bytes != record["bytes"]:
                # A view into a larger buffer (e.g. one of a stack of norms).
                record["storage_bytes"] = storage_bytes
            if wrapper:
                record["wrapper"] = wrapper
            owner = self._claim(value, f"{param}/{key}" if param else key)
            if owner is not None:
                record["alias_of"] = owner
            out.append(record)
        elif isinstance(value, dict):
            if not value:
                out.append(self._plain(param, key, value))
            for k, v in value.items():
                self.walk(param, f"{key}.{k}" if key else str(k), v, out, wrapper)
        elif isinstance(value, (list, tuple)):
            if not value or all(v is None or isinstance(v, (int, float, bool)) for v in value):
                out.append(self._plain(param, key, value))
            else:
                i = 0
                while i < len(value):
                    if value[i] is None:  # a run of None slots (LBFGS's al) as one record
                        j = i
                        while j < len(value) and value[j] is None:
                            j += 1
                        out.append(self._plain(param, f"{key}[{i}:{j}]", value[i:j]))
                        i = j
                        continue
                    self.walk(param, f"{key}[{i}]", value[i], out, wrapper)
                    i += 1
        elif value is None or isinstance(value, (bool, int, float, str)):
            out.append(self._plain(param, key, value))
        elif hasattr(value, "__dict__"):
            # Python objects kept in state (GaLore's projector): walk their attributes.
            out.append(self._plain(param, key, value))
            for k, v in vars(value).items():
                if isinstance(v, (torch.Tensor, list, tuple, dict)) or hasattr(v, "__dict__"):
                    self.walk(param, f"{key}.{k}", v, out, wrapper)
        else:
            out.append(self._plain(param, key, value))

    @staticmethod
    def _plain(param, key, value):
        if isinstance(value, (list, tuple)):
            shown = f"{type(value).__name__} of {len(value)}"
            if value and all(v is None for v in value):
                shown += " None"
        elif isinstance(value, dict):
            shown = "empty dict"
        elif value is None or isinstance(value, (bool, int, str)):
            shown = value
        elif isinstance(value, float):
            shown = json_safe(value)
        else:
            shown = f"<{type(value).__module__}.{type(value).__qualname__} object>"
        return {"param": param, "key": key, "type": type(value).__name__, "value": shown, "bytes": 0}


# Param-group keys as they were before an optimizer's first step(): keys added
# later (pytorch-optimizer keeps 'step' in the group) are state, not options.
GROUP_KEYS_BEFORE_STEP: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _remember_group_keys(optimizer, args, kwargs):
    if optimizer not in GROUP_KEYS_BEFORE_STEP:
        GROUP_KEYS_BEFORE_STEP[optimizer] = [set(g.keys()) for g in optimizer.param_groups]


register_optimizer_step_pre_hook(_remember_group_keys)


# --------------------------------------------------------------------------
# Optimizer specifications
# --------------------------------------------------------------------------


@dataclass
class Run:
    """What one measurement produced, before it becomes JSON."""

    optimizer: Any
    named: list  # the (name, Parameter) pairs that took part
    global_extra: list = field(default_factory=list)  # (key, value) outside optimizer.state
    state_as_global: bool = False  # LBFGS keeps global state under params[0]
    notes: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # additional top-level fixture fields


@dataclass
class Spec:
    name: str  # trainmem's optimizer name (the contract)
    package: str  # distribution whose version is recorded
    cls: str  # fully qualified class
    run: Callable[[torch.dtype], Run]
    options: dict = field(default_factory=dict)
    variant: str | None = None
    notes: str = ""
    measured: bool = True
    derived_from: str | None = None  # "<repo>/<path>@<commit>" for derived fixtures


def torch_step(cls, **kwargs):
    """Build a standard torch-style optimizer over all parameters, one step."""

    def run(dtype):
        named = make_params(dtype)
        opt = cls([p for _, p in named], **kwargs)
        set_random_grads(named)
        opt.step()
        return Run(opt, named)

    return run


def run_muon(dtype):
    notes = []
    try:
        named = make_params(dtype)
        torch.optim.Muon([p for _, p in named])
    except ValueError as err:
        notes.append(
            f"With every tensor in one group, torch.optim.Muon() raises at construction: "
            f"ValueError('{err}'). It accepts only 2-D parameters, so this fixture holds the "
            "2-D tensors alone (matrix, matrix_odd, tiny_matrix, embedding); the others "
            "belong to a second optimizer (usually AdamW), as torch's docs advise."
        )
    named = make_params(dtype, only=lambda n, s: len(s) == 2)
    opt = torch.optim.Muon([p for _, p in named])
    set_random_grads(named)
    opt.step()
    return Run(opt, named, notes=notes)


def make_lbfgs_run(history_size: int):
    def run(dtype):
        named = make_params(dtype)
        params = [p for _, p in named]
        opt = torch.optim.LBFGS(params, history_size=history_size)
        # A strictly convex, ill-conditioned quadratic so that every inner
        # iteration has y.s > 0 and adds a history pair.
        torch.manual_seed(SEED + 2)
        curv = [torch.rand_like(p, dtype=torch.float32).mul_(100).add_(0.01) for p in params]
        target = [torch.randn_like(p) for p in params]

        def closure():
            opt.zero_grad()
            loss = sum(
                (0.5 * c * (p.float() - t.float()) ** 2).sum()
                for p, c, t in zip(params, curv, target)
            )
            loss.backward()
            return loss

        opt.step(closure)
        state = opt.state[params[0]]
        after_one = len(state.get("old_dirs", []))
        notes = [
            f"After one step() (max_iter=20 inner iterations) the history holds "
            f"{after_one} (s, y) pairs of history_size={history_size}."
        ]
        return Run(opt, named, state_as_global=True, notes=notes)

    return run


def run_lbfgs_steady(history_size: int, dtype) -> tuple[int, int, int]:
    """Steps until the history is full; returns (steps, pairs held, history bytes)."""
    named = make_params(dtype)
    params = [p for _, p in named]
    opt = torch.optim.LBFGS(params, history_size=history_size)
    torch.manual_seed(SEED + 2)
    curv = [torch.rand_like(p, dtype=torch.float32).mul_(100).add_(0.01) for p in params]
    target = [torch.randn_like(p) for p in params]

    def closure():
        opt.zero_grad()
        loss = sum(
            (0.5 * c * (p.float() - t.float()) ** 2).sum() for p, c, t in zip(params, curv, target)
        )
        loss.backward()
        return loss

    for steps in range(1, 30):
        opt.step(closure)
        if len(opt.state[params[0]].get("old_dirs", [])) >= history_size:
            break
    state = opt.state[params[0]]
    total = sum(t.numel() * t.element_size() for t in state["old_dirs"] + state["old_stps"])
    return steps, len(state["old_dirs"]), total


def run_adafactor_hf(beta1):
    def run(dtype):
        from transformers.optimization import Adafactor

        named = make_params(dtype)
        opt = Adafactor([p for _, p in named], beta1=beta1)
        set_random_grads(named)
        opt.step()
        return Run(opt, named)

    return run


def run_sophia(dtype):
    from sophia_opt import SophiaG

    named = make_params(dtype)
    opt = SophiaG([p for _, p in named])
    set_random_grads(named)
    opt.step()
    # The training loop refreshes the Hessian estimate every k steps: a second
    # backward on sampled labels, then update_hessian() reads p.grad.
    set_random_grads(named)
    opt.update_hessian()
    return Run(opt, named, notes=["step() then update_hessian() (with fresh random grads)."])


def run_adam_mini(dtype):
    from adam_mini import Adam_mini

    named = make_params(dtype)
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        opt = Adam_mini(named, verbose=False)
        set_random_grads(named)
        opt.step()
    return Run(opt, named)


def run_adam_mini_roles(dtype):
    """Adam-mini with transformer-style names, so every partition rule is exercised."""
    from adam_mini import Adam_mini

    roles = {
        "vector_small": "layers.0.mlp.down_proj.bias",  # 'bias': plain Adam
        "vector": "layers.0.input_layernorm.weight",  # other: one v per tensor
        "vector_odd": "norm.weight",  # other
        "matrix": "layers.0.self_attn.q_proj.weight",  # per head: dim*dim/n_heads
        "matrix_odd": "layers.0.mlp.down_proj.weight",  # 'mlp': one v per row
        "tiny_matrix": "layers.0.self_attn.v_proj.weight",  # 'v_proj': one v per row
        "experts": "layers.0.block_sparse_moe.experts.weight",  # no keyword: one v per tensor
        "conv": "vision.conv1.weight",  # no keyword: one v per tensor
        "embedding": "embed_tokens.weight",  # 'embed': one v per row (token)
        "scalar_like": "layers.0.self_attn.o_proj.bias",  # 'bias'
    }
    named = make_params(dtype)
    renamed = [(roles[n], p) for n, p in named]
    dim, n_heads = 256, 4
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        opt = Adam_mini(renamed, verbose=False, dim=dim, n_heads=n_heads)
        set_random_grads(named)
        opt.step()
    notes = [
        f"Parameters renamed to transformer roles (see adam_mini_names); dim={dim}, "
        f"n_heads={n_heads}, so q/k head_numel = dim*dim/n_heads = {dim * dim // n_heads}."
    ]
    # Per-row rules assume a matrix: probe what a 3-D or 4-D tensor under such a name does.
    for probe_name, shape_name in [("layers.0.mlp.experts.weight", "experts"),
                                   ("patch_embed.proj.weight", "conv")]:
        probe = make_params(dtype, only=lambda n, s: n == shape_name)
        try:
            with contextlib.redirect_stdout(open(os.devnull, "w")):
                popt = Adam_mini([(probe_name, probe[0][1])], verbose=False, dim=dim, n_heads=n_heads)
                set_random_grads(probe)
                popt.step()
            notes.append(f"Probe: {shape_name} named {probe_name!r} ran.")
        except Exception as err:  # noqa: BLE001 - we record whatever it raises
            notes.append(
                f"Probe: {shape_name} {list(probe[0][1].shape)} named {probe_name!r} raises "
                f"{type(err).__name__}: {err} (the per-row branch views the update as "
                "[shape[0], 1]); so this fixture names those tensors without a keyword."
            )
    return Run(opt, named, notes=notes, extra={"adam_mini_names": roles, "dim": dim, "n_heads": n_heads})


def run_schedulefree(dtype):
    from schedulefree import AdamWScheduleFree

    named = make_params(dtype)
    opt = AdamWScheduleFree([p for _, p in named])
    opt.train()
    set_random_grads(named)
    opt.step()
    return Run(opt, named, notes=["optimizer.train() called before step(), as the API requires."])


def make_galore_run(rank: int):
    def run(dtype):
        from galore_torch import GaLoreAdamW

        named = make_params(dtype)
        galore = [p for n, p in named if p.dim() == 2]
        regular = [p for n, p in named if p.dim() != 2]
        groups = [
            {"params": regular},
            {"params": galore, "rank": rank, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std"},
        ]
        opt = GaLoreAdamW(groups)
        set_random_grads(named)
        opt.step()
        notes = [
            "GaLore needs a param group carrying 'rank'; its projector only handles 2-D "
            "tensors, so (as in the GaLore README) the 2-D tensors (matrix, matrix_odd, "
            "tiny_matrix, embedding) form the GaLore group (rank, update_proj_gap=200, "
            "scale=0.25, proj_type='std') and the rest a plain AdamW group."
        ]
        # Does the projector accept a 3-D tensor? Record what happens.
        probe = make_params(dtype, only=lambda n, s: n == "experts")
        try:
            popt = GaLoreAdamW([{"params": [probe[0][1]], "rank": rank, "update_proj_gap": 200,
                                 "scale": 0.25, "proj_type": "std"}])
            set_random_grads(probe)
            popt.step()
            st = popt.state[probe[0][1]]
            notes.append(f"Probe: a 3-D tensor in the GaLore group ran; exp_avg shape {list(st['exp_avg'].shape)}.")
        except Exception as err:  # noqa: BLE001 - we record whatever it raises
            notes.append(f"Probe: a 3-D tensor [4, 64, 96] in the GaLore group raises {type(err).__name__}: {err}")
        return Run(opt, named, notes=notes)

    return run


def run_lomo(dtype):
    from lomo_optim import Lomo

    named = make_params(dtype)
    model = ParamModule(named)
    opt = Lomo(model, lr=1e-3)
    loss = model.loss()
    opt.fused_backward(loss, lr=1e-3)
    grads_left = [n for n, p in named if p.grad is not None]
    notes = [
        "Lomo(model).fused_backward(loss, lr): the update runs inside gradient hooks during "
        "backward, each gradient is freed (p.grad = None) right after its update. "
        f"Parameters still holding a .grad afterwards: {grads_left or 'none'}. "
        "Transients per update: grad.to(float32) and p.data.to(float32) copies (no copy when "
        "the parameter is already fp32)."
    ]
    return Run(opt, named, notes=notes)


@contextlib.contextmanager
def cuda_calls_stay_on_cpu():
    """AdaLomo calls .cuda() on its state unconditionally; keep it on CPU here."""
    original = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self
    try:
        yield
    finally:
        torch.Tensor.cuda = original


def run_adalomo(dtype):
    from lomo_optim import AdaLomo

    notes = []
    named = make_params(dtype)
    model = ParamModule(named)
    with cuda_calls_stay_on_cpu():
        opt = AdaLomo(model, lr=1e-3)
    try:
        opt.fused_backward(model.loss(), lr=1e-3)
        notes.append("fused_backward ran with every tensor.")
    except Exception as err:  # noqa: BLE001
        notes.append(
            f"With all tensors, fused_backward raises {type(err).__name__}: {str(err).splitlines()[0]} "
            "(AdaLomo factors only the first two dims: row [shape[0]], col [shape[1]], which "
            "cannot hold mean(dim=-1) of a 3-D or 4-D gradient). The state below was allocated "
            "by __init__ for every parameter, including 3-D/4-D, before the failing update."
        )
    for shape_name in ("experts", "conv"):
        probe = make_params(dtype, only=lambda n, s: n == shape_name)
        probe_model = ParamModule(probe)
        with cuda_calls_stay_on_cpu():
            probe_opt = AdaLomo(probe_model, lr=1e-3)
        try:
            probe_opt.fused_backward(probe_model.loss(), lr=1e-3)
            notes.append(f"Probe: {shape_name} alone ran.")
        except Exception as err:  # noqa: BLE001
            notes.append(f"Probe: {shape_name} alone raises {type(err).__name__}: "
                         f"{str(err).splitlines()[0]}.")
    extra = [("exp_avg_sq", opt.exp_avg_sq), ("exp_avg_sq_row", opt.exp_avg_sq_row),
             ("exp_avg_sq_col", opt.exp_avg_sq_col)]
    notes.append(
        "State lives in three dicts on the optimizer keyed by parameter name "
        "(exp_avg_sq, exp_avg_sq_row, exp_avg_sq_col), all allocated in __init__, not in "
        "optimizer.state; recorded here per parameter. AdaLomo calls .cuda() on them "
        "unconditionally: for this CPU run Tensor.cuda was patched to return the tensor "
        "unchanged, so device reads cpu; on a GPU machine it is cuda:0."
    )
    run = Run(opt, named, notes=notes)
    run.extra["per_param_dicts"] = extra
    return run


def run_bnb(cls_name: str):
    def run(dtype):
        import bitsandbytes as bnb

        cls = getattr(bnb.optim, cls_name)
        named = make_params(dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = cls([p for _, p in named])
            set_random_grads(named)
            opt.step()
        extra = [(f"name2qmap.{k}", v) for k, v in opt.name2qmap.items()]
        return Run(opt, named, global_extra=extra)

    return run


def make_galore_8bit_run(rank: int):
    """galore-torch's GaLoreAdamW8bit (galore_torch/adamw8bit.py): bitsandbytes'
    Optimizer2State whose init_state runs after p.data was replaced by the
    projected gradient, so the 8-bit states take the projected shape. Its
    step() calls torch.cuda.synchronize() unconditionally: a no-op here (CPU)."""
    def run(dtype):
        from galore_torch import GaLoreAdamW8bit

        named = make_params(dtype)
        galore = [p for n, p in named if p.dim() == 2]
        regular = [p for n, p in named if p.dim() != 2]
        groups = [
            {"params": regular},
            {"params": galore, "rank": rank, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std"},
        ]
        sync = torch.cuda.synchronize
        torch.cuda.synchronize = lambda *a, **k: None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt = GaLoreAdamW8bit(groups)
                set_random_grads(named)
                opt.step()
        finally:
            torch.cuda.synchronize = sync
        extra = [(f"name2qmap.{k}", v) for k, v in opt.name2qmap.items()]
        notes = [
            "As galore-adamw, the 2-D tensors form the GaLore group (rank, update_proj_gap=200, "
            "scale=0.25, proj_type='std') and the rest a plain group (plain bitsandbytes 8-bit "
            "state). torch.cuda.synchronize (called unconditionally by step()) was made a no-op."
        ]
        return Run(opt, named, global_extra=extra, notes=notes)

    return run


@contextlib.contextmanager
def eager_torch_compile():
    """Make torch.compile(fn, ...) return fn unchanged for the duration."""
    original = torch.compile
    torch.compile = lambda fn=None, **kwargs: fn if fn is not None else (lambda f: f)
    try:
        yield
    finally:
        torch.compile = original


def run_torchao(cls_name: str):
    def run(dtype):
        import torchao.optim

        cls = getattr(torchao.optim, cls_name)
        named = make_params(dtype)
        opt = cls([p for _, p in named])
        set_random_grads(named)
        # torchao compiles its per-parameter update with torch.compile; the state
        # buffers are created eagerly before that call, so running the update
        # eagerly changes nothing in what is stored and saves minutes of compiling.
        with eager_torch_compile():
            opt.step()
        return Run(opt, named, notes=[
            "step() ran with torch.compile replaced by the identity (eager "
            "single_param_adam) to skip minutes of compiling; the state buffers are "
            "allocated before and outside the compiled function, so they are unchanged."
        ])

    return run


def generic(cls_path: str, **kwargs):
    def run(dtype):
        module, _, name = cls_path.rpartition(".")
        cls = getattr(__import__(module, fromlist=[name]), name)
        named = make_params(dtype)
        opt = cls([p for _, p in named], **kwargs)
        set_random_grads(named)
        opt.step()
        return Run(opt, named)

    return run


# --------------------------------------------------------------------------
# Derived (not measured) state, for implementations that are not on PyPI
# --------------------------------------------------------------------------


def derived_tensor(param, key, shape, dtype, device="cpu"):
    numel = math.prod(shape)
    size = torch.empty((), dtype=dtype).element_size()
    return {"param": param, "key": key, "shape": list(shape), "dtype": dtype_name(dtype),
            "device": device, "numel": numel, "element_size": size, "bytes": numel * size}


def derived_plain(param, key, value):
    return StateWalker._plain(param, key, value)


SOAP_REFERENCE = "nikhilvyas/SOAP/soap.py@01df67645a86f85033bfa5e7c21e09e953696ff5"
SOAP_REFERENCE_DEFAULTS = {
    "lr": 3e-3, "betas": [0.9, 0.95], "shampoo_beta": 0.95, "eps": 1e-8,
    "weight_decay": 0.01, "precondition_frequency": 2, "max_precond_dim": 10000,
    "merge_dims": False, "precondition_1d": False, "normalize_grads": False,
    "correct_bias": True, "warmup_steps": 1,
}


def derive_soap_reference(dtype):
    """The reference SOAP's state after its first step(), read from its source.

    step() reads grad = p.grad.float() and sets p.grad = None, then on the first
    call: state['step'] = 0, exp_avg/exp_avg_sq = zeros_like(grad, float32),
    init_preconditioner: Q = None, GG = [[]] for a 1-D tensor (precondition_1d
    False), else one zeros(sh, sh) in grad's dtype (fp32) per dim sh <=
    max_precond_dim and [] for a larger dim; update_preconditioner then sets
    Q = get_orthogonal_matrix(GG): eigh per non-empty GG, cast back to fp32,
    [] where GG is []. The first step 'continue's before any update.
    """
    named = make_params(dtype)
    max_dim = SOAP_REFERENCE_DEFAULTS["max_precond_dim"]
    records = []
    for name, p in named:
        records.append(derived_plain(name, "step", 0))
        records.append(derived_tensor(name, "exp_avg", p.shape, torch.float32))
        records.append(derived_tensor(name, "exp_avg_sq", p.shape, torch.float32))
        dims = [] if p.dim() == 1 else list(p.shape)
        for key in ("Q", "GG"):
            if not dims:
                records.append(derived_plain(name, f"{key}[0]", []))
            for i, sh in enumerate(dims):
                if sh > max_dim:
                    records.append(derived_plain(name, f"{key}[{i}]", []))
                else:
                    records.append(derived_tensor(name, f"{key}[{i}]", (sh, sh), torch.float32))
    notes = [
        "Derived, not measured: the reference SOAP (Vyas et al.) is not on PyPI. "
        "Rule: every state tensor is fp32 whatever the param dtype (step() works on "
        "p.grad.float()); exp_avg and exp_avg_sq of the param's shape; for a tensor of "
        "2+ dims, GG[i] and Q[i] are [d_i, d_i] fp32 for each dim d_i <= max_precond_dim "
        "(10000) and an empty list for a larger dim; a 1-D tensor gets no GG/Q "
        "(precondition_1d=False); step is a python int (0 after the first call). "
        "merge_dims=True would first reshape [o, i, k, k] to merged dims (dim_merger) and "
        "precondition those. step() also sets p.grad = None, freeing the gradient. "
        "The first step() only initialises (it 'continue's before the update). Compare the "
        "measured soap fixture (pytorch-optimizer's port), which keeps state in the "
        "gradient's dtype (bf16 for bf16 params)."
    ]
    return named, records, [], notes


O = torch.optim
# bitsandbytes keeps these outside the param group (optimizer.args); block size is
# hard-coded in init_state.
BNB_OPTIONS = {"optim_bits": 8, "min_8bit_size": 4096, "block_size": 256,
               "percentile_clipping": 100, "max_unorm": 0.0}
BNB_NOTE = (
    "bitsandbytes 0.50.2 runs its 8-bit optimizers on CPU. Rule (Optimizer2State/"
    "Optimizer1State.init_state): a tensor with numel < min_8bit_size (4096) gets fp32 "
    "state1 (and state2) of its shape whatever the param dtype; a tensor with numel >= 4096 "
    "gets uint8 state1/state2 of its shape, absmax1/absmax2 fp32 [ceil(numel / 256)] "
    "(blocksize 256 hard-coded), and qmap1/qmap2 that are references to the optimizer-wide "
    "name2qmap['dynamic'] / ['udynamic'] (256 fp32 each, allocated once per optimizer, both "
    "even for one-state optimizers; listed under global_state and counted once). "
    "step is a python int. max_unorm > 0 would add unorm_vec fp32 [1]."
)
PAGED_NOTE = (
    " Paged: on CPU bitsandbytes warns 'Paged optimizers are not supported on CPU' and "
    "allocates ordinary tensors, so this fixture equals adamw-8bit. On CUDA (read from "
    "Optimizer8bit.get_state_buffer): state1/state2 of a tensor with numel >= 1e5 (here "
    "matrix only) come from F.get_paged (cudaMallocManaged unified memory wrapped with "
    "torch.frombuffer): same bytes, but outside PyTorch's caching allocator and evictable to "
    "host RAM; smaller tensors and absmax stay ordinary device tensors."
)
PAGED_32BIT_NOTE = (
    "bitsandbytes 0.50.2 PagedAdamW (optim_bits=32, is_paged=True; Optimizer2State.init_state): "
    "state1 and state2 fp32 of the param's shape for every tensor, whatever the param dtype "
    "(32-bit: no absmax, no qmap); step is a python int. Paged: on CPU get_state_buffer warns "
    "and returns torch.zeros_like; on CUDA (Optimizer8bit.get_state_buffer) state1/state2 of a "
    "tensor with numel >= 1e5 (here matrix only) come from F.get_paged (cudaMallocManaged "
    "unified memory wrapped with torch.frombuffer): the same bytes, outside PyTorch's caching "
    "allocator (torch.cuda.memory_allocated does not count them) and evictable to host RAM."
)
GALORE_8BIT_NOTE = (
    "galore-torch 1.0 GaLoreAdamW8bit.step: for a tensor of the GaLore group, "
    "grad = projector.project(p.grad) (GaLoreAdamW's projection: [m, r] if m >= n else [r, n], "
    "r = min(rank, m, n)); p.data is replaced by a zeroed clone of that projected gradient "
    "before init_state, so bitsandbytes' 8-bit rule applies to the PROJECTED shape: uint8 "
    "state1/state2 of the projected shape and absmax1/absmax2 fp32 [ceil(numel / 256)] if the "
    "projected numel >= min_8bit_size (4096), else fp32 state1/state2 of the projected shape; "
    "qmap1/qmap2 reference the optimizer-wide maps. projector.ortho_matrix as in galore-adamw "
    "(a view pinning the whole fp32 SVD factor for fp32 params). AdamW8bit.__init__ passes "
    "percentile_clipping (100) into Optimizer2State's max_unorm slot, so every tensor also gets "
    "unorm_vec fp32 [1]. The rest of the params: plain 8-bit state of their own shape."
)
TORCHAO_NOTE = (
    "torchao rule (_AdamBase._new_buffer): a buffer is quantized only when numel >= 4096 "
    "and numel % block_size == 0, else it is zeros_like(p) in the param dtype. "
)
TORCHAO_4BIT_NOTE = TORCHAO_NOTE + (
    "AdamW4bit, block_size 128: OptimState4bit with codes uint8 [numel / 2] (flat, two codes "
    "per byte), scale fp32 [numel / 128], qmap fp32 [16] per buffer (not shared). "
    "step is a 0-d fp32 tensor; lr is turned into a 0-d fp32 tensor in param_groups."
)
TORCHAO_FP8_NOTE = TORCHAO_NOTE + (
    "AdamWFp8, block_size 256: OptimStateFp8 with codes float8_e4m3fn of the param's shape "
    "and scale fp32 [numel / 256]; no qmap. step is a 0-d fp32 tensor; lr is a 0-d fp32 "
    "tensor in param_groups."
)
GALORE_NOTE = (
    "Rule (proj_type 'std', GaLoreProjector.get_orthogonal_matrix with "
    "svd(full_matrices=False)): for a 2-D [m, n] in the GaLore group let r = "
    "min(rank, m, n); if m >= n, projector.ortho_matrix is [r, n] and exp_avg/exp_avg_sq "
    "are [m, r]; else ortho_matrix is [m, r] and exp_avg/exp_avg_sq [r, n]; all in the "
    "param dtype (the SVD runs in fp32 and is cast back). The projector is a python object "
    "in state['projector']; step a python int. Tensors outside the GaLore group get plain "
    "AdamW state. Storage: for an fp32 param ortho_matrix is a slice VIEW of the SVD factor, "
    "so it pins the whole U [m, min(m, n)] (m < n) or Vh [min(m, n), n] (m >= n) in fp32 "
    "(see storage_bytes); for bf16/fp16 params the cast back makes a compact copy."
)
LBFGS_NOTE = (
    "LBFGS keeps all its state under optimizer.state[params[0]] (global_state here), on "
    "the flattened parameter vector (N = total numel, one param group only, param dtype): "
    "d and prev_flat_grad [N]; old_dirs and old_stps lists of up to history_size [N] "
    "tensors each; ro and al lists of 0-d tensors (al starts as history_size None slots); "
    "H_diag 0-d; t a 0-d tensor after the first inner iteration and a python number after; "
    "func_evals, n_iter ints, prev_loss float. The closure here is a strictly convex "
    "quadratic so that every inner iteration adds a history pair."
)
ADAM_FOREACH_NOTE = (
    "On CPU, foreach defaults to False (torch only defaults to foreach/fused for CUDA "
    "tensors), so this measurement ran _single_tensor_adam. State is identical with "
    "foreach=True; only transients differ. Reading torch/optim/adam.py "
    "_multi_tensor_adam (torch 2.15): tensors are grouped by device and dtype; if "
    "weight_decay != 0 and not decoupled (Adam) grads are replaced by a new list "
    "torch._foreach_add(grads, params, alpha=wd) (one param-sized temporary per tensor; "
    "AdamW instead scales params in place); exp_avg.lerp_ and exp_avg_sq mul_/addcmul_ are "
    "in place; with capturable=False step sizes are python floats, then "
    "exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs) allocates one param-sized tensor per "
    "parameter (whole group at once), followed by in-place _foreach_div_/_foreach_add_ and "
    "_foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size). So the foreach peak "
    "transient is about one extra param-sized buffer for the whole group (two for "
    "Adam with L2 weight_decay, or with maximize=True, which negates grads into a new "
    "list; a tensor beta2 adds a scaled-grad list; amsgrad takes the sqrt of "
    "max_exp_avg_sqs instead, no extra). _single_tensor_adam allocates the same denom (exp_avg_sq.sqrt()/bias...) but "
    "one tensor at a time, so its transient peak is the largest single parameter. With "
    "capturable=True (or on CUDA graphs) bias corrections also become per-tensor 0-d "
    "foreach temporaries. fused=True (CUDA/CPU kernels) allocates no param-sized temporaries."
)

SPECS: list[Spec] = [
    Spec("sgd", "torch", "torch.optim.sgd.SGD", torch_step(O.SGD, lr=1e-3)),
    Spec("sgd-momentum", "torch", "torch.optim.sgd.SGD", torch_step(O.SGD, lr=1e-3, momentum=0.9),
         options={"momentum": 0.9}),
    Spec("sgd-nesterov", "torch", "torch.optim.sgd.SGD",
         torch_step(O.SGD, lr=1e-3, momentum=0.9, nesterov=True),
         options={"momentum": 0.9, "nesterov": True}),
    Spec("adam", "torch", "torch.optim.adam.Adam", torch_step(O.Adam), notes=ADAM_FOREACH_NOTE),
    Spec("adamw", "torch", "torch.optim.adamw.AdamW", torch_step(O.AdamW), notes=ADAM_FOREACH_NOTE),
    Spec("adam-amsgrad", "torch", "torch.optim.adam.Adam", torch_step(O.Adam, amsgrad=True),
         options={"amsgrad": True}),
    Spec("adamax", "torch", "torch.optim.adamax.Adamax", torch_step(O.Adamax)),
    Spec("nadam", "torch", "torch.optim.nadam.NAdam", torch_step(O.NAdam)),
    Spec("radam", "torch", "torch.optim.radam.RAdam", torch_step(O.RAdam)),
    Spec("adagrad", "torch", "torch.optim.adagrad.Adagrad", torch_step(O.Adagrad)),
    Spec("adadelta", "torch", "torch.optim.adadelta.Adadelta", torch_step(O.Adadelta)),
    Spec("rmsprop", "torch", "torch.optim.rmsprop.RMSprop", torch_step(O.RMSprop)),
    Spec("rmsprop-centered", "torch", "torch.optim.rmsprop.RMSprop",
         torch_step(O.RMSprop, centered=True, momentum=0.9),
         options={"centered": True, "momentum": 0.9}),
    Spec("rprop", "torch", "torch.optim.rprop.Rprop", torch_step(O.Rprop)),
    Spec("asgd", "torch", "torch.optim.asgd.ASGD", torch_step(O.ASGD)),
    Spec("adafactor", "torch", "torch.optim._adafactor.Adafactor", torch_step(O.Adafactor),
         notes="Rule: a tensor of 2+ dims [..., r, c] gets row_var [..., r, 1] and col_var "
               "[..., 1, c]; a 1-D tensor gets a full variance; all in the param dtype; step "
               "is a 0-d fp32 tensor. No first moment (torch's Adafactor has no beta1)."),
    Spec("adafactor-hf", "transformers", "transformers.optimization.Adafactor",
         run_adafactor_hf(None), options={"beta1": None, "relative_step": True},
         notes="Rule: a tensor of 2+ dims gets exp_avg_sq_row = shape[:-1] and exp_avg_sq_col "
               "= shape[:-2] + shape[-1:] (no keepdim); 1-D gets a full exp_avg_sq; beta1 "
               "set adds a full exp_avg. All fp32 even for bf16 params (created from "
               "grad.float()); RMS is a 0-d fp32 tensor; step a python int. Each update "
               "also makes a transient fp32 copy of a bf16/fp16 param and grad."),
    Spec("adafactor-hf", "transformers", "transformers.optimization.Adafactor",
         run_adafactor_hf(0.9), variant="beta1-0.9", options={"beta1": 0.9, "relative_step": True},
         notes="As adafactor-hf plus a full fp32 exp_avg per tensor (beta1=0.9)."),
    Spec("muon", "torch", "torch.optim._muon.Muon", run_muon,
         notes="Rule: one momentum_buffer of the param's shape and dtype per 2-D tensor; no "
               "step. Transients per tensor in step(): a bf16 copy of the update and "
               "[m, m] gram matrices (m = min(rows, cols)) during Newton-Schulz."),
    Spec("lion", "lion-pytorch", "lion_pytorch.lion_pytorch.Lion", generic("lion_pytorch.Lion"),
         notes="Rule: one exp_avg of the param's shape and dtype; no step."),
    Spec("sophia", "sophia-opt", "sophia_opt.SophiaG", run_sophia,
         notes="Rule: exp_avg and hessian of the param's shape and dtype, step a 0-d fp32 "
               "tensor (shape [1] with capturable=True)."),
    Spec("lamb", "pytorch-optimizer", "pytorch_optimizer.optimizer.lamb.Lamb",
         generic("pytorch_optimizer.Lamb"),
         notes="Rule: exp_avg and exp_avg_sq of the param's shape and dtype; step is kept in "
               "the param group. weight_norm, adam_norm and trust_ratio are 0-d views into "
               "three stacked [n_params] tensors shared by the whole group (storage_bytes)."),
    Spec("lars", "pytorch-optimizer", "pytorch_optimizer.optimizer.lars.LARS",
         generic("pytorch_optimizer.LARS"),
         notes="Rule: one momentum_buffer of the param's shape and dtype; step in the group."),
    Spec("adan", "pytorch-optimizer", "pytorch_optimizer.optimizer.adan.Adan",
         generic("pytorch_optimizer.Adan"),
         notes="Rule: exp_avg, exp_avg_sq, exp_avg_diff and previous_grad, each of the "
               "param's shape and dtype; step in the group. (The reference sail-sg/Adan keeps "
               "the same four: exp_avg, exp_avg_sq, exp_avg_diff, neg_pre_grad.)"),
    Spec("came", "came-pytorch", "came_pytorch.CAME.CAME", generic("came_pytorch.CAME", lr=2e-4),
         notes="CAME has no default lr; 2e-4 (the README's example) was passed. Rule: full "
               "exp_avg; a tensor of 2+ dims gets exp_avg_sq_row and exp_avg_res_row = "
               "shape[:-1], exp_avg_sq_col and exp_avg_res_col = shape[:-2] + shape[-1:]; "
               "1-D gets a full exp_avg_sq. All fp32 even for bf16 params (grad.float()); "
               "RMS is a 0-d tensor in the param dtype; step a python int."),
    Spec("adam-mini", "adam-mini", "adam_mini.adam_mini.Adam_mini", run_adam_mini,
         notes="Adam-mini partitions by parameter NAME (lower-cased substring match): 'bias' "
               "-> m and v of the param's shape; q/k names ('q_proj', 'k_proj', 'wq', 'wk', "
               "'query', 'key') -> m viewed [-1, dim*dim/n_heads] and vmean [heads, 1]; "
               "'embed'/'embd'/'wte', 'lm_head'/'output'/'final_layer', v names, "
               "attn-proj names, 'mlp'/'linear'/'feed_forward' -> m and vmean [shape[0], 1]; "
               "anything else -> m and a 0-d vmean. All in the param dtype; step a python int. "
               "With this inventory's names only 'embedding' matches a keyword."),
    Spec("adam-mini", "adam-mini", "adam_mini.adam_mini.Adam_mini", run_adam_mini_roles,
         variant="transformer-names", options={"dim": 256, "n_heads": 4}),
    Spec("schedule-free-adamw", "schedulefree", "schedulefree.adamw_schedulefree.AdamWScheduleFree",
         run_schedulefree,
         notes="Rule: z (a clone of the param) and exp_avg_sq, both of the param's shape and "
               "dtype; no step tensor (counters live in the group)."),
    Spec("galore-adamw", "galore-torch", "galore_torch.adamw.AdamW", make_galore_run(128),
         options={"rank": 128, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std"},
         notes=GALORE_NOTE),
    Spec("galore-adamw", "galore-torch", "galore_torch.adamw.AdamW", make_galore_run(4),
         variant="rank4", options={"rank": 4, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std"},
         notes=GALORE_NOTE),
    Spec("shampoo", "pytorch-optimizer", "pytorch_optimizer.optimizer.shampoo.Shampoo",
         generic("pytorch_optimizer.Shampoo", preconditioning_compute_steps=2),
         options={"preconditioning_compute_steps": 2},
         notes="preconditioning_compute_steps=2 (default 1) only postpones the first "
               "inverse-root computation past step 1, which saves ~2 minutes on the "
               "5000x5000 factor; every buffer is allocated at initialisation either way. "
               "Rule (textbook Shampoo, no blocking, no dimension cap): for every dim d_i of "
               "a tensor, 1-D included, pre_cond_i and inv_pre_cond_i of [d_i, d_i] in the "
               "grad's dtype; plus momentum_buffer of the param's shape (step() stores the "
               "preconditioned gradient there even with momentum=0); step in the group. "
               "Meta's Distributed Shampoo (facebookresearch/optimizers, not on PyPI) blocks "
               "tensors by max_preconditioner_dim and is not covered here."),
    Spec("soap", "pytorch-optimizer", "pytorch_optimizer.optimizer.soap.SOAP",
         generic("pytorch_optimizer.SOAP"),
         notes="Rule: exp_avg and exp_avg_sq of the param's shape; a tensor of 2+ dims gets "
               "GG[i] and Q[i] of [d_i, d_i] per dim d_i <= max_precondition_dim (10000), "
               "an empty list beyond; 1-D tensors get none (precondition_1d=False); all in "
               "the gradient's dtype (bf16 for bf16 params, unlike the reference SOAP, see "
               "soap_reference); step in the group."),
    Spec("soap", "nikhilvyas/SOAP", "soap.SOAP", derive_soap_reference, variant="reference",
         options=SOAP_REFERENCE_DEFAULTS, measured=False, derived_from=SOAP_REFERENCE),
    Spec("lbfgs", "torch", "torch.optim.lbfgs.LBFGS", make_lbfgs_run(100),
         options={"history_size": 100}, notes=LBFGS_NOTE),
    Spec("lbfgs", "torch", "torch.optim.lbfgs.LBFGS", make_lbfgs_run(10), variant="history10",
         options={"history_size": 10}, notes=LBFGS_NOTE),
    Spec("lomo", "lomo-optim", "lomo_optim.lomo.Lomo", run_lomo,
         notes="Rule: no state at all."),
    Spec("adalomo", "lomo-optim", "lomo_optim.adalomo.AdaLomo", run_adalomo),
    Spec("adamw-8bit", "bitsandbytes", "bitsandbytes.optim.adamw.AdamW8bit", run_bnb("AdamW8bit"),
         options=BNB_OPTIONS, notes=BNB_NOTE),
    Spec("paged-adamw-8bit", "bitsandbytes", "bitsandbytes.optim.adamw.PagedAdamW8bit",
         run_bnb("PagedAdamW8bit"), options=BNB_OPTIONS, notes=BNB_NOTE + PAGED_NOTE),
    Spec("paged-adamw", "bitsandbytes", "bitsandbytes.optim.adamw.PagedAdamW",
         run_bnb("PagedAdamW"), options={"optim_bits": 32, "is_paged": True},
         notes=PAGED_32BIT_NOTE),
    Spec("galore-adamw-8bit", "galore-torch", "galore_torch.adamw8bit.AdamW8bit",
         make_galore_8bit_run(128),
         options={"rank": 128, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std",
                  "optim_bits": 8, "min_8bit_size": 4096, "block_size": 256},
         notes=GALORE_8BIT_NOTE),
    Spec("galore-adamw-8bit", "galore-torch", "galore_torch.adamw8bit.AdamW8bit",
         make_galore_8bit_run(4), variant="rank4",
         options={"rank": 4, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std",
                  "optim_bits": 8, "min_8bit_size": 4096, "block_size": 256},
         notes=GALORE_8BIT_NOTE),
    Spec("lion-8bit", "bitsandbytes", "bitsandbytes.optim.lion.Lion8bit", run_bnb("Lion8bit"),
         options=BNB_OPTIONS, notes=BNB_NOTE),
    Spec("adamw-4bit", "torchao", "torchao.optim.adam.AdamW4bit", run_torchao("AdamW4bit"),
         options={"block_size": 128, "min_quant_numel": 4096}, notes=TORCHAO_4BIT_NOTE),
    Spec("adamw-fp8", "torchao", "torchao.optim.adam.AdamWFp8", run_torchao("AdamWFp8"),
         options={"block_size": 256, "min_quant_numel": 4096}, notes=TORCHAO_FP8_NOTE),
]


# --------------------------------------------------------------------------
# Measuring and writing
# --------------------------------------------------------------------------


def describe_params(named) -> list:
    return [{"name": n, "shape": list(p.shape), "dtype": dtype_name(p.dtype)} for n, p in named]


def derive(spec: Spec, dtype_label: str) -> dict:
    named, state_records, global_records, notes = spec.run(DTYPES[dtype_label])
    total = sum(r["bytes"] for r in state_records + global_records if "alias_of" not in r)
    return {
        "optimizer": spec.name,
        "variant": spec.variant,
        "measured": False,
        "derived_from": spec.derived_from,
        "package": f"{spec.package} (not on PyPI; source read at {spec.derived_from.rpartition('@')[2][:12]})",
        "class": spec.cls,
        "options": json_safe(spec.options),
        "hyperparameters": json_safe(spec.options),
        "param_dtype": dtype_label,
        "params": describe_params(named),
        "state": state_records,
        "global_state": global_records,
        "total_bytes": total,
        "notes": " ".join(filter(None, [spec.notes, *notes])),
    }


def measure(spec: Spec, dtype_label: str) -> dict:
    if not spec.measured:
        return derive(spec, dtype_label)
    dtype = DTYPES[dtype_label]
    run = spec.run(dtype)
    opt = run.optimizer
    walker = StateWalker(run.named)
    name_of = {id(p): n for n, p in run.named}

    state_records: list = []
    global_records: list = []
    # Optimizer-wide buffers first, so per-parameter references to them read as aliases.
    for key, value in run.global_extra:
        walker.walk(None, key, value, global_records)
    for p, st in opt.state.items():
        if run.state_as_global:
            walker.walk(None, "", dict(st), global_records)
        else:
            walker.walk(name_of.get(id(p), "<unknown>"), "", dict(st), state_records)

    for key, value in run.extra.pop("per_param_dicts", []):
        for pname, tensor in value.items():
            walker.walk(pname, key, tensor, state_records)
    # Tensors an optimizer keeps in its param groups (torchao's lr), and keys
    # that step() added to a group (pytorch-optimizer's group['step']).
    before = GROUP_KEYS_BEFORE_STEP.get(opt)
    for gi, group in enumerate(opt.param_groups):
        for k, v in group.items():
            added = before is not None and gi < len(before) and k not in before[gi]
            if k != "params" and (isinstance(v, torch.Tensor) or added):
                walker.walk(None, f"param_groups[{gi}].{k}", v, global_records)

    total = sum(
        r.get("storage_bytes", r["bytes"])
        for r in state_records + global_records
        if "alias_of" not in r
    )
    hyper = {k: json_safe(v) for k, v in opt.param_groups[-1].items() if k != "params"}
    version = importlib.metadata.version(spec.package)
    if not state_records and not global_records:
        run.notes.append("optimizer.state is empty after step(): this optimizer keeps no state.")
    notes = " ".join(filter(None, [spec.notes, *run.notes]))
    fixture = {
        "optimizer": spec.name,
        "variant": spec.variant,
        "measured": True,
        "package": f"{spec.package} {version}",
        "class": spec.cls,
        "options": json_safe(spec.options),
        "hyperparameters": hyper,
        "param_dtype": dtype_label,
        "params": describe_params(run.named),
        "state": state_records,
        "global_state": global_records,
        "total_bytes": total,
        "notes": notes,
    }
    fixture.update(json_safe(run.extra))
    return fixture


def fixture_path(spec: Spec, dtype_label: str) -> Path:
    stem = spec.name if spec.variant is None else f"{spec.name}_{spec.variant}"
    return FIXTURE_DIR / f"{stem}__{dtype_label}.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="optimizer names to measure (default: all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    failures = 0
    for spec in SPECS:
        if args.names and spec.name not in args.names:
            continue
        for dtype_label in DTYPES:
            path = fixture_path(spec, dtype_label)
            started = time.perf_counter()
            try:
                fixture = measure(spec, dtype_label)
            except Exception:  # noqa: BLE001 - report and carry on with the others
                failures += 1
                print(f"FAILED {path.name}", file=sys.stderr)
                traceback.print_exc()
                continue
            if spec.name == "lbfgs":
                hist = spec.options["history_size"]
                steps, n, hbytes = run_lbfgs_steady(hist, DTYPES[dtype_label])
                fixture["notes"] += (
                    f" Steady state (separate run): after {steps} step() calls the history holds "
                    f"{n} pairs; old_dirs + old_stps then take {hbytes} bytes, i.e. "
                    f"2 * history_size * (total numel) * element_size."
                )
            path.write_text(json.dumps(fixture, indent=2) + "\n")
            print(f"{path.name:48s} {fixture['total_bytes']:>12d} bytes  "
                  f"{time.perf_counter() - started:6.1f}s  "
                  f"{len(fixture['state'])} state / {len(fixture['global_state'])} global records")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
