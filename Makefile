# The two entry points of the README: `make demo` and `make test`.
# Both create a virtual environment in $(VENV) and install skxmc into it.
# TORCH_SPEC pins the CPU build of PyTorch found on the local disk of our machines; on another
# machine set it to the build you want (e.g. TORCH_SPEC=torch) or install torch beforehand.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: install install-test demo test lint docs

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e .

install-test: $(PY)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[test]"

demo: install
	$(VENV)/bin/skxmc demo

test: install-test
	$(PY) -m pytest $(PYTEST_ARGS)

lint: install-test
	$(VENV)/bin/ruff check .

docs: $(PY)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[docs]"
	$(MAKE) -C docs html SPHINXBUILD="$(abspath $(VENV))/bin/sphinx-build"
