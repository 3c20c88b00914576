"""Predicted against measured on the user's own GPU: :class:`MemoryCheck`.

As a context manager around the first steps of a training loop::

    import trainmem, trainmem.torch
    prediction = trainmem.estimate(module=model, optimizer="adamw",
                                   precision="mixed-bf16", micro_batch=8, seq_len=2048)
    with trainmem.torch.MemoryCheck(prediction, steps=3) as check:
        for batch in loader:
            loss = model(**batch).loss
            loss.backward(); optimizer.step(); optimizer.zero_grad()
            if check.step():          # False once the steps are recorded
                break

or as a transformers ``TrainerCallback``:
``Trainer(..., callbacks=[trainmem.torch.MemoryCheck(prediction)])``.

On a CUDA device it records, over the first ``steps`` steps,
``torch.cuda.memory_allocated()`` when the check starts (the weights, when
the model was just moved there), at the end of each step (weights,
optimizer states and the gradients kept between steps) and
``max_memory_allocated()`` / ``max_memory_reserved()`` (the peak and what
the caching allocator took); with ``snapshot=True`` also the allocator's
memory snapshot (``torch.cuda.memory._snapshot()``, a pickle for
https://pytorch.org/memory_viz). It prints predicted against measured and
writes a JSON report (``report``) to attach to a bug. Without a CUDA device it
measures nothing and says so, in the printout and in the report.
"""

import json
import platform
import sys

import torch

from . import __version__

__all__ = ["MemoryCheck"]

try:  # a TrainerCallback when transformers is installed
    from transformers import TrainerCallback as _Callback
except ImportError:  # pragma: no cover - transformers is optional

    class _Callback:
        pass


#: The report's format version.
REPORT_VERSION = 1

#: What the report says when there is no CUDA device.
NO_CUDA = "no CUDA device: nothing was measured (torch.cuda.is_available() is False); run on a GPU to compare the prediction with real memory"


def _gib(value):
    return "-" if value is None else f"{value / 2**30:.3f} GiB"


