"""Rewrite every ```console block that starts with `$ trainmem ARGS` in README.md
and in every Markdown file under docs/ (the book, walked recursively) with the
real output of the binary, then the book's generated reference pages.

Run from the repository root after `cargo build --release`:

    python3 tools/update_readme.py            # blocks, then the reference pages
    python3 tools/update_readme.py --blocks   # the console blocks only

The binary is ./target/release/trainmem, or the one named by TRAINMEM_BIN. The
reference pages (docs/src/reference/architectures.md, launch-keys.md) are
written from the library's tables, and the book's copies of the charts
(docs/src/images/) from docs/, by `TRAINMEM_UPDATE_DOCS=1 cargo test --test
readme`, which this runs. `tests/readme.rs` fails when a block or a page and
the code disagree.
"""
import os
import pathlib
import re
import subprocess
import sys

BLOCK = re.compile(r"```console\n\$ trainmem ?(.*?)\n.*?```", re.S)
BINARY = os.environ.get("TRAINMEM_BIN", "./target/release/trainmem")


def rerun(match: re.Match) -> str:
    args = match.group(1)
    run = subprocess.run([BINARY, *args.split()], capture_output=True, text=True)
    # `trainmem check` exits 1 for a run that does not fit; 2 is bad input.
    if run.returncode not in (0, 1):
        raise SystemExit(f"`trainmem {args}` failed: {run.stderr.strip()}")
    out = run.stdout
    return f"```console\n$ trainmem {args}".rstrip() + "\n" + out + "```"


def documents():
    """README.md and docs/**/*.md, the built book (docs/book) left out."""
    yield pathlib.Path("README.md")
    for path in sorted(pathlib.Path("docs").rglob("*.md")):
        if pathlib.Path("docs/book") not in path.parents:
            yield path


def main():
    if not os.access(BINARY, os.X_OK):
        raise SystemExit(f"no binary at {BINARY}: run `cargo build --release` or set TRAINMEM_BIN")
    for path in documents():
        text = path.read_text(encoding="utf-8")
        new = BLOCK.sub(rerun, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path}")
    if "--blocks" not in sys.argv[1:]:
        env = dict(os.environ, TRAINMEM_UPDATE_DOCS="1")
        subprocess.run(
            [
                "cargo", "test", "--quiet", "--test", "readme", "--",
                "generated_reference_pages_match_the_code", "the_book_images_are_the_committed_charts",
            ],
            env=env,
            check=True,
        )


if __name__ == "__main__":
    main()
