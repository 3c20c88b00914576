#!/usr/bin/env python3
"""Print the allocation tables of `src/timeline/torchtune_setup.rs` (issue 24).

torchao 0.1's `to_nf4`, `NF4Tensor.get_original_weight`, `copy.deepcopy`
of an `NF4Tensor` parameter (torchtune 0914d5c's `clone` override) and
torchtune's `inplace_copy` (with its host-to-device copy made a `.clone()`,
as in `measure_torchtune_setup.py`), each profiled on CPU on a bf16
[1024, 2048] weight (n = 2**21 values) and printed as Rust: every
allocation as a fraction of n (denominators up to 16384) or a fixed size,
every free by the index of its allocation, the five tensors an `NF4Tensor`
keeps as `Keep(size, piece)` (pieces in `inplace_copy`'s assignment order:
quantized_scalers, quantization_factor, scaler_mean, quantized_data, nf4),
and `FreeOld(piece)` where `inplace_copy` drops the weight's previous ones.
The sizes are linear in n (every op is elementwise, a reduction by blocks
of 64 or 256, or a 16-wide comparison), so one weight gives the rule.

    PYTHONPATH=TT:AO:SHIM /work/venv/bin/python tools/torchtune_setup_tables.py

(TT, AO: the sources named in `measure_torchtune_setup.py`; SHIM: a
directory with its `pkg_resources.py` shim.)
"""
import torch, sys, copy
torch.set_num_threads(1)
from torch.profiler import profile, ProfilerActivity
from fractions import Fraction
from torchao.dtypes.nf4tensor import to_nf4, NF4Tensor
import torchtune.utils._register_nf4_dispatch_ops
O, I = 1024, 2048
n = O*I
w = torch.randn(O, I, dtype=torch.bfloat16)
def events(fn):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    out = []
    def walk(n_):
        yield n_
        for c in n_.children: yield from walk(c)
    for r in prof.profiler.kineto_results.experimental_event_tree():
        for nd in walk(r):
            if nd.name == "[memory]":
                out.append((nd.start_time_ns, nd.extra_fields.alloc_size, nd.extra_fields.ptr))
    out.sort()
    return out
def size(s):
    f = Fraction(s, n)
    if f.denominator <= 16384:
        return f"Size::Of({f.numerator}, {f.denominator})"
    return f"Size::Fixed({s})"
PIECE = {Fraction(1, 64): 0, Fraction(1, 32): 1, 2: 2, Fraction(1, 2): 3, 32: 4}
def table(name, evs, old_ptrs=None):
    live = {}; k = 0; lines = []; sizes = []
    for t, s, p in evs:
        if s > 0:
            live[p] = k; k += 1; sizes.append(s)
            lines.append(["alloc", s])
        else:
            if p in live:
                lines.append(f"Op::Free({live.pop(p)}),")
            elif old_ptrs and p in old_ptrs:
                lines.append(f"Op::FreeOld({old_ptrs[p]}),")
            else:
                raise SystemExit(f"unmatched free of {s}")
    kept = set(live.values())
    print(f"/// {k} allocations; kept: {sorted(kept)}.")
    print(f"const {name}: &[Op] = &[")
    j = 0
    for l in lines:
        if isinstance(l, list):
            s = l[1]
            if j in kept and name != "GET_ORIGINAL_WEIGHT":  # its result, returned
                key = s if s in (2, 32) else Fraction(s, n)
                print(f"    Op::Keep({size(s)}, {PIECE[key]}),")
            else:
                print(f"    Op::Alloc({size(s)}),")
            j += 1
        else:
            print("    " + l)
    print("];")
q = None
def make():
    global q
    q = to_nf4(w)
table("TO_NF4", events(make))
p = torch.nn.Parameter(to_nf4(w), requires_grad=False)
res = []
table("GET_ORIGINAL_WEIGHT", events(lambda: res.append(p.get_original_weight())))
res.clear()
table("DEEPCOPY", events(lambda: res.append(copy.deepcopy(p))))
from torchao.dtypes.nf4tensor import implements as nf4_tensor_impl
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
d = res[0]
old = {d.quantized_scalers.untyped_storage().data_ptr(): 0, d.quantization_factor.untyped_storage().data_ptr(): 1,
       d.scaler_mean.untyped_storage().data_ptr(): 2, d.quantized_data.untyped_storage().data_ptr(): 3, d.nf4.untyped_storage().data_ptr(): 4}
src = torch.randn(O, I, dtype=torch.float16)
def cp():
    with torch.no_grad(): d.copy_(src)
table("INPLACE_COPY", events(cp), old)
