#!/usr/bin/env bash
# Start (once) an SGLang server for $MODEL on 127.0.0.1:${PORT:-30000} in its own session, so it
# outlives the call that started it, and wait until /health answers. Needs gpu_setup.sh sourced.
# The launch arguments are the project's for this install and model (python -m selfplay_gen.serving sglang-args).
# Extra server arguments: SGLANG_ARGS (e.g. "--mem-fraction-static 0.3"). `gpu_serve.sh stop` stops it.
set -euo pipefail
PORT=${PORT:-30000}
if [[ ${1:-} == stop ]]; then
  kill -- "-$(cat "/tmp/sglang-$PORT.pid")" 2> /dev/null || true
  exit 0
fi
if ! curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; then
  read -r -a args <<< "$(python3 -m selfplay_gen.serving sglang-args --model "$MODEL")"
  # shellcheck disable=SC2086
  setsid nohup python3 -m sglang.launch_server --model-path "$MODEL" "${args[@]}" --host 127.0.0.1 \
    --port "$PORT" ${SGLANG_ARGS:-} > "/tmp/sglang-$PORT.log" 2>&1 < /dev/null &
  echo $! > "/tmp/sglang-$PORT.pid"
fi
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && { echo "gpu_serve: up on $PORT" >&2; exit 0; }
  sleep 1
done
tail -40 "/tmp/sglang-$PORT.log" >&2
echo "gpu_serve: server did not become healthy" >&2
exit 1
