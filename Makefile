# Two commands do all the set-up on a fresh machine with Python >= 3.10:
#   make lab    creates .venv, installs tilelab, opens JupyterLab on notebooks/
#   make test   creates .venv, installs tilelab with its test tools, runs the whole suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch first and pinned: a bare "torch" can pull a multi-GB CUDA build on a CPU machine.
TORCH  ?= torch==2.13.0
# Where pip looks for torch first: on this project's machines torch==2.13.0 resolves to a CPU build
# held locally; elsewhere, e.g. make TORCH_INDEX=https://download.pytorch.org/whl/cpu test
TORCH_INDEX ?=
STAMP  := $(VENV)/.tilelab-installed
PYTEST_ARGS ?=

.PHONY: install lab test test-gpu chromium clean

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) "$(TORCH)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[dev,lab]"
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

test: $(STAMP) chromium
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# On a GPU machine: the tests that launch kernels.
test-gpu: $(STAMP)
	$(BIN)/python -m pytest -m gpu $(PYTEST_ARGS)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks

clean:
	rm -rf $(VENV) .pytest_cache .tilelab-cache
