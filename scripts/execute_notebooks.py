"""Execute notebooks in place with nbclient, as committed for readers (run on a GPU).

    python scripts/execute_notebooks.py notebooks/0*.ipynb
    python scripts/execute_notebooks.py --jobs 6 notebooks/1*.ipynb   # several at once

Run notebooks that time kernels live one at a time (``--jobs 1``, the default): run
side by side, they would share the GPU and time each other.

Each notebook runs in its own folder with the current Python environment's kernel,
and is saved with its outputs.  A failing cell stops that notebook with an error.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path, timeout: int = 900) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    nbformat.write(notebook, path)


def _run(name: str) -> tuple[str, float, str | None]:
    start = time.perf_counter()
    try:
        execute(Path(name))
        return name, time.perf_counter() - start, None
    except Exception as exc:  # report every notebook, then fail
        return name, time.perf_counter() - start, f"{type(exc).__name__}: {str(exc)[-2000:]}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="execute notebooks in place, saving their outputs")
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks executed at once (default 1)")
    args = parser.parse_args(argv)
    failed = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name, seconds, error in pool.map(_run, args.notebooks):
            if error is None:
                print(f"executed {name} in {seconds:.0f} s", flush=True)
            else:
                failed.append(name)
                print(f"FAILED {name} after {seconds:.0f} s: {error}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
