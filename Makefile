# p4cc — make setup | p4 | testbed | cli | test | test-all | lint | bench
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Debian's/Ubuntu's python3 sees the distribution's Mininet and BMv2's Thrift runtime
# modules (the venv is made with --system-site-packages for that reason).
PY ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
TOPO ?= star,hosts=5
AGENT ?= hold
CC ?= dcqcn
P4C ?= p4c
# p4runtime-shell pins protobuf<3.21 and p4runtime 1.4.1 (p4cc needs 1.6.0, protobuf>=4.21):
# it gets its own venv (docs/emulation.md, "p4runtime-shell")
P4RT_SHELL_VENV ?= .venv-p4rt-shell
P4RT_SHELL_VERSION ?= 0.0.6

APT_PACKAGES := mininet iperf3 ethtool iproute2 iputils-ping tcpdump python3-venv

.PHONY: help setup venv p4rt-shell p4 testbed cli top test test-all lint bench clean

help:
	@echo "make setup     install what the distribution and PyPI provide; report BMv2/p4c"
	@echo "make p4        compile p4src/ into p4cc/data/p4/ (needs p4c)"
	@echo "make testbed   the main job (BMv2 if installed, else the simulator)"
	@echo "make cli       Mininet CLI on TOPO=$(TOPO), AGENT=$(AGENT), CC=$(CC), control plane running"
	@echo "make top       live view of the running CLI's ports (second terminal)"
	@echo "make p4rt-shell  p4runtime-shell's own venv ($(P4RT_SHELL_VENV); part of setup)"
	@echo "make test      default tests (no root, BMv2 or Mininet needed)"
	@echo "make test-all  also the bmv2/root/mininet/slow tests where the tools exist"
	@echo "make lint      ruff + mypy + import contracts (lint-imports)"

$(BIN)/.stamp: pyproject.toml
	@[ -n "$(PY)" ] || { echo "error: no python3 found; install python3 (>= 3.10)"; exit 1; }
	@$(PY) -m venv --help >/dev/null 2>&1 && $(PY) -c 'import ensurepip' 2>/dev/null || { \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; \
	  else echo "error: $(PY) lacks venv/ensurepip; install python3-venv"; exit 1; fi; }
	$(PY) -m venv --system-site-packages $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,train,sweep]'
	@touch $@

venv: $(BIN)/.stamp

$(P4RT_SHELL_VENV)/.stamp:
	$(PY) -m venv $(P4RT_SHELL_VENV)
	$(P4RT_SHELL_VENV)/bin/pip install -q --upgrade pip
	$(P4RT_SHELL_VENV)/bin/pip install -q 'p4runtime-shell==$(P4RT_SHELL_VERSION)'
	@touch $@

p4rt-shell: $(P4RT_SHELL_VENV)/.stamp

setup: venv p4rt-shell
	@if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	else echo "note: not root or no apt-get; install yourself: $(APT_PACKAGES)"; fi
	@$(BIN)/p4cc doctor

p4: venv
	$(BIN)/python -m p4cc.controlplane.p4build --p4c $(P4C)

testbed: setup
	$(BIN)/p4cc testbed

cli: setup
	$(BIN)/p4cc cli --topo $(TOPO) --agent $(AGENT) --cc $(CC)

top: venv
	$(BIN)/p4cc top

test: venv p4rt-shell
	$(BIN)/python -m pytest -q -m "not bmv2 and not p4c and not root and not mininet and not slow"

test-all: setup
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check p4cc tests
	$(BIN)/mypy p4cc
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(P4RT_SHELL_VENV) .pytest_cache .mypy_cache .ruff_cache
