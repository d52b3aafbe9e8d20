# trainforge: `make verilog` emits every registered block, `make test` verifies them.
# Each target installs what it needs (a project virtualenv; the simulators for tests).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
TRAINFORGE := $(VENV)/bin/trainforge
# Extra arguments for the tool targets, e.g. make fpga ARGS="dense_pe --param lanes=8"
ARGS   ?=
# pytest workers (xdist); 'auto' is one per core.
JOBS   ?= auto

.PHONY: all verilog test regress formal mutate coverage lcov lint synth fpga bench report simulators clean distclean

all: verilog

$(VENV)/.installed: pyproject.toml setup.py
	@$(PYTHON) -m venv $(VENV) || { echo "cannot create a virtualenv with $(PYTHON) -m venv: install Python 3.10+ with the venv module (Debian: apt-get install python3-venv)"; exit 2; }
	$(VENV)/bin/pip install --quiet --upgrade pip setuptools
	$(VENV)/bin/pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(VENV)/bin/pip install --quiet -e '.[test]'
	@touch $@

$(VENV)/.installed-fpga: $(VENV)/.installed
	$(VENV)/bin/pip install --quiet -e '.[fpga]'
	@touch $@

# The suite also checks that DeepSpatialMatrix sweeps give the same results on a local Dask cluster.
$(VENV)/.installed-dask: $(VENV)/.installed-test
	$(VENV)/bin/pip install --quiet -e '.[dask]'
	@touch $@

simulators:
	@sh verif/ensure_simulators.sh

verilog: $(VENV)/.installed
	$(TRAINFORGE) verilog $(ARGS)

# The fpga extra brings the YoWASP tools of the fast formal proofs (verif/test_formal.py).
test: $(VENV)/.installed-dask $(VENV)/.installed-fpga simulators
	$(PY) -m pytest -n $(JOBS) --dist loadgroup verif

# make regress TRANSACTIONS=1000000: the long sweeps, and the random regression of every block with a
# random_regression test, TRANSACTIONS checked stream transactions per block and simulator (default 2000).
# REGRESS_PATH=auto (default) plays the blocks that have one on the fast path (a self-checking Verilog
# testbench, payloads and order, shards planned from measured CPU rates by verif/regression_plan.py) and the
# rest under cocotb; cocotb or fast forces one path. The fpga extra brings the Yosys that prepares td_tile's
# faster form for Icarus.
# Its table (transactions and mismatches per block and path) is printed at the end, in build/reports/regress/.
TRANSACTIONS ?= 2000
REGRESS_PATH ?= auto
regress: $(VENV)/.installed-dask $(VENV)/.installed-fpga simulators
	$(PY) -m pytest -n $(JOBS) --dist loadgroup --regress --transactions $(TRANSACTIONS) --regress-path $(REGRESS_PATH) verif

# Every formal proof (build/formal/<proof>/, report build/formal/report.json), then the check that each fails
# on its deliberately broken designs. make formal ARGS="td_scheduler" runs one block's.
formal: $(VENV)/.installed-test $(VENV)/.installed-fpga
	$(TRAINFORGE) formal $(ARGS)
	TRAINFORGE_FORMAL_SLOW=1 $(PY) -m pytest -n 0 verif/test_formal.py

# Mutation score of the blocks' cocotb testbenches (Yosys mutants of the emitted Verilog, run on Icarus):
# build/reports/mutation.json and mutation.md, rewritten after each block. Not part of make test.
# The default: every block measured in the README's table (README, "Mutation score"), 20 mutants each, seed 1,
# about 85 minutes on the loaded 2-core machine (51 before td_pe, nt_pe and td_tile; cp_core and cp_ring add about 4
# and 9). --subset runs a block's declared
# mutation subset first (td_pe, nt_pe; the others have none and run their whole testbench).
# A survivor the tool's equivalence checks (--equivalence-timeout, 30 s each) leave unproven gets one more proof:
# the one its block declares for it (Block.mutation_proofs: a Yosys script in hw/<family>/proofs/ or a
# trainforge.mutant_miter proof, run only on the mutant whose Verilog SHA-256 it names), else the plain miter proof
# of the mutated module, within --proof-timeout seconds (default 1200; ARGS="... --proof-timeout 600" to shorten).
# Measured 2026-11-29 (README): the proofs add about 9 s to cp_reciprocal, 2 min to cp_core, 2 to 3.5 min to nt_pe
# and 3.5 min to cp_ring (its survivor 7's plain miter proof, 2 min, differs); the other blocks' survivors' plain
# miter proofs differ in 2 to 28 s each.
# nt_system (last) takes the longest: its whole testbench is about 3 minutes a mutant, its declared proofs 3 to 4
# minutes each. The whole list with ARGS="... --jobs 2" took 60 minutes on the idle 2 cores (2026-11-29, nt_system
# 35 of them; README, "The whole make mutate in one run").
# make mutate ARGS="nt_mac --count 40 --jobs 2" mutates other blocks.
MUTATE_BLOCKS ?= stream_stage td_scheduler nt_pmag nt_vault nt_lut nt_comparator fp_mul fp32_add td_transposer \
                 dense_pe cp_reciprocal nt_bus nt_sequencer cp_pe nt_mac td_pe nt_pe td_tile cp_core cp_ring nt_system
MUTATE_ARGS ?= $(MUTATE_BLOCKS) --count 20 --seed 1 --subset
mutate: $(VENV)/.installed-test $(VENV)/.installed-fpga simulators
	$(TRAINFORGE) mutate $(if $(ARGS),$(ARGS),$(MUTATE_ARGS))

# Debian's lcov gives genhtml (the coverage HTML); installed like the simulators when missing.
lcov:
	@command -v genhtml >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing lcov with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lcov >/dev/null && exit 0; \
	fi; \
	echo "make coverage needs genhtml (Debian's lcov) and cannot install it here (needs root and apt-get): install the Debian package lcov and run again." >&2; \
	exit 2

# Verilator line and toggle coverage of every block over make test's Verilator runs (test_rtl.py), built in
# build/sim/*-verilator-coverage (the cached normal builds stay), each run's coverage.dat kept under
# build/coverage/runs/, then merged per block: build/reports/coverage/<block>/ (lcov info, HTML),
# summary.json and coverage.md (in make report). Not part of make test. The merge runs even when a test
# failed; the target then fails. make coverage COVERAGE_K="stream_stage and verilator" runs one block's.
COVERAGE_K ?= verilator
coverage: $(VENV)/.installed-test simulators lcov
	rm -rf build/coverage/runs
	TRAINFORGE_COVERAGE=1 $(PY) -m pytest -n $(JOBS) --dist loadgroup --coverage-rtl verif/test_rtl.py -k "$(COVERAGE_K)"; \
	status=$$?; $(TRAINFORGE) coverage && exit $$status

synth: $(VENV)/.installed-fpga
	$(TRAINFORGE) synth $(ARGS)

fpga: $(VENV)/.installed-fpga
	$(TRAINFORGE) fpga $(ARGS)

bench: $(VENV)/.installed
	$(TRAINFORGE) bench $(ARGS)

report: $(VENV)/.installed-test
	$(TRAINFORGE) report

clean:
	rm -rf build

distclean: clean
	rm -rf $(VENV) *.egg-info
