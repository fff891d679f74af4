#!/usr/bin/env bash
# Issue 61 on one H200, installed by the project's own installer (INSTALL=wheels dist, parts in .gpuw/pNN;
# gpu_setup.sh runs `make gpu WHEELHOUSE=`):
#   K0  generation of GAMES_K games by the embedded default with the bundles' three fallbacks forced
#       (triton attention, pytorch sampling, no grammar backend)
#   K1  the same with SGLang's own defaults: the fast kernels (FlashAttention-3 / flashinfer, xgrammar)
#   I1  clone -> make gpu -> `NUM_ITERATIONS=1 ./run_selfplay_iteration.sh` with no variable set
#       (the scripts find .venv-serve and .venv-train), the embedded default model, every other default
#   R1  issue 62: offline GRPO from the shipped warm start, 3 iterations of 1,024 games, one resident verl job
#   R2  the same with overlap one-step; R1 and R2 side by side on the GPU (8% of its memory a server)
# K0 and K1 run one after the other (each alone on the GPU), then I1, then (WITH_R=1) R1 and R2 together:
#   source offline_gpu/gpu_setup.sh .gpuw && bash .lease/run74.sh start     (carry .gpuw/p22 and this file)
#   bash /tmp/r74.repo/.lease/run74.sh wait [S] [ARM to wait for: I1]
set -uo pipefail
R=/tmp/r74
GAMES_K=${GAMES_K:-2048}
MEM=${MEM:-0.08}
FALLBACKS="--attention-backend triton --sampling-backend pytorch --grammar-backend none"

slim() {
  (cd "$R" && find . \( -name log -o -name '*.log' -o -name 'summary*' -o -name '*.md' -o -name '*.json' \
    -o -name '*.yaml' -o -name '*.tsv' -o -name 'rc*' -o -name 't0' -o -name 't1' \) \
    -not -path '*/checkpoints/*' -not -path '*/hf/*' -not -name 'games.jsonl' -size -4M -print0 \
    | tar --null -T - -cf - 2> /dev/null | xz -T0 -6 > "$OUT/slim74.tar.xz")
}

case ${1:-} in
  start)
    # the run happens in a copy of this checkout (the machine replaces the checkout between calls) with make
    # gpu's .venv-serve and .venv-train, which stay in the checkout, linked in
    pkill -f '[s]elfplay_gen[.]cli|[s]glang[.]launch_server|[r]un74[.]sh all' && sleep 5
    rm -rf "$R" "$R.repo" && mkdir -p "$R" "$R.repo"
    tar --exclude=./.git --exclude=./.gpu --exclude=./.gpuw --exclude='./.venv*' --exclude=./bench/results -cf - . \
      | tar -C "$R.repo" -xf -
    ln -s "$PWD/.venv-serve" "$R.repo/.venv-serve" && ln -s "$PWD/.venv-train" "$R.repo/.venv-train"
    echo "$R.repo" > "$R/checkout"
    cp /tmp/gpu/make_gpu.log "$R/" 2> /dev/null
    env -u SGLANG_PYTHON -u VERL_PYTHON -u SELFPLAY_PYTHON python3 -m selfplay_gen.cli doctor > "$R/doctor.txt" 2>&1
    echo "doctor exit $?" >> "$R/doctor.txt"
    setsid bash "$R.repo/.lease/run74.sh" all > "$R/log" 2>&1 < /dev/null &
    echo "started: $!" ;;
  all)
    cd "$(cat "$R/checkout")" || exit 1
    # no variable: the scripts find make gpu's environments and the embedded model themselves
    unset SGLANG_PYTHON VERL_PYTHON SELFPLAY_PYTHON MODEL
    for arm in K0 K1; do
      mkdir -p "$R/$arm" && date +%s > "$R/$arm/t0"
      extra=()
      [[ $arm == K0 ]] && extra=(EXTRA_SGLANG_ARGS="$FALLBACKS")
      env "${extra[@]}" NUM_GAMES="$GAMES_K" OUT_DIR="$R/$arm/gen" ./run_selfplay_generation.sh > "$R/$arm/log" 2>&1
      echo $? > "$R/$arm/rc" && date +%s > "$R/$arm/t1"
    done
    mkdir -p "$R/I1" && date +%s > "$R/I1/t0"
    NUM_ITERATIONS=1 RUN_DIR="$R/I1/run" ./run_selfplay_iteration.sh > "$R/I1/log" 2>&1
    echo $? > "$R/I1/rc" && date +%s > "$R/I1/t1"
    [[ -n ${WITH_R:-} ]] || exit 0
    port=30300
    for arm in R1 R2; do
      mkdir -p "$R/$arm" && PORT_BASE=$port bash "$R.repo/.lease/run74.sh" arm $arm > "$R/$arm/log" 2>&1 &
      port=$((port + 100)) && sleep 20
    done
    wait ;;
  arm)
    arm=$2
    cd "$(cat "$R/checkout")" || exit 1
    export RAY_TMPDIR=/tmp/ray74$arm VERL_LOGGING_LEVEL=WARN && mkdir -p "$RAY_TMPDIR"
    extra=() && [[ $arm == R2 ]] && extra=(overlap=one-step)
    # the shipped warm start was measured before: no base evaluation
    mkdir -p "$R/$arm/run/base" && touch "$R/$arm/run/base/DONE"
    date +%s > "$R/$arm/t0"
    ./run_selfplay_iteration.sh run_dir="$R/$arm/run" servers.port="$PORT_BASE" verl.master_port=$((PORT_BASE + 90)) \
      warm.policy=none trainer=grpo trainers.grpo.games_per_iter=1024 num_iterations=3 verl.resident=true \
      evaluation.test_split=false evaluation.human_games_per_instance=1 verl.ppo_micro_tokens=8192 \
      "servers.extra_args=--mem-fraction-static $MEM" servers.partner_mem_fraction=$MEM \
      servers.overlap_mem_fraction=$MEM verl.gpu_memory_utilization=0.12 servers.start_tries=6 "${extra[@]}"
    echo $? > "$R/$arm/rc" && date +%s > "$R/$arm/t1" ;;
  wait)
    end=$((SECONDS + ${2:-540}))
    upto=${3:-I1}
    while ((SECONDS < end)) && [[ ! -e $R/$upto/rc ]]; do sleep 10; done
    for arm in K0 K1 I1 R1 R2; do
      echo "===== $arm: rc $(cat "$R/$arm/rc" 2> /dev/null || echo -), $(($(cat "$R/$arm/t1" 2> /dev/null || date +%s) - $(cat "$R/$arm/t0" 2> /dev/null || date +%s))) s"
      tail -n 3 "$R/$arm/log" 2> /dev/null | cut -c1-240
      for f in "$R/$arm"/run/iter_*/gen/*.summary.json; do
        [[ -f $f ]] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1][len('$R/'):], d['games'], 'games', round(d['games_per_s'],2), 'games/s')" "$f"
      done
      f=$R/$arm/gen/games.summary.json
      [[ -f $f ]] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['games'], 'games', round(d['games_per_s'],2), 'games/s', d['wall_time_s'], 's')" "$f"
    done
    slim ;;
esac
