"""trainmem: how much memory training a model takes, piece by piece.

The same Rust engine as the ``trainmem`` command line, run in-process::

    import trainmem
    report = trainmem.estimate(model="llama-3.1-8b", optimizer="adamw",
                               precision="mixed-bf16", micro_batch=1,
                               seq_len=4096, gpus=8, zero=3)
    report["memory"]["total"]          # bytes, as `trainmem estimate --format json`

Keyword names are the command line's flags with ``_`` for ``-``
(``micro_batch=1`` is ``--micro-batch 1``); ``True`` is a bare switch
(``events=True`` is ``--events``), ``False`` and ``None`` leave the flag out,
and a list or tuple repeats the flag (``freeze=["embed", "norm"]``). Bad input
raises :class:`trainmem.Error`, a ``ValueError`` whose message is the line the
command line prints after ``error:``.

``module=`` prices any PyTorch ``nn.Module`` (live or on the meta device) from
its own parameters: see :func:`from_module`. :func:`trace_activations` measures
what autograd saves in one forward on the meta device, and
:class:`trainmem.torch.MemoryCheck` compares a prediction with the memory a
real run takes on a GPU.

Importing ``trainmem`` does not import torch; ``from_module``,
``trace_activations`` and ``trainmem.torch`` do, when called.
"""

from ._command import Error, TrainmemWarning, run, command
from ._command import estimate, timeline, fit, check, plan, params, compare

__version__ = "0.1.0"

__all__ = [
    "Error",
    "TrainmemWarning",
    "run",
    "command",
    "estimate",
    "timeline",
    "fit",
    "check",
    "plan",
    "params",
    "compare",
    "from_module",
    "Inventory",
    "trace_activations",
    "Trace",
]


def from_module(module, *, buffers=True):
    """The parameter inventory of ``module`` (see :mod:`trainmem.inventory`)."""
    from .inventory import from_module as _from_module

    return _from_module(module, buffers=buffers)


def trace_activations(module, example_inputs, loss_fn=None, **kwargs):
    """What autograd saves in one forward of ``module`` (see :mod:`trainmem.trace`)."""
    from .trace import trace_activations as _trace

    return _trace(module, example_inputs, loss_fn, **kwargs)


def __getattr__(name):
    # Classes of the torch-side modules, loaded on first use.
    if name == "Inventory":
        from .inventory import Inventory

        return Inventory
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    if name == "Trace":
        from .trace import Trace

        return Trace
    raise AttributeError(f"module 'trainmem' has no attribute {name!r}")
