# The two entry points of the README: `make demo` and `make test`.
# Both create a virtual environment in $(VENV) and install skxmc into it.
# TORCH_SPEC pins the CPU build of PyTorch found on the local disk of our machines; on another
# machine set it to the build you want (e.g. TORCH_SPEC=torch) or install torch beforehand.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# `make test-oldest`: the oldest scikit-learn that pyproject.toml claims (tests/test_compat.py
# checks that the two agree), in a venv of its own, on the tests that need no transformer
# (about 2 min on 2 cores, install included); `make test` runs everything on the newest.
OLDEST_VENV ?= .venv-oldest
SKLEARN_OLDEST ?= 1.6.1
OLDEST_TESTS ?= tests/test_compat.py tests/test_logging.py tests/test_common.py \
	tests/test_labels.py tests/test_xrlinear.py tests/test_linear_solver.py tests/test_tree.py \
	tests/test_label2vec.py tests/test_metrics.py tests/test_search.py tests/test_datasets.py \
	tests/test_vectorizers.py tests/test_cli.py tests/test_sklearn_workflows.py \
	tests/test_pipeline.py

.PHONY: install install-test demo test lint docs test-oldest

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

test-oldest:
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(OLDEST_VENV)/bin/python -m pip install --quiet -e ".[test]" "scikit-learn==$(SKLEARN_OLDEST)"
	$(OLDEST_VENV)/bin/python -m pytest $(PYTEST_ARGS) $(OLDEST_TESTS)
