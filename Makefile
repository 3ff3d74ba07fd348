# priorlab: `make repro` runs the pipeline, `make test` the test suite (each sets up .venv first).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= cpu
export DVC_NO_ANALYTICS := 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: venv datasets demo repro diagnose benchmark benchmark-speed shard collect slurm cluster-tools test test-fast profile bench bench-pipeline gpu-deps clean-checkpoints browser plots
REV ?= HEAD

$(BIN)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . || $(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

venv: $(BIN)/.installed

DATASETS_OK := .datasets/.installed
INSTALL_DATASETS = PYTHON=$(abspath $(BIN)/python) bash scripts/install_datasets.sh && mkdir -p $(dir $(DATASETS_OK)) && touch $(DATASETS_OK)

datasets: venv         ## install the real data sets offline (Fashion-MNIST, MNIST); idempotent
	$(INSTALL_DATASETS)

$(DATASETS_OK): scripts/install_datasets.sh | venv  # repro's prerequisite: checked once, then by `make datasets`
	$(INSTALL_DATASETS)

JOBS ?= 2
GPUS ?=
TARGETS ?= report
repro: venv $(DATASETS_OK)   ## every paper's claims and report on the profile in params.yaml (default: cpu), JOBS stages side by side [GPUS=0,1,..: one per worker; TARGETS=..: other stages]
	$(BIN)/python -m priorlab.config check --once
	$(BIN)/python -m stagerun.repro -j $(JOBS) $(if $(GPUS),--gpus $(GPUS)) $(TARGETS)

diagnose: venv $(DATASETS_OK)  ## after (or instead of) `make repro`: the diagnosis arms and reports/diagnosis/ (why the failing claims fail)
	$(BIN)/python -m priorlab.config check --once
	$(BIN)/python -m stagerun.repro -j $(JOBS) $(if $(GPUS),--gpus $(GPUS)) diagnosis

benchmark: venv $(DATASETS_OK)  ## the cross-prior benchmark (reports/benchmark/): every prior on the same data, nets and seeds
	$(BIN)/python -m priorlab.config check --once
	$(BIN)/python -m stagerun.repro -j $(JOBS) $(if $(GPUS),--gpus $(GPUS)) benchmark

benchmark-speed: venv $(DATASETS_OK)  ## the benchmark's training cost per prior on this machine -> reports/benchmark_speed/<profile>.json
	$(BIN)/python -m benchmarks.benchmark_speed

DEMO ?= .demo
DEMO_TARGETS ?=
demo: venv $(DATASETS_OK)  ## a first look: the tiny profile in a throw-away git worktree ($(DEMO)/) of HEAD; this checkout's results stay as they are
	rm -rf $(DEMO) && git worktree prune
	git worktree add --detach --quiet $(DEMO) HEAD
	ln -s $(abspath .datasets) $(DEMO)/.datasets
	cd $(DEMO) && PYTHONPATH=$(abspath $(DEMO))/src $(abspath $(BIN))/python -m priorlab.config use tiny
	cd $(DEMO) && PYTHONPATH=$(abspath $(DEMO))/src $(abspath $(BIN))/python -m stagerun.repro -j $(JOBS) $(DEMO_TARGETS)
	@echo "demo: the tiny profile's results are in $(DEMO)/reports/ (README.md); remove them with: git worktree remove --force $(DEMO)"

SHARD ?=
shard: venv datasets   ## make shard SHARD=i/n [JOBS=..] [GPUS=..]: this machine's share of the runs, pushed to the default DVC remote
	$(BIN)/python -m priorlab.config check
	$(BIN)/python -m stagerun.shard run --shard "$(SHARD)" --push -j $(JOBS) $(if $(GPUS),--gpus $(GPUS))

collect: venv datasets ## after the shards: restore every pushed run from the remote, run what is left and the report
	$(BIN)/python -m priorlab.config check
	$(BIN)/python -m stagerun.shard collect -j $(JOBS) $(if $(GPUS),--gpus $(GPUS))

SHARDS ?=
GPUS_PER_TASK ?= 0
SBATCH ?=
slurm: venv datasets   ## make slurm SHARDS=n [GPUS_PER_TASK=..] [SBATCH='--partition=.. --time=..']: the shards of HEAD as a Slurm array, then collect
	$(BIN)/python -m priorlab.config check
	$(BIN)/python -m stagerun.slurm submit --shards "$(SHARDS)" -j $(JOBS) --gpus-per-task $(GPUS_PER_TASK) $(if $(SBATCH),--sbatch-arg="$(SBATCH)")

TEST_WORKERS ?= 2
test: venv datasets browser cluster-tools  ## the whole test suite, slow checks included, on TEST_WORKERS processes (0: one)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25  # the 25 slowest: where CI's time goes

test-fast: venv        ## skip the slow statistical and end-to-end checks
	$(BIN)/python -m pytest -q -m "not slow"

SET ?=
profile: venv          ## make profile PROFILE=tiny|cpu|paper [SET='key.path=value ...']: profiles/$(PROFILE).yaml (with SET) to params.yaml + params/*.json
	$(BIN)/python -m priorlab.config use $(PROFILE) $(foreach s,$(SET),--set '$(s)')

bench: venv            ## training-step time ratios and the tiny pipeline's wall time -> reports/bench.json
	$(BIN)/python -m benchmarks.bench

bench-pipeline: venv datasets  ## a full `make repro` of PROFILE (default cpu) in a clean copy: wall by stage kind, fixed cost, peak RSS, no-op -> reports/bench.json
	$(BIN)/python -m benchmarks.bench_pipeline --profile $(PROFILE) --jobs $(JOBS)

gpu-deps:              ## .gpu_deps/: PyYAML and tqdm wheels unpacked, for benchmarks/gpu_bench.py on a machine with torch only
	rm -rf .gpu_deps && mkdir -p .gpu_deps/wheels
	$(BIN)/python -m pip download --quiet --no-deps pyyaml==6.0.3 tqdm==4.67.1 -d .gpu_deps/wheels
	for w in .gpu_deps/wheels/*.whl; do $(BIN)/python -m zipfile -e $$w .gpu_deps; done

cluster-tools:         ## single-node Slurm, munge and sshd (Debian) for tests/test_slurm.py, installed only if absent
	@command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 && command -v sshd >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge openssh-server iproute2 >/dev/null; } || \
	  echo "note: Slurm/sshd not installed (needs root and apt-get): tests/test_slurm.py's cluster test skips"

browser:               ## headless Chromium for the offline-plots test (Debian `chromium`), installed only if absent
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } || \
	  echo "note: chromium not installed (needs root and apt-get): tests/test_offline_plots.py's browser test skips"

plots: venv            ## make plots [REV=HEAD~1]: dvc plots diff $(REV) -> dvc_plots/index.html (offline page)
	$(BIN)/dvc plots diff $(REV) -o dvc_plots

clean-checkpoints:     ## drop resumable state of interrupted stages
	rm -rf .checkpoints
