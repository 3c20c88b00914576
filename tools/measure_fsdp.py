#!/usr/bin/env python3
"""Measure FSDP1 training steps and initialisation on CPU, two ranks (issue 24).

The same measurement as ``tools/measure_timeline.py`` (torch's profiler on
CPU, every allocation and free of one step, the baseline from a gc scan of
the live tensors; its ``analyse`` is reused), on each rank of a world of two
processes spawned on this machine with the gloo backend:
``FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy(
{LlamaDecoderLayer}), device_id=torch.device("cpu"), use_orig_params=False,
sharding_strategy=FULL_SHARD)`` (what HF Trainer and accelerate build with
``fsdp_transformer_layer_cls_to_wrap``), no mixed-precision policy (the model
in fp32, or pure bf16), ``limit_all_gathers=True``, ``BACKWARD_PRE``
(the defaults). ``recompute full``: ``apply_activation_checkpointing`` with the
non-reentrant ``checkpoint_wrapper`` on every decoder layer after wrapping
(accelerate's ``fsdp_activation_checkpointing``).

The step is the Trainer's (``outputs = model(input_ids=ids, labels=ids)``,
``loss = outputs.loss; del outputs``, ``loss.backward()``, ``optimizer.step()``,
``optimizer.zero_grad(set_to_none=True)``); steps 1-2 warm up, step 3 is
measured on both ranks, the fixture records rank 0 (the ranks differ only by
the padding of the last shard, ``rank_peaks`` has both).

Initialisation (``init``): the wrap itself profiled from an empty table on
rank 0 in a separate child process, three ways:

* ``every-rank``: the model built whole on the device (CPU here) before
  wrapping; the peak includes the whole model.
* ``per-unit``: the model built on the meta device and materialized by
  FSDP1 one wrapped unit at a time (``param_init_fn=lambda m:
  m.to_empty(device=cpu, recurse=False)``), which is the sequence a
  host-resident model moved to the GPU with ``device_id`` goes through on the
  device (``_move_module_to_device`` then ``FlatParamHandle``: the unit whole,
  its flat concatenation, its shard): on CPU the host and the device are the
  same memory, so the meta build stands in for the host copy.

The peak of each is written under ``init`` with the bytes kept at its end.

peft LoRA (``__lora-qv-r8-d0-bf16__fsdp1-2``): ``get_peft_model`` on q and v
(adapters in bf16), wrapped as Answer.AI's train.py does (``_or_policy`` of a
lambda policy for every trainable leaf linear and the decoder-layer policy),
so the root unit is frozen; no ``init`` measured. ``__lora-qkvo-r16-d0.1-fp32__reentrant``:
HF Trainer's FSDP-LoRA as foundation-model-stack benchmarks it (peft's
``fsdp_auto_wrap_policy``: the same two policies), fp32 adapters with
dropout 0.1, transformers' ``gradient_checkpointing_enable(use_reentrant=True)``
and ``enable_input_require_grads`` before ``get_peft_model`` and the wrap; at
vocabulary 4096 the loss sets the peak, at 512 (``llama-v512``) a layer's
backward does, where the layer before is not yet prefetched (each adapter is
a unit of its own in the post-forward order).
``trainmem_flags``: ``--framework fsdp1 --gpus 2 --fsdp full-shard``.

    /work/venv/bin/python tools/measure_fsdp.py [--only SUBSTRING]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_timeline as mt  # noqa: E402

WORLD = 2
HF_LLAMA = {"model_type": "llama", **mt.LLAMA}
# Vocabulary 512 (``llama-v512``): the layers, not the loss, set the peak.
CONFIGS = {"llama": HF_LLAMA, "llama-v512": {**HF_LLAMA, "vocab_size": 512}}


def specs() -> list[dict]:
    s = []
    for dtype, recompute, B, S in (("fp32", "none", 2, 128), ("bf16", "none", 2, 128),
                                   ("fp32", "full", 1, 512), ("bf16", "full", 1, 512),
                                   ("bf16", "none", 1, 512)):
        s.append({"id": f"llama__{dtype}__adamw__sdpa__{recompute}__b{B}s{S}__fsdp1-2",
                  "dtype": dtype, "recompute": recompute, "B": B, "S": S})
    # Answer.AI's FSDP-LoRA wrapping: each trainable LoRA linear its own unit
    # (lambda policy) inside the decoder-layer units; the root frozen.
    lora = {"targets": "qv", "r": 8, "dropout": 0, "dtype": "bf16"}
    s.append({"id": "llama__bf16__adamw__sdpa__none__b2s128" + mt.lora_id(lora) + "__fsdp1-2",
              "dtype": "bf16", "recompute": "none", "B": 2, "S": 128, "lora": lora})
    # HF Trainer's FSDP-LoRA (foundation-model-stack's benchmark): peft's
    # fsdp_auto_wrap_policy (the same two policies), fp32 adapters with
    # dropout, transformers' own reentrant gradient checkpointing enabled
    # before wrapping, with enable_input_require_grads.
    for model, B, S in (("llama", 1, 512), ("llama", 2, 256), ("llama", 4, 128),
                        ("llama-v512", 1, 512), ("llama-v512", 2, 512), ("llama-v512", 4, 512)):
        lora = {"targets": "qkvo", "r": 16, "dropout": 0.1, "dtype": "fp32"}
        s.append({"id": f"{model}__bf16__adamw__sdpa__full__b{B}s{S}" + mt.lora_id(lora)
                  + "__reentrant__fsdp1-2", "model": model, "dtype": "bf16", "recompute": "full",
                  "B": B, "S": S, "lora": lora, "hf_reentrant": True})
    # The same wrap without checkpointing: the adapters' hooks are
    # registered in the forward, and the layer before is still prefetched
    # only from its first adapter's pre-backward.
    lora = {"targets": "qkvo", "r": 16, "dropout": 0.1, "dtype": "fp32"}
    s.append({"id": "llama-v512__bf16__adamw__sdpa__none__b1s512" + mt.lora_id(lora) + "__fsdp1-2",
              "model": "llama-v512", "dtype": "bf16", "recompute": "none", "B": 1, "S": 512,
              "lora": lora, "gap": True})
    return s


def build(torch, dtype, meta, config=HF_LLAMA):
    import transformers
    cfg = transformers.AutoConfig.for_model(**config)
    cfg.use_cache = False
    if meta:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    else:
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    return model.to(dtype)


def wrap(torch, model, meta, lora=False):
    import functools
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import (ModuleWrapPolicy, _or_policy, lambda_auto_wrap_policy,
                                             transformer_auto_wrap_policy)
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer
    cpu = torch.device("cpu")
    policy = ModuleWrapPolicy({LlamaDecoderLayer})
    if lora:  # Answer.AI train.py get_wrapping_policy
        def trainable_leaf(module):
            return (len(list(module.named_children())) == 0
                    and getattr(module, "weight", None) is not None
                    and module.weight.requires_grad)
        policy = functools.partial(_or_policy, policies=[
            functools.partial(lambda_auto_wrap_policy, lambda_fn=trainable_leaf),
            functools.partial(transformer_auto_wrap_policy,
                              transformer_layer_cls={LlamaDecoderLayer})])
    return FSDP(model, auto_wrap_policy=policy, device_id=cpu,
                sharding_strategy=ShardingStrategy.FULL_SHARD, use_orig_params=False,
                limit_all_gathers=True,
                param_init_fn=(lambda m: m.to_empty(device=cpu, recurse=False)) if meta else None)


def setup_dist(port):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=WORLD)
    return dist


def init_worker(mode: str, dtype_name: str) -> dict:
    """One rank's FSDP1 wrap under the profiler, from an empty table."""
    warnings.filterwarnings("ignore")
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.set_num_threads(1)
    dist = setup_dist(int(os.environ["PORT"]))
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    meta = mode == "per-unit"
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model = build(torch, dtype, meta)
        fsdp = wrap(torch, model, meta)
    cum = peak = 0
    events = []
    for node, _ in mt.walk_tree(prof.profiler.kineto_results.experimental_event_tree()):
        if node.name == "[memory]" and str(node.extra_fields.device).startswith("cpu"):
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
    for _, delta in sorted(events, key=lambda e: e[0]):
        cum += delta
        peak = max(peak, cum)
    shards = sum(p.untyped_storage().nbytes() for p in fsdp.parameters())
    buffers = sum(b.untyped_storage().nbytes() for b in fsdp.buffers())
    dist.barrier()
    dist.destroy_process_group()
    return {"peak_bytes": peak, "end_bytes": cum, "shard_bytes": shards,
            "buffer_bytes": buffers}


