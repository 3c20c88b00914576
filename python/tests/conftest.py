"""Shared helpers: the repository root, the `trainmem` binary (for
comparing the in-process engine with the command line), small models."""

import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def binary():
    """The command-line binary: $TRAINMEM_BIN (.ci/run sets it), else a
    built one under target/, else `trainmem` on PATH."""
    candidates = [os.environ.get("TRAINMEM_BIN")]
    candidates += [str(ROOT / "target" / kind / "trainmem") for kind in ("debug", "release")]
    candidates.append(shutil.which("trainmem"))
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    if os.environ.get("TRAINMEM_BIN") is not None:
        pytest.fail(f"TRAINMEM_BIN={os.environ['TRAINMEM_BIN']} is not an executable")
    pytest.skip("no trainmem binary built: run `cargo build` first")


@pytest.fixture(scope="session")
def fixtures():
    return ROOT / "tests" / "fixtures"
