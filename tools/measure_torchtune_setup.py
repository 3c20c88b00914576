#!/usr/bin/env python3
"""Measure the allocation stream of torchtune's LoRA/QLoRA model setup (issue 24).

What the published torchtune QLoRA runs of April-May 2024 ran
(`tests/fixtures/published/peaks.json`, `torchtune-llama2-7b-qlora-*`):
`recipes/lora_finetune_single_device.py` at torchtune 0914d5c, whose
`_setup_model` builds the model on the device in bf16
(`with utils.set_default_dtype(self._dtype), self._device:
model = config.instantiate(cfg_model)`) and then loads the checkpoint with
`model.load_state_dict(base_model_state_dict, strict=False)`, with torchao
0.1 (`pyproject.toml` pins `torchao==0.1`), whose `to_nf4` quantizes a whole
tensor at once (`NF4Tensor.quantize_tensor_nearest`: `(value - nf4).abs()`,
16 values per weight element; torchao 0.2 quantizes in chunks of 1024**2,
"perform in chunks (#196)", 2024-05-01). Three things allocate on the device:

1. `lora_llama2` builds one `TransformerDecoderLayer`: every quantized
   `LoRALinear` creates an `nn.Linear` bf16 weight and `to_nf4`s it
   (`_create_weight_and_bias`); then `TransformerDecoder` deep-copies the
   layer `num_layers` times (`_get_clones`: `copy.deepcopy`), and the copy of
   an `NF4Tensor` is torchtune's `clone` override
   (`torchtune/utils/_register_nf4_dispatch_ops.py`:
   `to_nf4(args[0][0].get_original_weight())`: dequantize, then quantize).
   The prototype layer dies when the builder returns.
2. `load_state_dict`: every `NF4Tensor` parameter's `copy_` is torchtune's
   `inplace_copy`: `to_nf4(args[0][1].to(dest_tensor.device))`, the
   checkpoint's fp16 tensor (Llama-2-7b-hf's `.bin` files) copied to the
   device, cast to bf16 by `to_nf4`, quantized; the new quantized tensors
   replace the old ones. Other parameters are `copy_`'d in place (a CPU to
   CUDA copy with a dtype change converts on the host: no device memory).
3. With `--step`: micro-batches of the recipe's loop (`logits = model(ids)`,
   shift, `CrossEntropyLoss`, `loss / grad_accumulation`, `backward`), an
   `AdamW` step and `zero_grad(set_to_none=True)`, then one more micro-batch.

Measured on CPU, the device being the CPU: torch's profiler
(`profile_memory=True`) records every allocation and free in order. The
checkpoint is a preallocated fp16 host buffer viewed per parameter
(no allocation); torchtune's `inplace_copy` is registered again line for
line with its `.to(dest_tensor.device)` made a `.clone()`, the device copy
CUDA makes and the CPU does not; the checkpoint is loaded one decoder layer
at a time (the same `copy_` calls in the same order as one whole
`load_state_dict`, without a whole host copy of the model). CPU kernels
allocate a few small scratch buffers CUDA kernels do not (reductions); they
are in the stream.

The fixture (`tests/fixtures/setup/*.json`) holds the stream as integers: a
positive value allocates that many bytes (allocation k is the k-th positive
value), `-(k + 1)` frees allocation k; `phases` gives the index in the stream
where each phase ends. `tests/setup_stream.rs` replays it through trainmem's
allocator simulation (`trainmem::timeline::replay_stream`).

Sources (`--torchtune` and `--torchao` name directories holding them)::

    git -C torchtune archive 0914d5cfb5a34bf14a72e36b9ddebc64904763d1 torchtune | tar -x -C TT
    mkdir -p AO/torchao/dtypes && git -C ao show v0.1:torchao/dtypes/nf4tensor.py \
        > AO/torchao/dtypes/nf4tensor.py

The script adds empty `torchao/__init__.py`, `torchao/dtypes/__init__.py`, a
stub of `torchao.quantization.quant_api` (names torchtune's
`utils/quantization.py` imports and the LoRA path never calls) and a
`pkg_resources` shim (`from pkg_resources import packaging`). Pinned: torch
2.15.0 (CPU), one thread.

    /work/venv/bin/python tools/measure_torchtune_setup.py --torchtune TT --torchao AO \
        --layers 32 --dims 7b --out tests/fixtures/setup/NAME.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

DIMS = {
    # Llama-2-7b (torchtune/models/llama2/_model_builders.py lora_llama2_7b @0914d5c).
    "7b": dict(vocab_size=32_000, num_heads=32, num_kv_heads=32, embed_dim=4096, max_seq_len=4096),
    # A small Llama 2 of the same shape family (intermediate from scale_hidden_dim_for_mlp).
    "small": dict(vocab_size=4096, num_heads=8, num_kv_heads=8, embed_dim=512, max_seq_len=1024),
}

STUB = """# Measurement stub: torchtune@0914d5c utils/quantization.py imports these.
class Quantizer: pass
class Int4WeightOnlyQuantizer(Quantizer): pass
class Int4WeightOnlyGPTQQuantizer(Quantizer): pass
def apply_weight_only_int8_quant(*a, **k): raise NotImplementedError
"""


def prepare_paths(torchtune: str, torchao: str) -> None:
    shim = tempfile.mkdtemp(prefix="ttq-shim-")
    with open(os.path.join(shim, "pkg_resources.py"), "w") as f:
        f.write("import packaging, packaging.version\n")
    for sub in ("torchao", "torchao/dtypes", "torchao/quantization"):
        os.makedirs(os.path.join(torchao, sub), exist_ok=True)
        init = os.path.join(torchao, sub, "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()
    with open(os.path.join(torchao, "torchao/quantization/quant_api.py"), "w") as f:
        f.write(STUB)
    sys.path[:0] = [torchtune, torchao, shim]


def walk(node):
    yield node
    for child in node.children:
        yield from walk(child)


def stream_of(prof):
    """Every CPU allocation and free in order, frees matched to their
    allocation by pointer; phase ends from the `phase:` ranges."""
    events, ranges = [], {}
    order = 0
    for root in prof.profiler.kineto_results.experimental_event_tree():
        for node in walk(root):
            order += 1
            if node.name == "[memory]" and str(node.extra_fields.device).startswith("cpu"):
                events.append((node.start_time_ns, order, node.extra_fields.alloc_size,
                               node.extra_fields.ptr))
            elif node.name.startswith("phase:"):
                ranges[node.name[6:]] = node.end_time_ns
    events.sort()
    live, out, sizes, times = {}, [], [], []
    unmatched = 0
    for t, _, size, ptr in events:
        if size > 0:
            live[ptr] = len(sizes)
            out.append(size)
            sizes.append(size)
            times.append(t)
        else:
            k = live.pop(ptr, None)
            if k is None or sizes[k] != -size:
                unmatched += 1  # allocated before profiling
                continue
            out.append(-(k + 1))
            times.append(t)
    import bisect
    phases = {name: bisect.bisect_right(times, end) for name, end in ranges.items()}
    return out, phases, unmatched


def peaks(stream, phases):
    sizes, total, best, by_phase = [], 0, 0, {}
    ends = sorted(phases.items(), key=lambda kv: kv[1])
    start = 0
    for name, end in ends:
        high = total
        for value in stream[start:end]:
            if value > 0:
                sizes.append(value)
                total += value
            else:
                total -= sizes[-value - 1]
            high = max(high, total)
        by_phase[name] = {"peak": high, "end": total}
        best = max(best, high)
        start = end
    return best, by_phase


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchtune", required=True)
    ap.add_argument("--torchao", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dims", choices=sorted(DIMS), default="small")
    ap.add_argument("--lora", choices=["qlora", "lora-qv"], default="qlora")
    ap.add_argument("--step", default=None, help="B,S: also run micro-batches and a step")
    ap.add_argument("--out", required=True)
    ap.add_argument("--describe", action="store_true",
                    help="only add the parameter sizes to the fixture at --out")
    args = ap.parse_args()
    prepare_paths(os.path.abspath(args.torchtune), os.path.abspath(args.torchao))

    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    from torch.profiler import profile, record_function, ProfilerActivity
    from torchtune import utils, modules
    from torchtune.models.llama2._component_builders import lora_llama2
    from torchtune.modules.peft.peft_utils import get_adapter_params, set_trainable_params

    qlora = args.lora == "qlora"
    dims = DIMS[args.dims]
    builder = dict(
        lora_attn_modules=["q_proj", "v_proj", "k_proj", "output_proj"] if qlora
        else ["q_proj", "v_proj"],
        apply_lora_to_mlp=qlora, apply_lora_to_output=False, num_layers=args.layers,
        attn_dropout=0.0, norm_eps=1e-5, lora_rank=8, lora_alpha=16, lora_dropout=0.05,
        quantize_base=qlora, **dims)

    # The checkpoint's keys and shapes, from the same model on the meta device.
    with utils.set_default_dtype(torch.bfloat16), torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in
                  lora_llama2(**{**builder, "quantize_base": False}).state_dict().items()
                  if "lora_" not in k}
    groups = {}
    for key, shape in shapes.items():
        group = ".".join(key.split(".")[:2]) if key.startswith("layers.") else key
        groups.setdefault(group, []).append((key, shape))
    # What trainmem's setup model takes as given: each layer's parameters and
    # buffers other than its quantized weights (norms, adapters, the rotary
    # tables), and those outside the layers.
    with utils.set_default_dtype(torch.bfloat16), torch.device("meta"):
        meta = lora_llama2(**{**builder, "quantize_base": False, "num_layers": 1})

    def nbytes(tensors):
        return sum(t.numel() * t.element_size() for t in tensors)

    layer = meta.layers[0]
    quantized = {f"{name}.weight" for name, m in layer.named_modules()
                 if type(m).__name__ == "LoRALinear"} if qlora else set()
    described = {
        "layer_other_bytes": nbytes(t for k, t in list(layer.named_parameters())
                                    + list(layer.named_buffers()) if k not in quantized),
        "layer_rotary_bytes": nbytes(t for k, t in layer.named_buffers()),
        "outside_bytes": nbytes(t for k, t in meta.named_parameters()
                                if not k.startswith("layers.")),
    }
    if args.describe:
        with open(args.out) as f:
            fx = json.load(f)
        stream = fx.pop("stream")
        fx.update(described)
        head = json.dumps(fx, indent=1)
        with open(args.out, "w") as f:
            f.write(head[:-2] + ',\n "stream": ' + json.dumps(stream) + "\n}\n")
        print(json.dumps(described))
        return 0
    largest = max(sum(torch.Size(s).numel() for _, s in g) for g in groups.values())
    host = torch.randn(largest, dtype=torch.float32).to(torch.float16)

    if qlora:
        # torchtune's `inplace_copy` (torchtune/utils/_register_nf4_dispatch_ops.py
        # @0914d5c), line for line, with `args[0][1].to(dest_tensor.device)`
        # (the host-to-device copy on CUDA, a no-op on the CPU) made a copy.
        from torchao.dtypes.nf4tensor import implements as nf4_tensor_impl, to_nf4

        @nf4_tensor_impl([torch.ops.aten.copy_.default])
        def inplace_copy(func, *args, **kwargs):
            dest_tensor = args[0][0]
            ref_tensor = to_nf4(args[0][1].clone())
            dest_tensor.block_size = ref_tensor.block_size
            dest_tensor.n_blocks = ref_tensor.n_blocks
            dest_tensor.scaler_block_size = ref_tensor.scaler_block_size
            dest_tensor.quantized_scalers = ref_tensor.quantized_scalers
            dest_tensor.quantization_factor = ref_tensor.quantization_factor
            dest_tensor.scaler_mean = ref_tensor.scaler_mean
            dest_tensor.quantized_data = ref_tensor.quantized_data
            dest_tensor.nf4 = ref_tensor.nf4

    def host_group(group):
        out, offset = {}, 0
        for key, shape in groups[group]:
            n = torch.Size(shape).numel()
            out[key] = host[offset:offset + n].view(shape)
            offset += n
        return out

    fixture = {"id": os.path.splitext(os.path.basename(args.out))[0], "layers": args.layers,
               "dims": args.dims, "lora": args.lora, "torchtune": "0914d5c", "torchao": "0.1"}
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("phase:init"):
            with utils.set_default_dtype(torch.bfloat16), torch.device("cpu"):
                model = lora_llama2(**builder)
            adapter_params = get_adapter_params(model)
            set_trainable_params(model, adapter_params)
            utils.set_activation_checkpointing(
                model, auto_wrap_policy={modules.TransformerDecoderLayer})
        with record_function("phase:load"):
            for group in groups:
                model.load_state_dict(host_group(group), strict=False)
        if args.step:
            B, S = (int(x) for x in args.step.split(","))
            fixture["step"] = {"batch": B, "seq": S, "grad_accumulation": 2}
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
            loss_fn = torch.nn.CrossEntropyLoss()
            for micro_batch in range(3):
                with record_function(f"phase:micro-batch-{micro_batch}"):
                    ids = torch.randint(0, dims["vocab_size"], (B, S))
                    labels = ids.clone()
                    logits = model(ids)
                    logits = logits[..., :-1, :].contiguous()
                    labels = labels[..., 1:].contiguous()
                    logits = logits.transpose(1, 2)
                    loss = loss_fn(logits, labels)
                    loss = loss / 2
                    loss.backward()
                    del logits, labels, ids
                    if micro_batch == 1:
                        optimizer.step()
                        optimizer.zero_grad(set_to_none=True)
                    del loss
    stream, phases, unmatched = stream_of(prof)
    peak, by_phase = peaks(stream, phases)
    nf4 = [m for m in model.modules() if getattr(m, "_quantize_base", False)]
    fixture.update({
        "quantized_linears_per_layer": [
            [m.out_dim, m.in_dim] for m in nf4[: len(nf4) // max(args.layers, 1)]],
        **described, "peak_allocated": peak, "phases_summary": by_phase, "phases": phases,
        "unmatched_frees": unmatched, "stream": stream})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    head = json.dumps({k: v for k, v in fixture.items() if k != "stream"}, indent=1)
    with open(args.out, "w") as f:
        # The stream on one line: tens of thousands of integers.
        f.write(head[:-2] + ',\n "stream": ' + json.dumps(stream) + "\n}\n")
    print(json.dumps({k: v for k, v in fixture.items() if k not in ("stream",)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
