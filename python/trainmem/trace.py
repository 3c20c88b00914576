"""What autograd saves for backward, traced in one forward on the meta device.

:func:`trace_activations` runs ``module`` once (and ``loss_fn`` on its
output) with every parameter, buffer and input replaced by a meta tensor of
the same shape and dtype (``torch.func.functional_call``: the module itself
is not changed, and no memory is allocated). A ``saved_tensors_hooks`` pack
hook sees every tensor an autograd node saves; each storage is counted once
at its full size (views and tensors saved by several nodes share one), the
parameters' and buffers' storages are left out, and a storage whose saving
node was freed before the forward returned (a branch that does not lead to
the output) is dropped. This is the method of ``tools/measure_activations.py``,
whose CPU measurements are the fixtures of the Rust rules; on the meta device
it needs no GPU, no weights and no memory, so a 70B model traces on a laptop.

Limits: a forward that reads tensor values (``.item()``, data-dependent
shapes such as transformers' ``eager`` experts, which loop over the tokens
each expert got; its ``grouped_mm`` experts trace) cannot run on the meta
device and raises :class:`trainmem.Error` (transformers' check for packed sequences is
answered "not packed" on meta tensors: one sequence per row). Attention (``scaled_dot_product_attention``)
runs the kernel the CPU picks for the same shapes and options (its flash
kernel, which saves the output and the log-sum-exp, or the math kernel,
which saves the attention matrix): the trace predicts a CPU run, as the
fixtures and ``trainmem estimate --platform cpu`` do; a GPU's flash or
memory-efficient kernels save about the same, its math kernel more. Layer norm of bf16 or
fp16 input keeps its mean and rstd in that dtype, as the CPU kernel does
(the meta and CUDA kernels keep them in fp32: a GPU run saves 2 bytes more
per row and norm). Other kernels save what their meta registrations say.
"""

import gc

__all__ = ["Trace", "SavedTensor", "trace_activations"]


class SavedTensor:
    """One storage autograd saved: its bytes, dtype, the shape it was first
    saved with, the module running when it was first saved, and ``position``:
    how many module forwards had begun then (it places a save made outside
    any block between the blocks)."""

    __slots__ = ("bytes", "dtype", "shape", "module", "position")

    def __init__(self, nbytes, dtype, shape, module, position=0):
        self.bytes = nbytes
        self.dtype = dtype
        self.shape = shape
        self.module = module
        self.position = position

    def to_dict(self):
        return {
            "bytes": self.bytes,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "module": self.module,
            "position": self.position,
        }

    def __repr__(self):
        return f"SavedTensor({self.bytes} B, {self.dtype}, {list(self.shape)}, {self.module!r})"


