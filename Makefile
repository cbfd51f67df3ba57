# make run: set up .venv if missing, then train MGFormer on ml-100k (the copy inside the recbole wheel).
# make test: set up .venv if missing, then run the whole test suite (slow end-to-end tests included).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test test-fast install clean

install: $(STAMP)

# torch first: its CPU wheel is local here, and installing it before the package keeps pip
# from pulling a CUDA build to satisfy the package's own torch requirement.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test,tune]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) run.py --model=MGFormer --dataset=ml-100k $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q $(ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" $(ARGS)

clean:
	rm -rf $(VENV) log log_tensorboard saved build *.egg-info
