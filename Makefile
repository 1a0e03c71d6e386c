# Two commands do all the set-up on a fresh machine with Python >= 3.10:
#   make lab    creates .venv, installs tilelab, opens JupyterLab on notebooks/
#   make test   creates .venv, installs tilelab with its test tools, runs the lint, then the suite: every
#               test but the long end-to-end proofs, of which it runs one of each kind (minutes on 2 cores)
# The rest of those proofs, apart: make test-heavy (marker heavy) and make test-mutants (every mutant
# of the course's kernel exercises); make test-all runs the three in turn.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch first and pinned: a bare "torch" can pull a multi-GB CUDA build on a CPU machine.
TORCH  ?= torch==2.13.0
# Where pip also looks for torch, e.g. make TORCH_INDEX=https://download.pytorch.org/whl/cpu test
TORCH_INDEX ?=
STAMP  := $(VENV)/.tilelab-installed
PYTEST_ARGS ?=
# pytest-xdist spreads the test files over the cores, each file whole in one process (its module
# fixtures are built once), the files with slow tests first (tests/conftest.py): one process more than
# the cores this make may use, at most 4. A test process often waits (on a child process it started,
# a time limit it proves, the browser, JupyterLab's server), and the extra process keeps the cores
# busy meanwhile; where other programs load the cores too, it also keeps the suite's share of them.
# PYTEST_WORKERS=0: all in this process; =auto: one a core.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c "import os; n = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1; print(min(4, n + 1))")

# Every command here writes the bytecode of what it imports (__pycache__ in the clone and in .venv),
# even where the environment says not to (PYTHONDONTWRITEBYTECODE): the suite starts many Python
# processes (pytest-xdist's, the CPU worker, the fresh-process proofs, notebook kernels), which then
# compile each module, and pytest rewrites each test module's asserts, once instead of in each process.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install lab test test-gpu test-binder test-mutants test-heavy test-all chromium clean

# pip is upgraded only where it is older than the editable install of a pyproject.toml project needs
# (21.3); the packages are installed without compiling their ~12,000 modules to bytecode (--no-compile):
# Python compiles the ones a program imports at its first import, into the same __pycache__ folders
# (below: even where the environment sets PYTHONDONTWRITEBYTECODE). The last line imports what every
# process of tilelab's imports (torch, TileLang, tilelab), so that their bytecode is there from the
# start, also for a Python run later outside make with PYTHONDONTWRITEBYTECODE set.
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) "pip>=21.3"
	$(PIP) --no-compile $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) "$(TORCH)"
	$(PIP) --no-compile -e ".[dev,lab]"
	$(BIN)/python -c "import torch, tilelang, tilelab.launch, IPython"
	@touch $@

install: $(STAMP)

# Debian's Chromium for the real-browser test (Playwright drives it; it downloads no browser).
# Where it cannot be installed the browser test skips and says so.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "make: could not install chromium; the browser test will skip"; \
	  else echo "make: chromium is not installed and apt-get is not usable; the browser test will skip"; fi; }

# The lint (below) runs first: a ruff or mypy finding fails `make test`. The tests that press the
# stop button (marker stop_button: a KeyboardInterrupt through Python's SIGINT handling) run after,
# in one plain pytest process: a KeyboardInterrupt that reaches a pytest-xdist worker can end the
# worker's whole session. Exit status 5 there means the selection had none of them.
test: $(STAMP) chromium lint
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --maxprocesses=4 --dist loadfile --no-loadscope-reorder \
		-m "not stop_button and not heavy" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -p no:xdist -m stop_button $(PYTEST_ARGS); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]

# The course's whole mutant suite: `make test` runs one mutant of each lesson (of its first kernel
# exercise whose checker runs on the CPU by itself, not 04.2's results function); this runs them all.
test-mutants: $(STAMP)
	TILELAB_ALL_MUTANTS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --maxprocesses=4 --dist loadfile \
		tests/workshop/test_course_mutants.py tests/workshop/test_course_mutants_kernels.py $(PYTEST_ARGS)

