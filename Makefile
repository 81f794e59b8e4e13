# Two commands for a learner: `make lab` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
CUDA   ?= cu13                      # cu12 for a CUDA 12 driver
PY     := $(VENV)/bin/python
KERNEL := three-kernels-or-one

.PHONY: lab test setup clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,$(strip $(CUDA))]"
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (three kernels or one)"
	touch $@

# JupyterLab refuses to run as root (containers, CI) unless told; say so for the learner.
lab: setup
	$(VENV)/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info

# The size sweep of notebook 05 (a tiny correctness-only sweep in the simulator).
# e.g. make bench BENCH_ARGS="--sizes 2^10..2^24:2 --impl three,fused,copy"
.PHONY: bench
bench: setup
	$(PY) -m helpers.lab.bench $(BENCH_ARGS)

# Student and solution notebooks from notebooks/exercises/source (never clobbers a
# student's edits; RELEASE_ARGS=--force to overwrite, RELEASE_ARGS=--check to verify).
.PHONY: release-exercises
release-exercises: setup
	$(PY) scripts/release_exercises.py $(RELEASE_ARGS)

# The readable HTML edition: the committed (GPU-executed) notebooks, nothing re-run,
# into build/html/ (open build/html/index.html); it works offline (MathJax included).
# The exercises' solutions are left out; SOLUTIONS=1 publishes them (after the session).
.PHONY: html
html: setup
	$(PY) scripts/build_html.py --out build/html $(if $(filter 1,$(SOLUTIONS)),--solutions)

# An nbgrader course folder (docs/teaching.md): one assignment per exercise, and an
# nbgrader_config.py (course id, kernel, cell timeout). COURSE names the folder: outside
# the repository, or course/ (git-ignored). Files you edited there are kept (FORCE=1 replaces them).
.PHONY: course
course:
	$(if $(strip $(COURSE)),,$(error name the course folder, e.g. make course COURSE=~/three-kernels-course))
	$(if $(wildcard $(PY)),$(PY),$(PYTHON)) scripts/course.py $(if $(filter 1,$(FORCE)),--force) "$(strip $(COURSE))"

# The test suite on a GPU, in parallel (pytest-xdist), in under 10 minutes on an H200.
# The browser, README and HTML tests need no GPU and stay with `make test` (CI).
# On a machine whose own Python already has the packages: make test-gpu PY=python3
JOBS ?= 12
.PHONY: test-gpu
test-gpu: $(if $(filter $(VENV)/bin/python,$(PY)),setup)
	$(PY) -m pytest tests -n $(JOBS) -q -rfs -o addopts="-p no:cacheprovider" --timeout 600 \
	  --ignore=tests/test_browser.py --ignore=tests/test_readme.py --ignore=tests/test_html.py $(PYTEST_ARGS)
