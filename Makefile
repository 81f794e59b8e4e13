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

lab: setup
	$(VENV)/bin/jupyter lab notebooks/ $(LAB_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