# The long end-to-end proofs beside the one of each kind that `make test` runs (marker heavy: the
# doctor's reproducers of four more failing cells, each run in a fresh TileLang process; the CLI's and the
# magic's runs in fresh processes past the first of each; the corpus command over its own scripts; a
# room of notebooks graded in clean processes; a sweep's kernel compiled in another process and loaded
# here; every link of the test kernels' pages; the 02.1 sign slip graded in a clean process; the
# browser's notebook-06, pictures, saved-and-reopened and beside-a-trusted-notebook walks and its
# desktop width; the course's notebooks run whole but 06, and the kernel exercises'
# solutions and wrong answers past one of each lesson; the CPU path's longer kernels and the planted mistakes of attention,
# dequantisation and the other GEMMs; the instrumented compiles past the Hopper GEMM's).
test-heavy: $(STAMP) chromium
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --maxprocesses=4 --dist loadfile -m "heavy and not stop_button" \
		$(PYTEST_ARGS)

# Everything the CPU runs: the quick gate, then the long proofs and the whole mutant suite.
test-all: test test-heavy test-mutants

# On a machine with an NVIDIA GPU: the tests that launch kernels, in their own environment
# (.venv-gpu) with a CUDA build of torch, so the CPU pin of `make test` stays as it is.
#   make test-gpu                  torch from PyTorch's CUDA 12.8 wheels (needs driver >= 570)
#   make test-gpu CUDA=cu130       CUDA 13.0 wheels (driver >= 580); cu126 for older drivers
#   make test-gpu SYSTEM_TORCH=1   the CUDA torch already installed for $(PYTHON), as it is
# TileLang compiles kernels with nvcc: it must be on PATH or under $CUDA_HOME (the CUDA toolkit).
GPU_VENV  := .venv-gpu
GPU_STAMP := $(GPU_VENV)/.tilelab-installed
CUDA      ?= cu128
GPU_TORCH ?= torch
GPU_TORCH_INDEX ?= https://download.pytorch.org/whl/$(CUDA)
SYSTEM_TORCH ?=

$(GPU_STAMP): pyproject.toml Makefile
	@command -v nvidia-smi >/dev/null 2>&1 || { echo "make test-gpu: nvidia-smi not found: this machine has no NVIDIA driver"; exit 1; }
	@command -v nvcc >/dev/null 2>&1 || test -x "$${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" || { \
	  echo "make test-gpu: nvcc not found on PATH or in \$$CUDA_HOME/bin: install the CUDA toolkit or set CUDA_HOME"; exit 1; }
	@test -x $(GPU_VENV)/bin/python || $(PYTHON) -m venv $(if $(SYSTEM_TORCH),--system-site-packages) $(GPU_VENV)
	$(GPU_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(if $(SYSTEM_TORCH),,$(GPU_VENV)/bin/python -m pip install -q --disable-pip-version-check --index-url $(GPU_TORCH_INDEX) "$(GPU_TORCH)")
	$(GPU_VENV)/bin/python -c "import torch, sys; torch.cuda.is_available() or sys.exit('make test-gpu: torch ' + torch.__version__ + ' sees no CUDA GPU (a CPU build, or a CUDA build newer than the driver: try CUDA=cu126)')"
	$(GPU_VENV)/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,lab]"
	@touch $@

test-gpu: $(GPU_STAMP)
	$(GPU_VENV)/bin/python -m pytest -m gpu $(PYTEST_ARGS)

# As root (a container), JupyterLab refuses to start without --allow-root: pass it then, and only then.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

# Binder's environment, rebuilt from scratch: binder/requirements.txt (and postBuild) in a fresh
# venv, then the course's notebooks run headless in it (as committed and with the solutions).
# Needs the network (PyPI and PyTorch's CPU index); not part of `make test`.
BINDER_VENV := .venv-binder

test-binder:
	rm -rf $(BINDER_VENV)
	$(PYTHON) -m venv $(BINDER_VENV)
	$(BINDER_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BINDER_VENV)/bin/python -m pip install -q --disable-pip-version-check -r binder/requirements.txt
	PATH="$(CURDIR)/$(BINDER_VENV)/bin:$$PATH" bash binder/postBuild
	$(BINDER_VENV)/bin/python -m pip install -q --disable-pip-version-check pytest nbclient nbformat
	$(BINDER_VENV)/bin/python -m pytest -p no:cacheprovider tests/workshop/test_workshop_notebooks.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(GPU_VENV) $(BINDER_VENV) .pytest_cache .tilelab-cache

# Lint and types (ruff and mypy come with the dev extra; configured in pyproject.toml).
.PHONY: lint
lint: $(STAMP)
	$(BIN)/ruff check tilelab tests benchmarks
	$(BIN)/mypy
