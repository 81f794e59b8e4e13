"""Execute notebooks in place with nbclient, as committed for readers (run on a GPU).

    python scripts/execute_notebooks.py notebooks/0*.ipynb

Each notebook runs in its own folder with the current Python environment's kernel,
and is saved with its outputs.  A failing cell stops that notebook with an error.
"""

from __future__ import annotations

import sys
import time
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


def main(paths: list[str]) -> int:
    failed = []
    for name in paths:
        start = time.perf_counter()
        try:
            execute(Path(name))
            print(f"executed {name} in {time.perf_counter() - start:.0f} s", flush=True)
        except Exception as exc:  # report every notebook, then fail
            failed.append(name)
            print(f"FAILED {name}: {type(exc).__name__}: {str(exc)[-2000:]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
