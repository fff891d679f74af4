#!/usr/bin/env bash
# Generate self-play games with an SGLang server, convert them to verl parquet, and (optionally) evaluate the
# served model on held-out and human instances with the same server.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: run_selfplay_generation.sh [--dry-run] [--help]

Starts an SGLang server for MODEL_NAME (or uses SGLANG_URL), plays NUM_GAMES self-play games of
GAME (against PARTNER_MODEL in seat 1 when set) into OUT_DIR/games.jsonl (resumable) and converts
them into OUT_DIR/*.parquet. The servers are stopped on every exit path. With EVAL_DIR set, the
served model is also evaluated (selfplay-gen eval) on EVAL_INSTANCES held-out instances x
EVAL_GAMES_PER_INSTANCE games (EVAL_DIR/heldout) and, for the matching game, on the 134 human
instances (EVAL_DIR/human); with CROSSPLAY_DIR set, it plays PARTNER_MODEL on the held-out
instances (CROSSPLAY_DIR). NUM_GAMES=0 evaluates only. --dry-run prints the commands instead of
running them.

Environment (default):
  MODEL_NAME          model directory to serve and tokenize with (required unless SGLANG_URL is set)
  SGLANG_URL          use these running servers (space-separated, e.g. one per node: every turn of a game goes
                      to the same one) or a router, instead of starting one
  GAME                the game to play (matching; negotiation)
  REWARD_MODE         the game's reward mode (negotiation: cooperative | semi-competitive | competitive;
                      unset: the game's default)
  NUM_GAMES           games to play (256)
  GAMES_PER_INSTANCE  games per instance = GRPO group size (8)
  SEED                seed of the first instance (0); instances are SEED, SEED+1, ...
  TEMPERATURE         sampling temperature (1.0), also for evaluation
  MAX_MOVES           valid moves per game (30)
  MAX_NEW_TOKENS      new tokens per turn (512)
  MAX_RESPONSE_TOKENS tokens a seat's context may grow past its first prompt; set it to the training
                      data.max_response_length so that longer games score 0 (unset: no limit)
  OUT_DIR             output directory (data/selfplay)
  PORT                server port (30000)
  TP                  tensor-parallel size per server (1)
  DP                  data-parallel servers behind sglang_router when > 1 (1)
  SGLANG_PYTHON       python with sglang (python3)
  CUDA_GRAPHS         1: SGLang's CUDA graphs (its default) | 0: off (1)
  EXTRA_SGLANG_ARGS   server arguments (SGLang's defaults, with a fallback only for a kernel or backend the
                      install lacks, each said on stderr: python -m selfplay_gen.serving sglang-args)
  SERVER_TIMEOUT      seconds to wait for /health (900)
  SERVER_START_TRIES  starts of a server that stopped on "Not enough memory" (a GPU shared with a process
                      that allocated while it started), SERVER_RETRY_WAIT seconds apart (3, 30)
  SELFPLAY_PYTHON     python with selfplay_gen importable (python3)
  SELFPLAY_GEN        generation command (selfplay-gen if on PATH, else $SELFPLAY_PYTHON -m selfplay_gen.cli)
  SELFPLAY_CONVERT    conversion command (selfplay-convert if on PATH, else $SELFPLAY_PYTHON -m convert.cli)
  GEN_ARGS            extra arguments for the generation command ("")
  CONVERT_ARGS        extra arguments for the conversion command, e.g. "--max-response-tokens 4096" ("")
  EVAL_DIR            evaluate the served model into EVAL_DIR/heldout and (matching) EVAL_DIR/human (unset: no
                      evaluation)
  EVAL_LABEL          the model's label in the reports (the model directory's name)
  EVAL_APPEND_TO      run-level reports: EVAL_APPEND_TO/heldout and EVAL_APPEND_TO/human get this model as
                      their next row (or replace the row with its label)
  EVAL_INSTANCES      held-out instances (64); their seeds start at 10**9, apart from training seeds
  EVAL_GAMES_PER_INSTANCE  games per held-out instance (8); human instances get 2 each
  PARTNER_MODEL       a second model for seat 1 of the training games (an opponent, e.g. an earlier
                      checkpoint), served by a second server on PARTNER_PORT (PORT + 1); the evaluation
                      stays self-play of MODEL_NAME (unset: self-play). Each of the two servers then
                      takes PARTNER_MEM_FRACTION (0.4) of the GPU memory (--mem-fraction-static)
  CROSSPLAY_DIR       cross-play of MODEL_NAME (EVAL_LABEL) and PARTNER_MODEL (PARTNER_LABEL: its directory's
                      name) on the held-out instances, both seat orders, and each one's self-play (selfplay-gen
                      eval --partner-*), into CROSSPLAY_DIR (unset: none)
EOF
}

DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done

MODEL_NAME=${MODEL_NAME:-}
SGLANG_URL=${SGLANG_URL:-}
NUM_GAMES=${NUM_GAMES:-256}
SEED=${SEED:-0}
GAMES_PER_INSTANCE=${GAMES_PER_INSTANCE:-8}
TEMPERATURE=${TEMPERATURE:-1.0}
MAX_MOVES=${MAX_MOVES:-30}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-512}
MAX_RESPONSE_TOKENS=${MAX_RESPONSE_TOKENS:-}
EVAL_DIR=${EVAL_DIR:-}
EVAL_LABEL=${EVAL_LABEL:-$(basename "${MODEL_NAME:-model}")}
EVAL_APPEND_TO=${EVAL_APPEND_TO:-}
EVAL_INSTANCES=${EVAL_INSTANCES:-64}
EVAL_GAMES_PER_INSTANCE=${EVAL_GAMES_PER_INSTANCE:-8}
GAME=${GAME:-matching}
REWARD_MODE=${REWARD_MODE:-}
CROSSPLAY_DIR=${CROSSPLAY_DIR:-}
OUT_DIR=${OUT_DIR:-data/selfplay}
PORT=${PORT:-30000}
PARTNER_MODEL=${PARTNER_MODEL:-}
PARTNER_PORT=${PARTNER_PORT:-$((PORT + 1))}
PARTNER_MEM_FRACTION=${PARTNER_MEM_FRACTION:-0.4}
PARTNER_LABEL=${PARTNER_LABEL:-$(basename "${PARTNER_MODEL:-partner}")}
TP=${TP:-1}
DP=${DP:-1}
SGLANG_PYTHON=${SGLANG_PYTHON:-python3}
CUDA_GRAPHS=${CUDA_GRAPHS:-1}
graphs=--cuda-graphs
[[ $CUDA_GRAPHS == 1 ]] || graphs=--no-cuda-graphs
if [[ -z ${EXTRA_SGLANG_ARGS+set} ]]; then
  EXTRA_SGLANG_ARGS=$(PYTHONPATH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH} \
    "${SELFPLAY_PYTHON:-python3}" -m selfplay_gen.serving sglang-args --python "$SGLANG_PYTHON" "$graphs")
fi
SERVER_TIMEOUT=${SERVER_TIMEOUT:-900}
SERVER_START_TRIES=${SERVER_START_TRIES:-3}
SERVER_RETRY_WAIT=${SERVER_RETRY_WAIT:-30}
SELFPLAY_PYTHON=${SELFPLAY_PYTHON:-python3}
GEN_ARGS=${GEN_ARGS:-}
CONVERT_ARGS=${CONVERT_ARGS:-}
if [[ -z ${SELFPLAY_GEN:-} ]]; then
  if command -v selfplay-gen > /dev/null; then SELFPLAY_GEN=selfplay-gen; else SELFPLAY_GEN="$SELFPLAY_PYTHON -m selfplay_gen.cli"; fi
fi
if [[ -z ${SELFPLAY_CONVERT:-} ]]; then
  if command -v selfplay-convert > /dev/null; then SELFPLAY_CONVERT=selfplay-convert; else SELFPLAY_CONVERT="$SELFPLAY_PYTHON -m convert.cli"; fi
fi

STEP=setup
fail() { echo "run_selfplay_generation.sh: step '$STEP' failed (exit $1)" >&2; }

# run STEP COMMAND...: print the command; run it unless --dry-run.
run() {
  STEP=$1; shift
  printf '+'; printf ' %q' "$@"; printf '\n'
  [[ $DRY_RUN -eq 1 ]] || "$@"
}

SERVER_PIDS=()
stop_servers() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do
    if kill -0 "$pid" 2> /dev/null; then
      echo "stopping the SGLang server (pid $pid)" >&2
      kill -- "-$pid" 2> /dev/null || kill "$pid" 2> /dev/null || true
      wait "$pid" 2> /dev/null || true
    fi
  done
}
on_exit() {
  local rc=$?
  stop_servers
  if ((rc != 0)); then fail "$rc"; fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# start_server MODEL PORT LOG: start an SGLang server (behind sglang_router when DP > 1) for MODEL on
# PORT, logging to LOG, and wait for its /health.
start_server() {
  local model=$1 port=$2 log=$3 url=http://127.0.0.1:$2 try deadline pid=
  local -a extra server
  read -r -a extra <<< "$EXTRA_SGLANG_ARGS"
  if [[ $DP -gt 1 ]]; then
    server=("$SGLANG_PYTHON" -m sglang_router.launch_server --model-path "$model" --host 127.0.0.1
            --port "$port" --tp "$TP" --dp-size "$DP" "${extra[@]}")
  else
    server=("$SGLANG_PYTHON" -m sglang.launch_server --model-path "$model" --host 127.0.0.1
            --port "$port" --tp "$TP" "${extra[@]}")
  fi
  # SGLang sizes its KV cache from the memory that was free before it loaded the model; when another
  # process on the GPU allocates meanwhile (a second run's server or trainer starting), it stops with
  # "Not enough memory". That start is tried again, after the other process has settled.
  for ((try = 1; ; try++)); do
    STEP=start-server
    printf '+ %s > %s 2>&1 &\n' "${server[*]}" "$log"
    if [[ $DRY_RUN -eq 0 ]]; then
      set -m                                  # the server gets its own process group: one kill stops it all
      "${server[@]}" > "$log" 2>&1 &
      pid=$!
      SERVER_PIDS+=("$pid")
      set +m
    fi
    STEP=wait-for-health
    echo "+ wait for $url/health (up to ${SERVER_TIMEOUT}s)"
    [[ $DRY_RUN -eq 0 ]] || return 0
    deadline=$((SECONDS + SERVER_TIMEOUT))
    until curl -sf "$url/health" > /dev/null; do
      kill -0 "$pid" 2> /dev/null || break
      ((SECONDS < deadline)) || { echo "no /health from $url after ${SERVER_TIMEOUT}s; see $log" >&2; exit 1; }
      sleep 2
    done
    kill -0 "$pid" 2> /dev/null && return 0
    wait "$pid" 2> /dev/null || true
    if ((try < SERVER_START_TRIES)) && grep -q "Not enough memory" "$log"; then
      echo "the SGLang server found too little free GPU memory (try $try of $SERVER_START_TRIES); again in ${SERVER_RETRY_WAIT}s" >&2
      sleep "$SERVER_RETRY_WAIT"
      continue
    fi
    echo "the SGLang server exited; see $log" >&2
    exit 1
  done
}

[[ $DRY_RUN -eq 1 ]] || mkdir -p "$OUT_DIR"
[[ -z $CROSSPLAY_DIR || -n $PARTNER_MODEL ]] || { echo "CROSSPLAY_DIR needs PARTNER_MODEL (the opponent)" >&2; exit 2; }
serve_partner=0  # the partner plays seat 1 of the training games, or cross-play
if [[ -n $PARTNER_MODEL ]] && { ((NUM_GAMES > 0)) || [[ -n $CROSSPLAY_DIR ]]; }; then
  serve_partner=1
  EXTRA_SGLANG_ARGS="$EXTRA_SGLANG_ARGS --mem-fraction-static $PARTNER_MEM_FRACTION"  # two servers share the GPUs
fi
if [[ -n $SGLANG_URL ]]; then
  read -r -a urls <<< "$SGLANG_URL"
else
  [[ -n $MODEL_NAME ]] || { echo "set MODEL_NAME (a model directory) or SGLANG_URL" >&2; exit 2; }
  urls=("http://127.0.0.1:$PORT")
  start_server "$MODEL_NAME" "$PORT" "$OUT_DIR/sglang.log"
fi
partner=()
if ((serve_partner)); then
  start_server "$PARTNER_MODEL" "$PARTNER_PORT" "$OUT_DIR/sglang-partner.log"
  partner=(--partner-backend sglang --partner-base-url "http://127.0.0.1:$PARTNER_PORT" --partner-model "$PARTNER_MODEL")
fi

read -r -a gen <<< "$SELFPLAY_GEN"
read -r -a convert <<< "$SELFPLAY_CONVERT"
read -r -a gen_args <<< "$GEN_ARGS"
read -r -a convert_args <<< "$CONVERT_ARGS"
model=()
[[ -z $MODEL_NAME ]] || model=(--model "$MODEL_NAME")
game=()  # the matching game is the commands' default
[[ $GAME == matching ]] || game=(--game "$GAME")
[[ -z $REWARD_MODE ]] || game+=(--reward-mode "$REWARD_MODE")
servers=()
for url in "${urls[@]}"; do servers+=(--base-url "$url"); done
sampling=(--backend sglang "${servers[@]}" "${model[@]}" --temperature "$TEMPERATURE" --max-moves "$MAX_MOVES"
          --max-new-tokens "$MAX_NEW_TOKENS")
[[ -z $MAX_RESPONSE_TOKENS ]] || sampling+=(--max-response-tokens "$MAX_RESPONSE_TOKENS")
if ((NUM_GAMES > 0)); then
  run generate "${gen[@]}" "${game[@]}" "${sampling[@]}" --seed "$SEED" --num-games "$NUM_GAMES" \
    --games-per-instance "$GAMES_PER_INSTANCE" --out "$OUT_DIR/games.jsonl" --resume "${partner[@]}" "${gen_args[@]}"
  run convert "${convert[@]}" "$OUT_DIR/games.jsonl" --out-dir "$OUT_DIR" --overwrite "${convert_args[@]}"
fi
sets=(heldout)  # only the matching game has instances people played
[[ $GAME != matching ]] || sets+=(human)
if [[ -n $EVAL_DIR ]]; then
  for set in "${sets[@]}"; do
    if [[ $set == heldout ]]; then size=(--num-instances "$EVAL_INSTANCES" -k "$EVAL_GAMES_PER_INSTANCE"); else size=(-k 2); fi
    append=()
    [[ -z $EVAL_APPEND_TO ]] || append=(--append-to "$EVAL_APPEND_TO/$set")
    run "evaluate ($set)" "${gen[@]}" eval "${game[@]}" "${sampling[@]}" --instances "$set" "${size[@]}" --label "$EVAL_LABEL" \
      --out "$EVAL_DIR/$set" --resume --quiet "${append[@]}"
  done
fi
if [[ -n $CROSSPLAY_DIR ]]; then
  run cross-play "${gen[@]}" eval "${game[@]}" "${sampling[@]}" "${partner[@]}" --instances heldout \
    --num-instances "$EVAL_INSTANCES" -k "$EVAL_GAMES_PER_INSTANCE" --label "$EVAL_LABEL" \
    --partner-label "$PARTNER_LABEL" --out "$CROSSPLAY_DIR" --resume --quiet
fi
STEP=finished
((NUM_GAMES == 0)) || echo "games: $OUT_DIR/games.jsonl, summary: $OUT_DIR/games.summary.json, parquet: $OUT_DIR"
[[ -z $EVAL_DIR ]] || echo "evaluation: ${sets[*]/#/$EVAL_DIR/} (report.md in each)"
[[ -z $CROSSPLAY_DIR ]] || echo "cross-play: $CROSSPLAY_DIR/report.md"
