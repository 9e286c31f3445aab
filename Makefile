# Two commands do all set-up: `make train` and `make test` create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# A CPU build of torch installed first satisfies the package's range without a multi-GB CUDA download.
TORCH  ?= torch==2.13.0
ARGS   ?=
NPROC  ?= 1
RUN    ?= runs/multi30k.de-en/smoke
SPLIT  ?=
DIRECTION ?=
DATA   ?= data/multi30k
BEAM   ?=
ALPHAS ?=
CHOOSE_ON ?= valid
SEEDS  ?= 3
JOBS   ?= $(SEEDS)
comma  := ,
SEED_LIST = $(shell seq -s, 1 $(SEEDS))
# make test: one pytest worker per core, at most 4 (each trains its own session fixtures); TESTS_PARALLEL= for one
TESTS_PARALLEL ?= -n auto --maxprocesses 4

.PHONY: help venv train ensemble tokenizer test test-browser browser lint format eval serve bench bench-precision \
	bench-scale bench-serve tensorboard clean

help:
	@echo "make train ARGS='<hydra overrides>'   train (creates .venv first if needed); NPROC=N for N processes"
	@echo "                                     (no experiment=: multi30k_base on a GPU, multi30k_cpu without;"
	@echo "                                     multi30k_cpu_fp32 on a CPU without native bf16)"
	@echo "make test                            lint + tests"
	@echo "make test-browser                    the web page of mt-serve in headless Chromium (installs it if missing)"
	@echo "make ensemble SEEDS=3 RUN=runs/x ARGS='...' SPLIT=test2016 [JOBS=3]"
	@echo "                                     train SEEDS runs side by side (RUN/train.seed=K), their mean ± sd, then their ensemble"
	@echo "                                     (ALPHAS='0.6 1.0 1.2': its length penalty chosen on valid first)"
	@echo "make tokenizer ARGS='...'            only the tokenizer step of a run, then what its corpora hold"
	@echo "make eval RUN=runs/multi30k.de-en/smoke [SPLIT=valid] [DIRECTION=fr-en]"
	@echo "                                     BLEU/chrF of a run's final model (default: its test split;"
	@echo "                                     DIRECTION: one of a model of several languages, else each)"
	@echo "make serve RUN=runs/multi30k.de-en/smoke [ARGS='--port 8000 ...']"
	@echo "                                     serve a run's final model over HTTP, with a web page at /"
	@echo "make bench [RUN=runs/multi30k.de-en/smoke]"
	@echo "                                     training and decoding speed figures"
	@echo "make bench-precision [STEPS=60]       bf16 vs fp32 trainer throughput, interleaved in one process"
	@echo "make bench-scale [PAIRS='100000 1000000'] [ARGS='--tsv|--tmx --gzip']"
	@echo "                                     seconds per preparation stage and peak memory by corpus size"
	@echo "make bench-serve RUN=... [ARGS='--seconds 60 --clients 1 8 32']"
	@echo "                                     mt-serve under load against translate's throughput"
	@echo "make tensorboard                     curves of every run under runs/"

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { \
		echo "error: $(PYTHON) is not Python 3.10 or newer ($$($(PYTHON) -V 2>&1 | head -1)): name one, e.g. make venv PYTHON=python3.12" >&2; \
		exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)" || echo "note: $(TORCH) not available; pip will pick a torch from pyproject's range"
	$(BIN)/python -m pip install -q -e ".[dev,export,serve]"
	@touch $(STAMP)

train: $(STAMP)
ifeq ($(NPROC),1)
	$(BIN)/mt-train $(ARGS)
else
	$(BIN)/python -m torch.distributed.run --standalone --nproc_per_node $(NPROC) -m mt.cli.train $(ARGS)
endif

# SEEDS runs of one config side by side, a sweep over train.seed in the folder RUN (mt-train -m --jobs: each
# run with a GPU, or cores, of its own; JOBS at a time), its table with their mean ± sd, then their ensemble's
# score; each member is its run's model (final.pt, else best.pt).
# ALPHAS: the ensemble's length penalty is chosen among them on CHOOSE_ON (valid), then SPLIT scored once.
ensemble: $(STAMP)
	$(BIN)/mt-train -m --jobs $(JOBS) $(ARGS) train.seed=$(SEED_LIST) hydra.sweep.dir=$(RUN)
	@members="$(foreach seed,$(subst $(comma), ,$(SEED_LIST)),$(RUN)/train.seed=$(seed))"; \
	echo "ensemble of $$members"; \
	$(BIN)/mt-evaluate --ensemble --checkpoint $$members $(if $(SPLIT),--split $(SPLIT),) $(if $(BEAM),--beam $(BEAM),) \
		$(if $(ALPHAS),--alpha $(ALPHAS) --choose-on $(CHOOSE_ON),)

tokenizer: $(STAMP)
	$(BIN)/mt-tokenizer $(ARGS)

test: $(STAMP) lint
	$(BIN)/python -m pytest $(TESTS_PARALLEL) $(ARGS)

# Debian's Chromium and its WebDriver, for the browser test (as root, or through sudo).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
BROWSER_PACKAGES := chromium chromium-driver

test-browser: $(STAMP)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || $(MAKE) --no-print-directory browser
	MT_BROWSER_TEST=1 $(BIN)/python -m pytest tests/test_serve_browser.py $(ARGS)

browser:
	$(SUDO) apt-get install -y -q $(BROWSER_PACKAGES) || \
		($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q $(BROWSER_PACKAGES))

lint: $(STAMP)
	$(BIN)/ruff check mt tests scripts
	$(BIN)/ruff format --check mt tests scripts

format: $(STAMP)
	$(BIN)/ruff check --fix mt tests scripts
	$(BIN)/ruff format mt tests scripts

# RUN, a run directory, stands for its model: checkpoints/final.pt, else (a run not ended yet) best.pt.
eval: $(STAMP)
	$(BIN)/mt-evaluate --checkpoint $(RUN) $(if $(SPLIT),--split $(SPLIT),) $(if $(BEAM),--beam $(BEAM),) \
	  $(if $(DIRECTION),--direction $(DIRECTION),)

serve: $(STAMP)
	$(BIN)/mt-serve --checkpoint $(RUN) $(ARGS)

bench: $(STAMP)
	$(BIN)/python scripts/bench.py --checkpoint $(RUN) --data $(DATA) $(ARGS)

STEPS ?= 60
bench-precision: $(STAMP)
	$(BIN)/python scripts/bench_precision.py --steps $(STEPS) experiment=smoke data=files data.dir=$(DATA) \
		data.test_split=null $(ARGS)

PAIRS ?= 100000 1000000
bench-scale: $(STAMP)
	$(BIN)/python scripts/bench_scale.py --pairs $(PAIRS) $(ARGS)

bench-serve: $(STAMP)
	$(BIN)/python scripts/bench_serve.py --checkpoint $(RUN) $(ARGS)

tensorboard: $(STAMP)
	$(BIN)/tensorboard --logdir runs

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