def step_worker(sp: dict) -> dict:
    warnings.filterwarnings("ignore")
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist = setup_dist(int(os.environ["PORT"]))
    rank = dist.get_rank()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[sp["dtype"]]
    config = CONFIGS[sp.get("model", "llama")]
    model = build(torch, dtype, False, config).train()
    if sp.get("hf_reentrant"):
        # What TRL's SFTTrainer does before peft: checkpointing on, and the
        # embedding's output made to need a gradient.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        model.enable_input_require_grads()
    if sp.get("lora"):
        model = mt.apply_lora(model, sp["lora"], torch)
    inner = model.get_base_model() if sp.get("lora") else model
    fsdp = wrap(torch, model, False, lora=bool(sp.get("lora")))
    if sp["recompute"] == "full" and not sp.get("hf_reentrant"):
        import functools
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer
        apply_activation_checkpointing(
            fsdp, checkpoint_wrapper_fn=functools.partial(
                checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
            check_fn=lambda m: isinstance(m, LlamaDecoderLayer))
    optimizer = torch.optim.AdamW([p for p in fsdp.parameters() if p.requires_grad], lr=1e-4,
                                  foreach=False)
    torch.manual_seed(1)  # the same batch on both ranks
    ids = torch.randint(0, config["vocab_size"], (sp["B"], sp["S"]))
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

    inner.lm_head.register_forward_hook(head_post)

    def one_step():
        phase_begin("forward")
        outputs = fsdp(input_ids=ids, labels=ids)
        loss = outputs.loss
        del outputs
        phase_end()
        phase_begin("backward")
        loss.backward()
        del loss
        grads = {p.grad.untyped_storage().data_ptr(): f"flat{i}"
                 for i, p in enumerate(fsdp.parameters()) if p.grad is not None}
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
    dist.barrier()
    live0 = mt.live_tensor_storages(torch)
    baseline_bytes = sum(live0.values())
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        grads = one_step()
    end_live = sum(mt.live_tensor_storages(torch).values())
    a = mt.analyse(prof, baseline_bytes, config["num_hidden_layers"], grads, None, None)
    shards = sum(p.untyped_storage().nbytes() for p in fsdp.parameters())
    gathered = torch.tensor([a["peak_bytes"]], dtype=torch.int64)
    peaks = [torch.zeros(1, dtype=torch.int64) for _ in range(WORLD)]
    dist.all_gather(peaks, gathered)
    dist.destroy_process_group()
    if rank != 0:
        return {}
    return {
        "id": sp["id"], "model": sp.get("model", "llama"), "model_type": "llama", "config": config,
        "dtype": sp["dtype"], "attention": "sdpa", "batch": sp["B"], "seq_len": sp["S"],
        "optimizer": {"name": "adamw", "foreach": False, "fused": None, "momentum": None,
                      "lr": 1e-4, "implementation": "single_tensor"},
        "recompute": sp["recompute"],
        "world_size": WORLD, "rank": 0, "rank_peaks": [int(p.item()) for p in peaks],
        "parameters": sum(p.numel() for p in inner.parameters()),
        "shard_bytes": shards,
        "baseline_bytes": baseline_bytes,
        **{k: a[k] for k in ("peak_bytes", "peak_phase", "peak_layer", "peak_op", "phases",
                             "layers", "events", "grad_bytes", "end_bytes",
                             "outside_phase_bytes", "unmatched_frees")},
        "allocator_counter_check": a["counter_check"],
        "end_live_bytes": end_live,
        "alive_at_peak_by_phase": a["alive_by_phase"],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "notes": ["FSDP1 FULL_SHARD over 2 gloo ranks on CPU, LlamaDecoderLayer units, "
                  "use_orig_params=False, no mixed precision; rank 0 recorded"]
                 + (["transformers' gradient_checkpointing_enable(use_reentrant=True) and "
                     "enable_input_require_grads before get_peft_model and the wrap, as TRL's "
                     "SFTTrainer runs them"] if sp.get("hf_reentrant") else
                    ["apply_activation_checkpointing after wrapping, non-reentrant"]
                    if sp["recompute"] == "full" else []),
        **({"reentrant": True} if sp.get("hf_reentrant") else {}),
        "trainmem_flags": ["--framework", "fsdp1", "--gpus", "2", "--fsdp", "full-shard"]
                          + (mt.lora_flags(sp["lora"]) if sp.get("lora") else [])
                          + (["--recompute-reentrant"] if sp.get("hf_reentrant") else []),
    }


def spawn(args: list[str], port: int) -> list[str]:
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, __file__, *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode:
            raise RuntimeError((err.strip().splitlines() or ["?"])[-1])
        outs.append(out)
    return outs


def result(outs: list[str]) -> dict:
    for out in outs:
        for ln in out.splitlines():
            if ln.startswith("@@FIXTURE@@"):
                fx = json.loads(ln[len("@@FIXTURE@@"):])
                if fx:
                    return fx
    raise RuntimeError("no fixture")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--worker")
    ap.add_argument("--init")
    args = ap.parse_args()
    if args.worker:
        sp = next(s for s in specs() if s["id"] == args.worker)
        sys.stdout.write("@@FIXTURE@@" + json.dumps(step_worker(sp)) + "\n")
        return 0
    if args.init:
        mode, dtype = args.init.split(":")
        r = init_worker(mode, dtype)
        if os.environ["RANK"] == "0":
            sys.stdout.write("@@FIXTURE@@" + json.dumps(r) + "\n")
        else:
            sys.stdout.write("@@FIXTURE@@{}\n")
        return 0
    port = 29610
    for sp in specs():
        if args.only and args.only not in sp["id"]:
            continue
        t = time.time()
        port += 1
        fx = result(spawn(["--worker", sp["id"]], port))
        fx["init"] = {}
        for mode in () if sp.get("lora") else ("every-rank", "per-unit"):
            port += 1
            fx["init"][mode] = result(spawn(["--init", f"{mode}:{sp['dtype']}"], port))
        if not fx["init"]:
            del fx["init"]
        folder = mt.GAPS_DIR if sp.get("gap") else mt.FIXTURES_DIR
        (folder / f"{sp['id']}.json").write_text(json.dumps(fx, indent=1) + "\n")
        print(sp["id"], fx["peak_bytes"], fx["rank_peaks"], fx["peak_phase"], fx["peak_op"],
              fx["end_bytes"] - fx["end_live_bytes"], fx.get("init"), f"{time.time() - t:.0f}s",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
