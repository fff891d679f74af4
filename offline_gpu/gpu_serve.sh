#!/usr/bin/env bash
# Start (once) an SGLang server for $MODEL on 127.0.0.1:${PORT:-30000} in its own session, so it
# outlives the call that started it, and wait until /health answers. Needs gpu_setup.sh sourced.
# The launch arguments are the project's for this install and model (python -m selfplay_gen.serving sglang-args);
# the server runs in SGLang's environment of `make gpu` where gpu_setup.sh names one (SGLANG_PYTHON), as the loop's do.
# Extra server arguments: SGLANG_ARGS (e.g. "--mem-fraction-static 0.3"). `gpu_serve.sh stop` stops it.
#
# A server whose process exits before /health answers fails the script at once, with its log's end. SGLang
# sizes its KV cache from the GPU memory free when it starts, so a server started while another allocates
# may stop with "Not enough memory": that start is tried again after RETRY_WAIT_S (30) seconds, up to
# START_TRIES (3) starts, as the iteration's own servers are (selfplay_gen/iterate/server.py).
# SERVE_TIMEOUT_S (600): how long a running server may take to answer.
set -euo pipefail
PORT=${PORT:-30000}
LOG=/tmp/sglang-$PORT.log
PID_FILE=/tmp/sglang-$PORT.pid
NOT_ENOUGH_MEMORY="Not enough memory"

stop() { kill -- "-$(cat "$PID_FILE")" 2> /dev/null || true; }
healthy() { curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; }

if [[ ${1:-} == stop ]]; then
  stop
  exit 0
fi
if healthy; then
  echo "gpu_serve: up on $PORT" >&2
  exit 0
fi
tries=${START_TRIES:-3}
sglang_python=${SGLANG_PYTHON:-python3}
read -r -a args <<< "$(python3 -m selfplay_gen.serving sglang-args --python "$sglang_python" --model "$MODEL")"
for try in $(seq 1 "$tries"); do
  # shellcheck disable=SC2086
  setsid nohup "$sglang_python" -m sglang.launch_server --model-path "$MODEL" "${args[@]}" --host 127.0.0.1 \
    --port "$PORT" ${SGLANG_ARGS:-} > "$LOG" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$PID_FILE"
  for _ in $(seq 1 "${SERVE_TIMEOUT_S:-600}"); do
    if healthy; then
      echo "gpu_serve: up on $PORT" >&2
      exit 0
    fi
    kill -0 "$pid" 2> /dev/null || break
    sleep 1
  done
  if kill -0 "$pid" 2> /dev/null; then
    tail -40 "$LOG" >&2
    stop
    echo "gpu_serve: the server on $PORT did not answer /health in ${SERVE_TIMEOUT_S:-600}s; stopped it" >&2
    exit 1
  fi
  if ((try < tries)) && grep -q "$NOT_ENOUGH_MEMORY" "$LOG"; then
    echo "gpu_serve: the server on $PORT found too little free GPU memory (try $try of $tries);" \
      "again in ${RETRY_WAIT_S:-30}s" >&2
    sleep "${RETRY_WAIT_S:-30}"
    continue
  fi
  tail -40 "$LOG" >&2
  echo "gpu_serve: the server on $PORT exited before /health answered (log: $LOG)" >&2
  exit 1
done
