# ibsec-fabric: `make` alone prints the targets. Everything installs what it needs (scripts/setup.sh).
VENV    ?= .venv
PY      := $(VENV)/bin/python
TARGET  ?= p4switch
PYTEST_ARGS ?=
# benchmark modules, each runnable as `python -m MODULE`; every part adds its own
BENCHES ?=

.PHONY: help setup lint test bench demo clean

help: ## print this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

setup: ## install system packages (apt-get) and the Python venv (idempotent)
	@bash scripts/setup.sh

lint: setup ## ruff and mypy over the project's Python
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy p4switch scapy-tools/ibsec

test: setup lint ## run the whole test suite (what CI runs)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup ## benchmarks: print numbers and ratios
	@for m in $(BENCHES); do echo "== $$m"; $(PY) -m $$m || exit 1; done

demo: setup ## the main job: fat tree, attack, traceback and filtering results
	@echo "make demo: the end-to-end fabric is not built yet (issue 7)"; exit 1

clean: ## remove build outputs and the venv
	rm -rf build $(VENV) .mypy_cache .ruff_cache .pytest_cache
