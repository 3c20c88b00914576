"""The tensor inventory of a PyTorch ``nn.Module``: what trainmem prices.

:func:`from_module` lists a module's parameters (names, shapes, dtypes,
``requires_grad``), each storage once however many names share it (tied
weights), and its registered buffers apart. It reads no tensor data, so a
model built on the meta device (``with torch.device("meta"): ...``) works as
well as a live one. The inventory goes to the engine as a
``*.inventory.json`` file (``Inventory.save``), the model source
``trainmem estimate --model FILE.inventory.json`` reads too.

A peft ``PeftModel`` needs nothing special: its ``requires_grad`` flags
already say that only the adapters (and ``modules_to_save``) train, and its
LoRA adapters are tensors named ``...lora_A.default.weight``, which the engine
reports as adapters. peft keeps adapters in float32 under a half-precision
base (``autocast_adapter_dtype``), so an adapter's own dtype is recorded as the
dtype it trains in.
"""

import json

__all__ = ["Inventory", "Parameter", "Buffer", "from_module", "SAFETENSORS_DTYPES"]

#: torch dtype names and the safetensors names the engine reads.
SAFETENSORS_DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "float8_e8m0fnu": "F8_E8M0",
    "int64": "I64",
    "uint64": "U64",
    "int32": "I32",
    "uint32": "U32",
    "int16": "I16",
    "uint16": "U16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}


def _dtype_name(dtype, name):
    from ._engine import Error

    short = str(dtype).replace("torch.", "")
    try:
        return SAFETENSORS_DTYPES[short]
    except KeyError:
        raise Error(
            f"tensor `{name}` has dtype `{short}`; accepted: {', '.join(SAFETENSORS_DTYPES)}"
        ) from None


class Parameter:
    """One parameter storage: its first name, the other names tied to it."""

    __slots__ = ("name", "shape", "dtype", "trainable", "training_dtype", "tied")

    def __init__(self, name, shape, dtype, trainable, training_dtype=None, tied=()):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.trainable = bool(trainable)
        self.training_dtype = training_dtype
        self.tied = list(tied)

    @property
    def numel(self):
        count = 1
        for d in self.shape:
            count *= d
        return count

    def to_dict(self):
        entry = {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "trainable": self.trainable,
        }
        if self.training_dtype is not None:
            entry["training_dtype"] = self.training_dtype
        if self.tied:
            entry["tied"] = list(self.tied)
        return entry

    def __repr__(self):
        tied = f", tied={self.tied}" if self.tied else ""
        return f"Parameter({self.name!r}, {self.shape}, {self.dtype}, trainable={self.trainable}{tied})"


class Buffer:
    """A registered buffer: held in memory, not trained, not priced."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype

    @property
    def numel(self):
        count = 1
        for d in self.shape:
            count *= d
        return count

    def to_dict(self):
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    def __repr__(self):
        return f"Buffer({self.name!r}, {self.shape}, {self.dtype})"


class Inventory:
    """A module's parameters (each storage once) and buffers."""

    def __init__(self, name, parameters, buffers=(), config=None, notes=(), source=None, activations_trace=None):
        self.name = name
        #: A :meth:`trainmem.Trace.schedule` dict: the module's activations
        #: as traced, which the engine prices instead of a rule's.
        self.activations_trace = activations_trace
        self.parameters = list(parameters)
        self.buffers = list(buffers)
        self.config = config
        self.notes = list(notes)
        self.source = source or f"nn.Module {name} (trainmem.from_module)"

    @property
    def total_parameters(self):
        """Elements of every parameter storage, tied ones once (transformers'
        ``num_parameters()``)."""
        return sum(p.numel for p in self.parameters)

    @property
    def trainable_parameters(self):
        """Elements of the parameters with ``requires_grad``."""
        return sum(p.numel for p in self.parameters if p.trainable)

    @property
    def tied(self):
        """``{name: [other names of the same storage]}`` for tied parameters."""
        return {p.name: list(p.tied) for p in self.parameters if p.tied}

    def to_dict(self):
        document = {
            "trainmem_inventory": 1,
            "name": self.name,
            "source": self.source,
            "parameters": [p.to_dict() for p in self.parameters],
            "buffers": [b.to_dict() for b in self.buffers],
        }
        if self.config is not None:
            document["config"] = self.config
        if self.notes:
            document["notes"] = list(self.notes)
        if self.activations_trace is not None:
            document["activations_trace"] = dict(self.activations_trace)
        return document

    def to_json(self):
        return json.dumps(self.to_dict())

    def save(self, path):
        """Writes the inventory for ``trainmem estimate --model PATH``; the
        path should end in ``.inventory.json``."""
        with open(path, "w") as file:
            file.write(self.to_json())

    def __repr__(self):
        return (
            f"Inventory({self.name!r}: {len(self.parameters)} parameters, "
            f"{self.total_parameters:,} elements, {self.trainable_parameters:,} trainable, "
            f"{len(self.buffers)} buffers)"
        )