class Trace:
    """The result of :func:`trace_activations`.

    ``saved_bytes``: the unique storages autograd keeps for backward.
    ``output_bytes``: the output tensors' storages not among them (the logits
    a causal LM returns; 0-d tensors, the loss, are left out). ``total_bytes``: their sum, what a forward leaves
    in memory until backward (the fixtures' ``total_bytes``).
    ``by_module``: saved bytes per module path (the innermost module running
    when each storage was first saved; ``""`` for the loss outside any
    module). ``order``: the module paths in the order their forwards began.
    ``blocks``: the top-level blocks (the entries of the module's largest
    ``nn.ModuleList``, a transformer's layers; without one, the module's
    children). ``batch``: the leading dimension of the first input tensor;
    ``seq_len``: its second, when it is a 2-D batch of integer token ids.
    """

    def __init__(self, saved, output_bytes, order, freed_bytes, blocks=(), batch=None, seq_len=None):
        self.saved = saved
        self.saved_bytes = sum(s.bytes for s in saved)
        self.output_bytes = output_bytes
        self.total_bytes = self.saved_bytes + output_bytes
        self.freed_bytes = freed_bytes
        self.order = order
        by_module = {}
        for s in saved:
            by_module[s.module] = by_module.get(s.module, 0) + s.bytes
        self.by_module = by_module
        self.blocks = list(blocks)
        self.batch = batch
        self.seq_len = seq_len

    def schedule(self):
        """The trace as the engine's step timeline reads it (an inventory's
        ``activations_trace``): the saved bytes of each block that ran, in
        run order; what was saved before the first block; what after the
        last block began, outside it (final norm, head, loss); the outputs
        not saved; the largest storage saved. A save outside the blocks made between two blocks counts
        with the block before it (freed with that block's backward, not
        earlier). A block that runs twice counts once, with both runs' bytes."""
        blocks = set(self.blocks)
        starts = {}
        for index, name in enumerate(self.order):
            if name in blocks and name not in starts:
                starts[name] = index
        ran = sorted(starts, key=starts.get)
        by_block = dict.fromkeys(ran, 0)
        before = after = 0
        for s in self.saved:
            owner = next(
                (b for b in ran if s.module == b or s.module.startswith(b + ".")), None
            )
            if owner is None:
                begun = [b for b in ran if starts[b] < s.position]
                if not begun:
                    before += s.bytes
                    continue
                if begun[-1] == ran[-1]:
                    after += s.bytes
                    continue
                owner = begun[-1]
            by_block[owner] += s.bytes
        if self.batch is None:
            from ._engine import Error

            raise Error(
                "the trace's micro-batch is not known (no input tensor); accepted: a trace of a forward with a batched input tensor"
            )
        schedule = {
            "micro_batch": self.batch,
            "blocks": [{"name": b, "bytes": by_block[b]} for b in ran],
            "before_blocks": before,
            "after_blocks": after,
            "outputs": self.output_bytes,
            "largest_storage": max((s.bytes for s in self.saved), default=0),
            "total": self.total_bytes,
        }
        if self.seq_len is not None:
            schedule["seq_len"] = self.seq_len
        return schedule

    def to_dict(self):
        return {
            "saved_bytes": self.saved_bytes,
            "output_bytes": self.output_bytes,
            "total_bytes": self.total_bytes,
            "freed_bytes": self.freed_bytes,
            "by_module": dict(self.by_module),
            "order": list(self.order),
            "blocks": list(self.blocks),
            "batch": self.batch,
            "seq_len": self.seq_len,
            "saved": [s.to_dict() for s in self.saved],
        }

    def __repr__(self):
        return (
            f"Trace(total_bytes={self.total_bytes:,}, saved_bytes={self.saved_bytes:,}, "
            f"output_bytes={self.output_bytes:,}, {len(self.saved)} storages, "
            f"{len(self.by_module)} modules)"
        )


