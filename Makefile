# make run: set up the virtual environment if missing, then train MGFormer on ml-100k (the copy inside the recbole wheel).
# make test: set up the virtual environment if missing, lint (make lint), then run the fast suite: every test but the
#   end-to-end training runs and the whole results/ re-render, marked slow (MARKS), under 10 minutes on 2 cores.
# make test-all: the same with the end-to-end runs (what CI runs on the pinned stack).
# make lint: ruff check and ruff format --check over the package, experiments/ and tests/ (settings in pyproject.toml).
#
# PYTHON picks the interpreter and with it the stack:
#   python3.11 (default here): the tested pin set (constraints/pinned.txt: torch 2.13.0 CPU, numpy 1.26, Ray 2.6.3) in .venv
#   any other (make test PYTHON=python3.13): today's newest releases (numpy 2, pandas 3, newest torch and Ray) in .venv-py313
# STACK=latest or STACK=pinned overrides the choice.
PYTHON ?= python3
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
ifeq ($(PY_VERSION),)
$(error PYTHON=$(PYTHON) does not run; name an interpreter, e.g. PYTHON=$$(pyenv root)/versions/3.13.0/bin/python3.13)
endif
STACK ?= $(if $(filter 3.11,$(PY_VERSION)),pinned,latest)
VENV ?= $(if $(filter pinned,$(STACK)),.venv,.venv-py$(subst .,,$(PY_VERSION)))
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
STAMP := $(VENV)/.installed-$(STACK)
ARGS ?=
MARKS ?= not slow

.PHONY: run test test-all lint install clean

install: $(STAMP)

# torch first: on the pinned stack its CPU wheel is local here, and installing it before the package keeps pip
# from pulling a CUDA build to satisfy the package's own torch requirement. PyPI's torch wheel (the latest stack)
# does not import without its nvidia-* libraries (libcudnn.so.9), so there it comes with them (about 3 GB, ~1 min here).
# RecBole last and with --no-deps: its ray<=2.6.3 pin has no wheels past Python 3.11; pyproject.toml lists its
# real requirements.
$(STAMP): pyproject.toml constraints/pinned.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
ifeq ($(STACK),pinned)
	$(PIP) -c constraints/pinned.txt torch==2.13.0
	$(PIP) -c constraints/pinned.txt -e ".[test,tune]"
else
	$(PIP) torch
	$(PIP) -e ".[test,tune]"
endif
	$(PIP) --no-deps recbole==1.2.1
	touch $(STAMP)

run: $(STAMP)
	$(PY) run.py --model=MGFormer --dataset=ml-100k $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint
	$(PY) -m pytest -q -m "$(MARKS)" $(ARGS)

test-all: lint
	$(PY) -m pytest -q $(ARGS)

clean:
	rm -rf .venv .venv-py* log log_tensorboard saved build *.egg-info