def _storage_key(tensor):
    """What identifies a parameter's memory: the storage, the offset, the
    shape and the strides. A meta tensor has no address (every one is 0),
    so it is known by its Python object alone (ties in transformers and
    timm are the same ``Parameter`` object)."""
    if tensor.device.type == "meta":
        return None
    try:
        pointer = tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    if pointer == 0:
        return None
    return (
        tensor.device.type,
        tensor.device.index,
        pointer,
        tensor.storage_offset(),
        tuple(tensor.shape),
        tuple(tensor.stride()),
    )


def _is_peft(module):
    return any(cls.__module__.split(".")[0] == "peft" for cls in type(module).__mro__)


def _config(module):
    config = getattr(module, "config", None)
    to_json = getattr(config, "to_json_string", None)
    if to_json is None:
        return None
    try:
        return json.loads(to_json(use_diff=False))
    except (TypeError, ValueError):
        return None


def from_module(module, *, buffers=True):
    """The :class:`Inventory` of ``module``'s parameters and buffers.

    Tied parameters (one storage, several names, as
    ``named_parameters(remove_duplicate=False)`` lists them) are listed once,
    under their first name, with the others in ``tied``: the same object, or
    the same storage, offset, shape and strides. A transformers model's
    ``config`` travels with the inventory: the engine reads the activation
    sizes of a known architecture from it.
    """
    named = getattr(module, "named_parameters", None)
    if named is None:
        from ._engine import Error

        raise Error(
            f"`{type(module).__name__}` is not an nn.Module; accepted: a torch.nn.Module (live or on the meta device)"
        )
    peft = _is_peft(module)
    by_object = {}
    by_storage = {}
    parameters = []
    for name, tensor in module.named_parameters(remove_duplicate=False):
        key = _storage_key(tensor)
        first = by_object.get(id(tensor))
        if first is None and key is not None:
            first = by_storage.get(key)
        if first is not None:
            first.tied.append(name)
            by_object[id(tensor)] = first
            continue
        dtype = _dtype_name(tensor.dtype, name)
        adapter = peft and "lora_" in name
        parameter = Parameter(
            name,
            tensor.shape,
            dtype,
            tensor.requires_grad,
            training_dtype=dtype if adapter else None,
        )
        parameters.append(parameter)
        by_object[id(tensor)] = parameter
        if key is not None:
            by_storage[key] = parameter
    listed = []
    if buffers:
        seen = set()
        for name, tensor in module.named_buffers():
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            listed.append(Buffer(name, tensor.shape, _dtype_name(tensor.dtype, name)))
    notes = []
    if peft:
        notes.append("peft model: trainable tensors are the ones with requires_grad")
    name = type(module).__name__
    base = getattr(getattr(module, "base_model", None), "model", None)
    if peft and base is not None:
        name = f"{name}({type(base).__name__})"
    return Inventory(name, parameters, listed, config=_config(module), notes=notes)