def _meta(torch, value):
    """``value`` with every tensor in it moved to the meta device, keeping
    ``requires_grad`` (a leaf stays a leaf)."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            return value
        moved = torch.empty_strided(
            value.shape, value.stride(), dtype=value.dtype, device="meta"
        )
        return moved.requires_grad_(value.requires_grad) if value.is_leaf else moved
    if isinstance(value, dict):
        return type(value)((k, _meta(torch, v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        items = [_meta(torch, v) for v in value]
        return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
    return value


def _cpu_twin(torch, tensor):
    """An uninitialised CPU tensor of ``tensor``'s shape, strides and dtype:
    what the CPU kernel choice looks at. Its pages are never touched, so the
    operating system commits no memory for it."""
    if not isinstance(tensor, torch.Tensor):
        return tensor
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="cpu")


#: The value ``torch._fused_sdp_choice`` gives for the CPU flash kernel.
_FLASH = 1


class _CpuAttention:
    """Within it, ``torch.nn.functional.scaled_dot_product_attention`` on
    meta tensors runs the kernel the CPU would pick for the same shapes,
    strides, dtypes and options (the meta device's own choice is the math
    kernel, which saves the attention matrix): the CPU flash kernel when the
    CPU would use it, saving its output and log-sum-exp as on CPU. The
    function is replaced in ``torch.nn.functional`` (where transformers and
    ``nn.MultiheadAttention`` look it up) for the forward only."""

    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")

    def __init__(self, torch):
        self.torch = torch
        self.original = torch.nn.functional.scaled_dot_product_attention

    def __call__(self, *args, **kwargs):
        torch = self.torch
        bound = dict(zip(self.names, args))
        bound.update(kwargs)
        query = bound.get("query")
        if not isinstance(query, torch.Tensor) or query.device.type != "meta":
            return self.original(*args, **kwargs)
        twins = {k: _cpu_twin(torch, v) for k, v in bound.items()}
        if torch._fused_sdp_choice(**twins) != _FLASH:
            return self.original(*args, **kwargs)
        # The CPU flash kernel takes grouped keys and values (enable_gqa) as
        # they are.
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            bound["query"],
            bound["key"],
            bound["value"],
            bound.get("dropout_p", 0.0),
            bound.get("is_causal", False),
            attn_mask=bound.get("attn_mask"),
            scale=bound.get("scale"),
        )[0]

    def __enter__(self):
        self.torch.nn.functional.scaled_dot_product_attention = self
        return self

    def __exit__(self, *exc):
        self.torch.nn.functional.scaled_dot_product_attention = self.original


def _cpu_layer_norm_mode(torch):
    """A dispatch mode under which layer norm of half-precision meta input
    keeps its mean and rstd in the input's dtype, as the CPU kernel does (the
    meta kernel, like CUDA's, keeps them in fp32): autograd saves them."""
    from torch.utils._python_dispatch import TorchDispatchMode

    layer_norm = torch.ops.aten.native_layer_norm.default
    halves = (torch.bfloat16, torch.float16)

    class CpuLayerNorm(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if func is layer_norm and args[0].device.type == "meta" and args[0].dtype in halves:
                out, mean, rstd = result
                dtype = args[0].dtype
                return out, mean.to(dtype), rstd.to(dtype)
            return result

    return CpuLayerNorm()


class _UnpackedSequences:
    """Within it, transformers' check for packed sequences (several
    sequences in one row, found from the values of ``position_ids`` when no
    attention mask and no cache is given: a training forward) answers "not
    packed" for meta tensors, whose values cannot be read: the trace prices
    one sequence per row, as a batch of token ids without packing is."""

    def __init__(self):
        import sys

        self.module = sys.modules.get("transformers.masking_utils")
        self.original = getattr(self.module, "find_packed_sequence_indices", None)

    def __call__(self, position_ids, *args, **kwargs):
        if getattr(position_ids, "device", None) is not None and position_ids.device.type == "meta":
            return None
        return self.original(position_ids, *args, **kwargs)

    def __enter__(self):
        if self.original is not None:
            self.module.find_packed_sequence_indices = self
        return self

    def __exit__(self, *exc):
        if self.original is not None:
            self.module.find_packed_sequence_indices = self.original


def _storage_id(tensor):
    return tensor.untyped_storage()._cdata


def _tensors(torch, value):
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def trace_activations(module, example_inputs, loss_fn=None, *, device="meta", kwargs=None):
    """Traces one forward of ``module`` on ``example_inputs`` (a tensor, a
    tuple of positional arguments or a dict of keyword arguments) and, when
    given, ``loss_fn(output)``; returns a :class:`Trace`.

    ``device="meta"`` (the default) runs on meta copies of the parameters,
    buffers and inputs; ``device=None`` runs on the tensors as they are (a
    real measurement, which allocates memory and computes).
    """
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef

    from ._engine import Error

    if isinstance(example_inputs, dict):
        args, call_kwargs = (), dict(example_inputs)
    elif isinstance(example_inputs, (list, tuple)):
        args, call_kwargs = tuple(example_inputs), {}
    else:
        args, call_kwargs = (example_inputs,), {}
    call_kwargs.update(kwargs or {})

    parameters = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    if device == "meta":
        state = {name: _meta(torch, t) for name, t in {**parameters, **buffers}.items()}
        args = _meta(torch, args)
        call_kwargs = _meta(torch, call_kwargs)
    elif device is None:
        state = None
    else:
        raise Error(f"device `{device}`; accepted: \"meta\" or None")
    held = list(state.values()) if state is not None else list(parameters.values()) + list(
        buffers.values()
    )
    excluded = {_storage_id(t) for t in held}

    # The module path running now, kept by forward pre/post hooks.
    stack = [""]
    order = []
    handles = []

    def enter(name):
        def hook(_module, _args):
            stack.append(name)
            order.append(name)

        return hook

    def leave(name):
        def hook(_module, _args, _output):
            if stack[-1] == name:
                stack.pop()

        return hook

    for name, sub in module.named_modules():
        if name:
            handles.append(sub.register_forward_pre_hook(enter(name)))
            handles.append(sub.register_forward_hook(leave(name), always_call=True))

    saved = {}  # storage id -> (SavedTensor, weak reference)
    dead = []

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in excluded or (storage.nbytes() == 0 and tensor.numel() == 0):
            return tensor
        entry = saved.get(key)
        if entry is None or entry[1].expired():
            if entry is not None:  # a freed storage's id reused
                dead.append(saved.pop(key)[0])
            saved[key] = (
                SavedTensor(
                    storage.nbytes(),
                    str(tensor.dtype).replace("torch.", ""),
                    tuple(tensor.shape),
                    stack[-1],
                    len(order),
                ),
                StorageWeakRef(storage),
            )
        return tensor

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            if state is None:
                output = module(*args, **call_kwargs)
            else:
                with _CpuAttention(torch), _UnpackedSequences(), _cpu_layer_norm_mode(torch):
                    output = torch.func.functional_call(
                        module, state, args, call_kwargs, tie_weights=True, strict=False
                    )
            if loss_fn is not None:
                loss = loss_fn(output)
                stack[:] = [""]
            else:
                loss = None
    except (NotImplementedError, RuntimeError) as error:
        if device == "meta" and (
            "meta" in str(error) or "data-dependent" in str(error) or "item" in str(error)
        ):
            raise Error(
                f"the forward of {type(module).__name__} cannot run on the meta device "
                f"({str(error).splitlines()[0]}); accepted: a forward whose shapes do not "
                "depend on tensor values, or device=None to measure on real tensors"
            ) from error
        raise
    finally:
        for handle in handles:
            handle.remove()

    gc.collect()
    kept = []
    for key, (entry, reference) in list(saved.items()):
        if reference.expired():
            dead.append(entry)
        else:
            kept.append((key, entry))
    # The outputs (and the loss) hold storages until backward too; the ones
    # autograd did not save are counted as output.
    output_bytes = 0
    seen = {key for key, _ in kept} | excluded
    for tensor in _tensors(torch, (output, loss)):
        if tensor.dim() == 0:  # a loss: 4 bytes, not an activation
            continue
        storage = tensor.untyped_storage()
        if storage._cdata not in seen:
            seen.add(storage._cdata)
            output_bytes += storage.nbytes()
    # Keep the graph alive until here: the weak references above need it.
    del output, loss
    batch, seq_len = _input_shape(torch, (args, call_kwargs))
    return Trace(
        [entry for _, entry in kept],
        output_bytes,
        order,
        sum(e.bytes for e in dead),
        blocks=_blocks(torch, module),
        batch=batch,
        seq_len=seq_len,
    )


def _blocks(torch, module):
    """The top-level blocks: the entries of the largest ``nn.ModuleList``
    (the first of the largest), else the module's children."""
    lists = [
        (name, sub)
        for name, sub in module.named_modules()
        if isinstance(sub, torch.nn.ModuleList) and len(sub) > 0
    ]
    if lists:
        name, sub = max(lists, key=lambda entry: len(entry[1]))
        return [f"{name}.{child}" if name else child for child, _ in sub.named_children()]
    return [name for name, _ in module.named_children()]


def _input_shape(torch, inputs):
    """The micro-batch (leading dimension) of the first input tensor, and
    its sequence length when it is a 2-D batch of integer token ids."""
    for tensor in _tensors(torch, inputs):
        if tensor.dim() == 0:
            continue
        seq_len = None
        if tensor.dim() == 2 and not tensor.is_floating_point() and not tensor.is_complex():
            seq_len = int(tensor.shape[1])
        return int(tensor.shape[0]), seq_len
    return None, None
