# ibsec-fabric: `make` alone prints the targets. Everything installs what it needs (scripts/setup.sh).
VENV    ?= .venv
PY      := $(VENV)/bin/python
TARGET  ?= p4switch
PYTEST_ARGS ?=
# benchmark modules, each runnable as `python -m MODULE`; every part adds its own
BENCHES ?= p4switch.tests.bench p4switch.tests.runtime.bench p4switch.tests.frontend.bench labs.transport_bench labs.skc_bench labs.sm_bench evaluation.key_bench labs.agent_bench

.PHONY: help setup lint test bench demo eval fuzz scale wireshark clean conformance conformance-docs \
	conformance-bmv2 conformance-bmv2-docs

help: ## print this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

setup: ## install system packages (apt-get) and the Python venv (idempotent)
	@bash scripts/setup.sh

lint: setup ## ruff and mypy over the project's Python
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy p4switch scapy-tools/ibsec controller/ibsm ptf-tests topologies labs evaluation tests

test: setup lint build ## run the whole test suite (what CI runs)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup bench-dataplane ## benchmarks: print numbers and ratios
	@for m in $(BENCHES); do echo "== $$m"; $(PY) -m $$m || exit 1; done

EVAL_PROFILE ?= full
eval: setup build ## reproduce the papers' results (EVAL_PROFILE=quick|full): CSVs, plots, docs/EVALUATION.md
	$(PY) -m evaluation --profile $(EVAL_PROFILE)

FUZZ_TARGETS ?= agent sm
FUZZ_FRAMES ?= 100000
fuzz: setup ## hostile-input suite: FUZZ_FRAMES mutated frames at each live component of FUZZ_TARGETS (root)
	@for t in $(FUZZ_TARGETS); do $(PY) -m ibsec.fuzz $$t --frames $(FUZZ_FRAMES) || exit 1; done

SCALE_ARGS ?=
scale: setup build ## torus and fat-tree fabrics of growing size: start, ready, keys, trace, memory, CPU, teardown
	$(PY) -m evaluation.scale $(SCALE_ARGS)

DEMO_ARGS ?=
demo: setup build ## the main job: fat tree, spoofed flood, traceback, SIF filter and flush; one JSON line last
	$(PY) -m topologies.demo --target $(TARGET) $(DEMO_ARGS)

wireshark: setup ## install our Wireshark dissector (ibsec.lua) into your personal Lua plugin folder
	$(PY) -m ibsec.wireshark install

# p4c's own v1model test corpus (testdata/p4_16_samples) through p4switch: compile, STF cases, P4Info
P4C_SAMPLES ?= ../shared/p4lang/p4_16_samples
CONFORMANCE_ARGS ?=
conformance: setup ## p4c's test corpus through p4switch (P4C_SAMPLES=DIR): summary, build/conformance/report.*
	$(PY) -m p4switch.conformance $(P4C_SAMPLES) --report $(BUILD)/conformance --baseline docs/conformance.json $(CONFORMANCE_ARGS)

conformance-docs: setup ## regenerate docs/conformance.md and its baseline docs/conformance.json from P4C_SAMPLES
	$(PY) -m p4switch.conformance $(P4C_SAMPLES) --report $(BUILD)/conformance --docs docs/conformance.md --write-baseline docs/conformance.json $(CONFORMANCE_ARGS)

# the corpus the other way: the real p4c-bm2-ss compiles each program, p4switch runs its BMv2 JSON
P4C_BM2_SS ?= $(firstword $(shell command -v p4c-bm2-ss) $(wildcard ../shared/p4lang/bin/p4c-bm2-ss))
conformance-bmv2: setup ## p4c-bm2-ss's BMv2 JSON of P4C_SAMPLES through p4switch: build/conformance-bmv2/report.*
	$(PY) -m p4switch.conformance $(P4C_SAMPLES) --bmv2-json --p4c $(P4C_BM2_SS) --timeout 900 --report $(BUILD)/conformance-bmv2 --baseline docs/conformance-bmv2.json $(CONFORMANCE_ARGS)

conformance-bmv2-docs: setup ## regenerate the BMv2 JSON section of docs/conformance.md and docs/conformance-bmv2.json
	$(PY) -m p4switch.conformance $(P4C_SAMPLES) --bmv2-json --p4c $(P4C_BM2_SS) --timeout 900 --report $(BUILD)/conformance-bmv2 --docs docs/conformance.md --write-baseline docs/conformance-bmv2.json $(CONFORMANCE_ARGS)

# ---- data plane: p4src/ and ptf-tests/ ----------------------------------------------------------------
P4_SOURCES := $(wildcard p4src/*.p4 p4src/include/*.p4)
BUILD ?= build
P4SWITCH_CC := $(VENV)/bin/p4switch-cc
ifeq ($(TARGET),bmv2)
P4C := p4c-bm2-ss --arch v1model
else ifeq ($(TARGET),p4switch-bmv2json)
P4C := $(P4C_BM2_SS) --arch v1model
else
P4C := $(P4SWITCH_CC)
endif

.PHONY: build p4info ptf bench-dataplane

build: $(BUILD)/main.json ## compile p4src/main.p4 for $(TARGET) into build/main.json and build/main.p4info.txtpb

$(BUILD)/%.json $(BUILD)/%.p4info.txtpb: p4src/%.p4 $(P4_SOURCES) $(BUILD)/.target-$(TARGET)
	$(P4C) $< -o $(BUILD)/$*.json --p4runtime-files $(BUILD)/$*.p4info.txtpb

$(BUILD)/.target-$(TARGET):
	@mkdir -p $(BUILD) && rm -f $(BUILD)/.target-* && touch $@

p4info: ## regenerate the committed P4Info (p4src/main.p4info.txtpb) with p4switch-cc
	@mkdir -p $(BUILD)
	$(P4SWITCH_CC) p4src/main.p4 -o $(BUILD)/p4info-main.json --p4runtime-files p4src/main.p4info.txtpb

ptf: setup ## PTF data-plane tests against $(TARGET) on veths (root; PTF_TESTS=... selects tests)
	$(PY) -m pytest ptf-tests/test_ptf.py -s $(PYTEST_ARGS)

bench-dataplane: setup ## packets/s through one switch under each partition filter policy
	$(PY) ptf-tests/bench_policies.py

clean: ## remove build outputs and the venv
	rm -rf build $(VENV) .mypy_cache .ruff_cache .pytest_cache
