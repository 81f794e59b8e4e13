# A learner needs `make lab` (and `make test`); a teacher `make teach`. Each builds .venv the
# first time, with only what it needs (the extras of pyproject.toml), and shows pip's progress.
#
#   make lab                      JupyterLab on notebooks/ (extras: lab + the CUDA libraries)
#   make lab CUDA=cu12            the same with the CUDA 12 libraries, for a CUDA 12 driver
#   make lab PYTHON=python3.12    build .venv with another Python (3.11, 3.12 or 3.13)
#   make teach                    JupyterLab with the teaching tools (+ nbgrader, nbconvert), in TEACH_DIR
#   make test                     every test and notebook (+ pytest, nbval, playwright)
#
# .venv remembers the CUDA extra and the Python it was built with (.venv/.built-with).
# Naming another one builds .venv anew; naming none keeps the ones it has.
VENV   ?= .venv
KERNEL := three-kernels-or-one
PY     := $(VENV)/bin/python
BUILT_WITH := $(strip $(shell cat $(VENV)/.built-with 2>/dev/null))
CUDA   ?= $(or $(patsubst CUDA=%,%,$(filter CUDA=%,$(BUILT_WITH))),cu13)
PYTHON ?= $(or $(patsubst PYTHON=%,%,$(filter PYTHON=%,$(BUILT_WITH))),python3)
override CUDA   := $(strip $(CUDA))
override PYTHON := $(strip $(PYTHON))
WANTED := CUDA=$(CUDA) PYTHON=$(PYTHON)
ifeq ($(filter $(CUDA),cu12 cu13),)
$(error CUDA must be cu12 (a CUDA 12 driver) or cu13 (a CUDA 13 driver, or no GPU), not '$(CUDA)')
endif

# The extras of each environment (pyproject.toml); the CUDA extra is added to each.
EXTRAS_lab   := lab
EXTRAS_teach := lab,teach
EXTRAS_setup := lab,teach,test

# Measured on a fresh .venv with an empty pip cache (a 2-core machine, packages from a local
# mirror: 76 s for the learner's set). tests/test_environment.py keeps README.md saying the same.
SETUP_SIZE := about 1.2 GB (a 360 MB download)
SETUP_TIME := 2 to 3 minutes on a fast connection
SIZE_lab   := $(SETUP_SIZE)
SIZE_teach := about 1.3 GB
SIZE_setup := about 1.4 GB

# JupyterLab refuses to run as root (containers, CI) unless told.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
TEACH_DIR ?= .

.PHONY: lab teach test setup clean venv-is-stale

lab: $(VENV)/.installed-lab
	$(VENV)/bin/jupyter lab notebooks/ $(ROOT_FLAG) $(LAB_ARGS)

teach: $(VENV)/.installed-teach
	cd $(TEACH_DIR) && $(abspath $(VENV))/bin/jupyter lab $(ROOT_FLAG) $(LAB_ARGS)

setup: $(VENV)/.installed-setup

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

ifneq ($(BUILT_WITH),$(WANTED))
STALE := venv-is-stale
endif
venv-is-stale: ;

# (Re)build .venv when it was built with other settings, then install the extras of $*.
$(VENV)/.installed-%: pyproject.toml setup.py $(STALE)
	@if [ "$$(cat $(VENV)/.built-with 2>/dev/null)" != "$(WANTED)" ]; then \
	  if [ -d $(VENV) ]; then echo "$(VENV) was built with other settings ($$(cat $(VENV)/.built-with 2>/dev/null)); building it anew with $(WANTED)"; fi; \
	  rm -rf $(VENV) && $(PYTHON) -m venv $(VENV) && echo "$(WANTED)" > $(VENV)/.built-with; \
	fi
	@echo "Installing into $(VENV) ($(WANTED), extras $(EXTRAS_$*),$(CUDA)): the first time $(SIZE_$*), $(SETUP_TIME)."
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install -e ".[$(EXTRAS_$*),$(CUDA)]" || { \
	  echo 'pip could not install the project into $(VENV) (see above). If it says "requires a different Python",'; \
	  echo 'build it with a Python the project supports (3.11, 3.12 or 3.13), e.g. make lab PYTHON=python3.12'; exit 1; }
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (three kernels or one)"
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info

# The size sweep of notebook 05 (a tiny correctness-only sweep in the simulator).
# e.g. make bench BENCH_ARGS="--sizes 2^10..2^24:2 --impl three,fused,copy"
.PHONY: bench
bench: $(VENV)/.installed-lab
	$(PY) -m helpers.lessons.sweep $(BENCH_ARGS)

# Student and solution notebooks from notebooks/exercises/source (never clobbers a
# student's edits; RELEASE_ARGS=--force to overwrite, RELEASE_ARGS=--check to verify).
.PHONY: release-exercises
release-exercises: $(VENV)/.installed-teach
	$(PY) scripts/release_exercises.py $(RELEASE_ARGS)

# The readable HTML edition: the committed (GPU-executed) notebooks, nothing re-run,
# into build/html/ (open build/html/index.html); it works offline (MathJax included).
# The exercises' solutions are left out; SOLUTIONS=1 publishes them (after the session).
.PHONY: html
html: $(VENV)/.installed-teach
	$(PY) scripts/build_html.py --out build/html $(if $(filter 1,$(SOLUTIONS)),--solutions)

# An nbgrader course folder (docs/teaching.md): one assignment per exercise, and an
# nbgrader_config.py (course id, kernel, cell timeout). COURSE names the folder: outside
# the repository, or course/ (git-ignored). Files you edited there are kept (FORCE=1 replaces them).
.PHONY: course
course:
	$(if $(strip $(COURSE)),,$(error name the course folder, e.g. make course COURSE=~/three-kernels-course))
	$(if $(wildcard $(PY)),$(PY),$(PYTHON)) scripts/course.py $(if $(filter 1,$(FORCE)),--force) "$(strip $(COURSE))"

# The test suite on a GPU, in parallel (pytest-xdist), in under 10 minutes on an H200; then, one at a time, the
# tests marked gpu_alone, which read device-wide counters that other tests' kernels would add to.
# The browser, README and HTML tests need no GPU and stay with `make test` (CI).
# On a machine whose own Python already has the packages: make test-gpu PY=python3
JOBS ?= 12
GPU_TESTS = tests -q -rfs -o addopts="-p no:cacheprovider" --timeout 600 \
  --ignore=tests/test_browser.py --ignore=tests/test_readme.py --ignore=tests/test_html.py
.PHONY: test-gpu
test-gpu: $(if $(filter $(VENV)/bin/python,$(PY)),setup)
	$(PY) -m pytest $(GPU_TESTS) -n $(JOBS) -m "not gpu_alone" $(PYTEST_ARGS)
	$(PY) -m pytest $(GPU_TESTS) -m gpu_alone $(PYTEST_ARGS)
