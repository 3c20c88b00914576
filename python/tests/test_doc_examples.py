"""The Python examples of the README and of the book's Python chapter run as
written: every ```python block, each in a fresh interpreter (as a reader
would paste it), in a temporary folder so the files they write stay out of
the checkout. They need the package installed with its extras,
`pip install '.[torch,trainer]'`, as .ci/python installs it."""

import pathlib
import re
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: The pages whose Python examples are a promise to the reader.
PAGES = ["README.md", "docs/src/python.md"]

BLOCK = re.compile(r"```python\n(.*?)```", re.S)

#: Seconds one example may take: the Trainer example trains 3 CPU steps of a
#: 2-layer model; the bound only stops a hung interpreter.
TIMEOUT = 600


def examples():
    found = []
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for number, code in enumerate(BLOCK.findall(text), start=1):
            found.append(pytest.param(code, id=f"{page}#{number}"))
    return found


def test_the_pages_have_examples():
    ids = [param.id for param in examples()]
    assert any(i.startswith("docs/src/python.md") for i in ids), ids
    # The callback example is the one a newcomer tried first.
    assert any("callbacks=[check]" in param.values[0] for param in examples())


@pytest.mark.parametrize("code", examples())
def test_example_runs_as_written(code, tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert run.returncode == 0, f"exit {run.returncode}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
    if "callbacks=[check]" in code and not torch.cuda.is_available():
        # Without a GPU the check measures nothing and says so.
        assert "no CUDA device" in run.stdout, run.stdout
        assert (tmp_path / "trainmem-memory-check.json").is_file()
