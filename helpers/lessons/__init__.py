"""One folder per lesson: its kernels, its measurement run, its result records, its tables and figures.

``docs/architecture.md`` maps each folder to its notebook, its GPU step under ``scripts/gpu/``
and its result files; ``tests/test_structure.py`` holds every folder to the same parts.
"""