class MemoryCheck(_Callback):
    """Records real GPU memory over the first ``steps`` training steps and
    compares it with ``prediction`` (a ``trainmem.estimate`` dict; ``None``
    to measure only, or keyword arguments of ``trainmem.estimate`` in
    ``estimate``). ``report``: where the JSON report goes (``None``: not
    written). ``device``: the CUDA device (default: the current one)."""

    def __init__(self, prediction=None, *, steps=3, report="trainmem-memory-check.json",
                 device=None, snapshot=False, estimate=None, quiet=False):
        if steps < 1:
            from ._engine import Error

            raise Error(f"steps `{steps}`; accepted: a whole number >= 1")
        if prediction is None and estimate is not None:
            from . import estimate as _estimate

            prediction = _estimate(**estimate)
        self.prediction = prediction
        self.steps = steps
        self.report_path = report
        self.snapshot_wanted = snapshot
        self.quiet = quiet
        self.cuda = torch.cuda.is_available()
        self.device = torch.device(device if device is not None else "cuda") if self.cuda else None
        self.started = False
        self.finished = False
        self.at_start = None
        self.records = []
        self.report = None

    # -- the context manager ---------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.finish()
        return False

    def start(self):
        """Starts recording: resets the device's peak statistics."""
        if self.started:
            return
        self.started = True
        if not self.cuda:
            return
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.at_start = torch.cuda.memory_allocated(self.device)
        if self.snapshot_wanted:
            torch.cuda.memory._record_memory_history(max_entries=100000)

    def step(self):
        """Records the step that just ended; ``False`` once ``steps`` steps
        are recorded (the loop may stop)."""
        if not self.started:
            self.start()
        if self.finished or len(self.records) >= self.steps:
            return False
        record = {"step": len(self.records) + 1}
        if self.cuda:
            torch.cuda.synchronize(self.device)
            record.update(
                allocated=torch.cuda.memory_allocated(self.device),
                max_allocated=torch.cuda.max_memory_allocated(self.device),
                max_reserved=torch.cuda.max_memory_reserved(self.device),
            )
        self.records.append(record)
        return len(self.records) < self.steps

    def finish(self):
        """Stops recording, prints predicted against measured and writes
        the report; returns the report (a dict)."""
        if self.finished:
            return self.report
        if not self.started:
            self.start()
        self.finished = True
        snapshot_path = None
        if self.cuda and self.snapshot_wanted:
            import pickle

            snapshot = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            snapshot_path = (self.report_path or "trainmem-memory-check.json") + ".snapshot.pickle"
            with open(snapshot_path, "wb") as file:
                pickle.dump(snapshot, file)
        self.report = self._report(snapshot_path)
        if self.report_path is not None:
            with open(self.report_path, "w") as file:
                json.dump(self.report, file, indent=2)
                file.write("\n")
        if not self.quiet:
            print(self.summary())
        return self.report

    # -- transformers.TrainerCallback ------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        self.start()

    def on_step_end(self, args, state, control, **kwargs):
        if not self.step() and not self.finished:
            self.finish()

    def on_train_end(self, args, state, control, **kwargs):
        self.finish()

    # -- the report --------------------------------------------------------------

    def _device(self):
        if not self.cuda:
            return {"cuda": False, "name": None, "total_memory": None}
        properties = torch.cuda.get_device_properties(self.device)
        return {"cuda": True, "name": properties.name, "total_memory": properties.total_memory}

    def _measured(self):
        if not self.cuda:
            return None
        last = self.records[-1] if self.records else {}
        return {
            "at_start": self.at_start,
            "after_steps": last.get("allocated"),
            "peak": max((r["max_allocated"] for r in self.records), default=None),
            "reserved": max((r["max_reserved"] for r in self.records), default=None),
            "steps": list(self.records),
        }

    def _comparison(self, measured):
        memory = (self.prediction or {}).get("memory")
        if memory is None:
            return []
        steady = sum(memory.get(k, 0) for k in ("weights", "master_weights", "gradients", "optimizer_states"))
        rows = [
            ("weights (allocated at start)", memory.get("weights"), "at_start"),
            ("weights + master + gradients + optimizer states (allocated after the steps)", steady, "after_steps"),
            ("peak (max allocated)", memory.get("peak"), "peak"),
            ("reserved (max reserved)", memory.get("reserved"), "reserved"),
        ]
        table = []
        for label, predicted, key in rows:
            value = measured.get(key) if measured else None
            error = None
            if predicted and value is not None:
                error = (predicted - value) / value if value else None
            table.append({"piece": label, "predicted": predicted, "measured": value, "relative_error": error})
        return table

    def _report(self, snapshot_path):
        measured = self._measured()
        return {
            "trainmem_memory_check": REPORT_VERSION,
            "status": "measured" if self.cuda else NO_CUDA,
            "device": self._device(),
            "steps_recorded": len(self.records),
            "predicted": (self.prediction or {}).get("memory"),
            "measured": measured,
            "comparison": self._comparison(measured),
            "snapshot": snapshot_path,
            "notes": [
                "after_steps holds the gradients only if the loop keeps them between steps (zero_grad(set_to_none=False)); with set_to_none it is weights, master weights and optimizer states",
                "allocated at start is the weights only when nothing else was on the device before the check began",
            ],
            "versions": {
                "trainmem": __version__,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "python": sys.version.split()[0],
                "platform": platform.platform(),
            },
            "prediction": self.prediction,
        }

    def summary(self):
        """The printout: predicted against measured, one line per piece."""
        report = self.report if self.report is not None else self._report(None)
        lines = ["trainmem memory check"]
        if not self.cuda:
            lines.append(f"  {NO_CUDA}")
            if report["predicted"]:
                lines.append(f"  predicted peak {_gib(report['predicted'].get('peak'))}, "
                             f"total {_gib(report['predicted'].get('total'))}")
        else:
            device = report["device"]
            lines.append(f"  {device['name']}, {_gib(device['total_memory'])}, {report['steps_recorded']} steps")
            if report["comparison"]:
                for row in report["comparison"]:
                    error = "" if row["relative_error"] is None else f" ({row['relative_error']:+.1%})"
                    lines.append(f"  {row['piece']}: predicted {_gib(row['predicted'])}, measured {_gib(row['measured'])}{error}")
            else:
                measured = report["measured"]
                lines.append(f"  peak {_gib(measured['peak'])}, reserved {_gib(measured['reserved'])} (no prediction given)")
        if self.report_path is not None:
            lines.append(f"  report: {self.report_path}")
        return "\n".join(lines)
