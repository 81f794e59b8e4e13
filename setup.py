"""What pyproject.toml cannot say: which packages the wheel holds, found rather than listed.

Every folder under ``helpers/`` is a package (a folder of data files, such as
``helpers/lessons/roofline``, whose CUDA C source is package data), and ``results/h200`` -- the results measured
on an H200 and committed, which the lessons read where they cannot measure -- goes into
the wheel as ``helpers/_results/h200``, where ``helpers/results.py`` finds it when the
project is installed rather than checked out.  Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

COMMITTED_RESULTS = {"helpers._results.h200": "results/h200"}

setup(
    packages=find_namespace_packages(include=["helpers", "helpers.*"], exclude=["*.__pycache__"]) + list(COMMITTED_RESULTS),
    package_dir=COMMITTED_RESULTS,
)
