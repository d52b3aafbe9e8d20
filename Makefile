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

.PHONY: all verilog test regress formal mutate lint synth fpga bench report simulators clean distclean

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

regress: $(VENV)/.installed-dask simulators
	$(PY) -m pytest -n $(JOBS) --dist loadgroup --regress verif

# Every formal proof (build/formal/<proof>/, report build/formal/report.json), then the check that each fails
# on its deliberately broken designs. make formal ARGS="td_scheduler" runs one block's.
formal: $(VENV)/.installed-test $(VENV)/.installed-fpga
	$(TRAINFORGE) formal $(ARGS)
	$(PY) -m pytest -n 0 verif/test_formal.py

# Mutation score of the blocks' cocotb testbenches (Yosys mutants of the emitted Verilog, run on Icarus):
# build/reports/mutation.json and mutation.md. Not part of make test.
# make mutate ARGS="nt_mac --count 40 --jobs 2" mutates other blocks.
MUTATE_ARGS ?= stream_stage td_scheduler nt_pmag --count 10
mutate: $(VENV)/.installed-test $(VENV)/.installed-fpga simulators
	$(TRAINFORGE) mutate $(if $(ARGS),$(ARGS),$(MUTATE_ARGS))

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
