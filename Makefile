# Attention, by hand — every command a user needs. `make help` lists them.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

ARGS   ?=

.PHONY: help setup services browser cjk-font proxy hub lab test test-fast lint format notebooks release grade feedback report check clean

help:  ## List the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

setup: $(BIN)/.installed  ## Create .venv and install the course (idempotent)

services:  ## Install Debian's PostgreSQL server for the gradebook tests (root or sudo)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq postgresql >/dev/null; }

lab: setup $(if $(filter zh,$(LANG)),cjk-font)  ## Set up, copy release/ to mywork/ and open it in JupyterLab (LANG=zh: 中文版)
	$(if $(filter command line,$(origin LANG)),COURSE_LANG=$(LANG) )$(BIN)/python -m course lab

browser:  ## Install Debian's Chromium and a Chinese font for the browser tests (root or sudo)
	@{ command -v chromium && fc-list :lang=zh | grep -q .; } >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; }

cjk-font:  ## Linux without a Chinese font: install one for the plots (root or sudo)
	@[ "$$(uname)" != Linux ] || fc-list :lang=zh 2>/dev/null | grep -q . || { \
	  command -v apt-get >/dev/null || { echo "Install a Chinese font (Noto Sans CJK SC)"; exit 0; }; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq fonts-wqy-microhei >/dev/null; }

hub/node_modules/.bin/configurable-http-proxy: hub/package.json hub/package-lock.json
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	touch $@

proxy: hub/node_modules/.bin/configurable-http-proxy  ## Install the hub's proxy (npm)

hub: setup proxy  ## Start the course's JupyterHub (root; docs/classroom.md)
	$(BIN)/jupyterhub -f hub/jupyterhub_config.py $(ARGS)

test: setup browser services proxy lint  ## Set up and run every test
	$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15

test-fast: setup lint  ## The tests that take seconds (no kernels, services or browser)
	$(BIN)/python -m pytest -n 2 --dist loadgroup -m "not slow" $(ARGS)

lint: setup  ## ruff: lint and format check (no changes)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup  ## ruff: format and fix, then rebuild notebooks and release/
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
	$(MAKE) release

notebooks: setup  ## Rebuild source/*/*.ipynb from their percent .py files
	$(BIN)/python -m course.authoring

release: notebooks  ## Regenerate release/ from source/ (nbgrader generate_assignment)
	$(BIN)/python -m course release

clean:  ## Remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache
