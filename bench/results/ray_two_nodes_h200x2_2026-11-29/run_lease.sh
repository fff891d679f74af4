#!/usr/bin/env bash
# One H200, several runs of SmolLM2-135M side by side (at most three offline trainers with the default micro-batches;
# MICRO lowers each trainer's logits memory), picked by ARMS:
#   P0  matching, offline GRPO, 2 iterations of 1,024 games from the shipped warm start, a verl job per iteration
#       with its rollout engine (the defaults)
#   P1  the same without the rollout engine (verl.offline_engine=false)
#   P2  P1 with verl's torch.compile of the entropy off (is a job's slow first step that compile?)
#   R1  P1 with one resident job for the run, 3 iterations
#   R2  R1 with overlap one-step
#   T   textarena:TicTacToe-v0 from the rules alone: format warm start, online GRPO, LoRA r16 at LR_T, STEPS_T steps
#   K   textarena:KuhnPoker-v0, the same
#   W0  matching, the default loop: 3 filtered-BC iterations of FBC_GAMES games from the shipped warm start
#   W1  the same from a warm start stopped early: the raw model on 1,024 teacher games for 1 epoch (issue 59: a
#       default that can still learn keeps some entropy)
#   W2  the same on 512 teacher games for 1 epoch
#   W3  the same on 4,096 teacher games for 1 epoch (half the shipped warm start's 460 steps)
#   W4  the same on 2,048 teacher games for 2 epochs
#   K3  K with the chips reward (reward_mode=chips)
#   K5  K at lr LR_SLOW over STEPS_SLOW steps
#   Q   matching from the rules alone with Qwen2.5-Coder-1.5B (QWEN, converted by prepare_qwen.sh): format warm
#       start on 1,024 random games for 1 epoch, then online GRPO, LoRA r16 at LR_Q, STEPS_Q steps (issue 59);
#       alone on the GPU, with larger memory shares: MEM=0.25 ARMS=Q
#   QK  Kuhn Poker from the rules alone with Qwen2.5-Coder-1.5B: no warm start, SPIRAL's move format (it reasons
#       step by step, its move in \boxed{}), online GRPO at LR_Q for STEPS_Q steps; two Qwen arms at once:
#       MEM=0.12 ARMS="QK QT"
#   QT  TicTacToe, the same
#   G1  two GPUs as two Ray nodes of one host (`ray_up`): one offline-GRPO iteration of GAMES_G games from the
#       shipped warm start with servers.placement=ray and one server (one node's GPU), stopped after generation:
#       the one-node games/s
#   G2  the same with two servers, one a node, and verl on both nodes (nnodes=2), the whole iteration (issue 61)
#   S0  the default loop, synchronous: FBC_ITERS filtered-BC iterations of FBC_GAMES from the shipped warm start
#       on GPU S0_GPU (issue 62's reference)
#   S1  the same with overlap one-step, on GPU S1_GPU
#   bash .lease/run73.sh start   (after gpu_setup.sh: all parts in)
#   bash .lease/run73.sh wait [S]   (also leaves a slim pack of logs and reports in $OUT)
#   bash .lease/run73.sh pack
set -uo pipefail
R=/tmp/r73
ARMS=${ARMS:-P0 P1 P2}
STEPS_T=${STEPS_T:-32} LR_T=${LR_T:-5e-5} MICRO=${MICRO:-8192}
QWEN=${QWEN:-/tmp/qwen} STEPS_Q=${STEPS_Q:-16} LR_Q=${LR_Q:-2e-5}
MEM=${MEM:-0.08}
LR_SLOW=${LR_SLOW:-2e-5} STEPS_SLOW=${STEPS_SLOW:-48}
COMMON=(servers.python=python3 verl.python=python3 tools.python=python3 evaluation.test_split=false
  "servers.extra_args=--attention-backend triton --sampling-backend pytorch --grammar-backend none --mem-fraction-static $MEM"
  servers.partner_mem_fraction=$MEM servers.overlap_mem_fraction=$MEM verl.gpu_memory_utilization=0.12
  verl.ppo_micro_tokens=$MICRO servers.start_tries=6 servers.retry_wait_s=20)
ONLINE=(trainer=grpo-online num_iterations=1 trainers.grpo_online.batch_size=16 trainers.grpo_online.lora_rank=16
  games_per_instance=8 trainers.grpo_online.test_instances=16 sampling.temperature=1.0 loss.clip_ratio_high=0.28
  loss.entropy_coeff=0.001 trainers.grpo_online.lr=$LR_T trainers.grpo_online.steps=$STEPS_T
  trainers.grpo_online.test_freq=8 verl.save_freq=16 evaluation.instances=32 evaluation.games_per_instance=4
  warm.policy=format warm.games=1024)
OFFLINE=(initial_model=/tmp/warm warm.policy=none trainer=grpo trainers.grpo.games_per_iter=1024)
FBC=(trainer=filtered-bc num_iterations=3 trainers.filtered_bc.games_per_iter=${FBC_GAMES:-2048}
  verl.sft_micro_tokens=16384 evaluation.human_games_per_instance=1)
RAY_G=(servers.placement=ray num_iterations=1 trainers.grpo.games_per_iter=${GAMES_G:-2048} verl.offline_engine=false
  evaluation.instances=32 evaluation.games_per_instance=4 evaluation.human_games_per_instance=1)
FBC_ITERS=${FBC_ITERS:-2}
NO_COMPILE=(actor_rollout_ref.actor.fsdp_config.use_torch_compile=False actor_rollout_ref.ref.fsdp_config.use_torch_compile=False)

arm_args() {
  case $1 in
    P0) echo "${OFFLINE[@]}" num_iterations=2 ;;
    P1) echo "${OFFLINE[@]}" num_iterations=2 verl.offline_engine=false ;;
    P2) echo "${OFFLINE[@]}" num_iterations=2 verl.offline_engine=false "${NO_COMPILE[@]}" ;;
    R1) echo "${OFFLINE[@]}" num_iterations=3 verl.resident=true ;;
    R2) echo "${OFFLINE[@]}" num_iterations=3 verl.resident=true overlap=one-step ;;
    W0) echo initial_model=/tmp/warm warm.policy=none "${FBC[@]}" ;;
    W1) echo initial_model="$MODEL" warm.policy=teacher warm.games=1024 warm.epochs=1 "${FBC[@]}" ;;
    W2) echo initial_model="$MODEL" warm.policy=teacher warm.games=512 warm.epochs=1 "${FBC[@]}" ;;
    W3) echo initial_model="$MODEL" warm.policy=teacher warm.games=4096 warm.epochs=1 "${FBC[@]}" ;;
    W4) echo initial_model="$MODEL" warm.policy=teacher warm.games=2048 warm.epochs=2 "${FBC[@]}" ;;
    K3) echo game=textarena:KuhnPoker-v0 initial_model="$MODEL" "${ONLINE[@]}" reward_mode=chips ;;
    K5) echo game=textarena:KuhnPoker-v0 initial_model="$MODEL" "${ONLINE[@]}" trainers.grpo_online.lr="$LR_SLOW" \
      trainers.grpo_online.steps="$STEPS_SLOW" ;;
    Q) echo initial_model="$QWEN" warm.policy=format warm.games=1024 warm.epochs=1 "${ONLINE[@]}" \
      trainers.grpo_online.lr="$LR_Q" trainers.grpo_online.steps="$STEPS_Q" game=matching \
      verl.gpu_memory_utilization=0.3 evaluation.human_games_per_instance=1 ;;
    QK | QT) echo initial_model="$QWEN" "${ONLINE[@]}" warm.policy=none trainers.grpo_online.lr="$LR_Q" \
      trainers.grpo_online.steps="$STEPS_Q" verl.gpu_memory_utilization=0.2 move_format=boxed game=textarena:$([[ $1 == QK ]] && echo KuhnPoker-v0 || echo TicTacToe-v0) ;;
    G1) echo "${OFFLINE[@]}" "${RAY_G[@]}" servers.dp=1 ;;
    G2) echo "${OFFLINE[@]}" "${RAY_G[@]}" servers.dp=2 verl.nnodes=2 verl.n_gpus=1 ;;
    S0) echo initial_model=/tmp/warm warm.policy=none "${FBC[@]}" num_iterations="$FBC_ITERS" ;;
    S1) echo initial_model=/tmp/warm warm.policy=none "${FBC[@]}" num_iterations="$FBC_ITERS" overlap=one-step ;;
    T) echo game=textarena:TicTacToe-v0 initial_model="$MODEL" "${ONLINE[@]}" ;;
    K) echo game=textarena:KuhnPoker-v0 initial_model="$MODEL" "${ONLINE[@]}" ;;
  esac
}

slim() {  # logs, reports, summaries, configs: what says how far each arm got
  (cd "$R" && find . \( -name log -o -name '*.log' -o -name 'summary*' -o -name '*.md' -o -name '*.json' \
    -o -name '*.yaml' -o -name '*.csv' -o -name '*.txt' -o -name 'rc*' -o -name 't0' -o -name 't1' \) \
    -not -path '*/checkpoints/*' -not -path '*/hf/*' -not -name 'games.jsonl' -size -4M -print0 \
    | tar --null -T - -cf - 2> /dev/null | xz -T0 -6 > "$OUT/slim73.tar.xz")
}

case ${1:-} in
  ray_up)  # two Ray nodes on this host, one GPU each (as Ray's own multi-node tests run them)
    # in a session of their own (setsid), so that the cluster outlives the call that started it
    export RAY_worker_niceness=0
    python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1
    CUDA_VISIBLE_DEVICES=0 setsid python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 --port=6379 --num-gpus=1 \
      --dashboard-agent-listen-port=52365 --disable-usage-stats > /tmp/ray_head.log 2>&1 || tail -20 /tmp/ray_head.log
    CUDA_VISIBLE_DEVICES=1 setsid python3 -m ray.scripts.scripts start --address=127.0.0.1:6379 --node-ip-address=127.0.0.1 --num-gpus=1 \
      --dashboard-agent-listen-port=52366 --disable-usage-stats > /tmp/ray_worker.log 2>&1 || tail -20 /tmp/ray_worker.log
    RAY_ADDRESS=127.0.0.1:6379 python3 -m ray.scripts.scripts status 2>&1 | tail -20 ;;
  start)
    mkdir -p "$R" && rm -rf "$R.repo" && mkdir -p "$R.repo"
    tar --exclude=./.gpu --exclude=./.git -cf - . | tar -C "$R.repo" -xf -
    cd "$R.repo" || exit 1
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
    [[ -e $R/doctor.txt ]] || { python3 -m selfplay_gen.cli doctor > "$R/doctor.txt" 2>&1; echo "doctor exit $?" >> "$R/doctor.txt"; }
    [[ -e /tmp/warm/config.json ]] || python3 -c "from pathlib import Path; from selfplay_gen.models import fold_adapter; \
fold_adapter(Path('$MODEL'), Path('selfplay_gen/data/warm_start'), Path('/tmp/warm'))" > "$R/fold.log" 2>&1 || cat "$R/fold.log"
    port=${PORT0:-30000}
    for arm in $ARMS; do
      mkdir -p "$R/$arm" && rm -f "$R/$arm/rc"
      PORT_BASE=$port setsid bash "$R.repo/.lease/run73.sh" arm "$arm" > "$R/$arm/log" 2>&1 < /dev/null &
      echo "arm $arm: pid $!, ports from $port"
      port=$((port + 100))
      sleep 20
    done
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv ;;
  arm)
    arm=$2
    cd "$R.repo" || exit 1
    export PYTHONPATH=$R.repo:$PYTHONPATH VERL_LOGGING_LEVEL=WARN RAY_DEDUP_LOGS=0
    case $arm in
      G*) export RAY_ADDRESS=127.0.0.1:6379 ;;  # the cluster of `ray_up`: every GPU is one of its nodes'
      S0) export CUDA_VISIBLE_DEVICES=${S0_GPU:-0} RAY_TMPDIR=/tmp/ray73$arm ;;
      S1) export CUDA_VISIBLE_DEVICES=${S1_GPU:-1} RAY_TMPDIR=/tmp/ray73$arm ;;
      *) export CUDA_VISIBLE_DEVICES=0 RAY_TMPDIR=/tmp/ray73$arm ;;
    esac
    [[ -n ${RAY_TMPDIR:-} ]] && mkdir -p "$RAY_TMPDIR"
    date +%s > "$R/$arm/t0"
    # every arm starts from a model measured before (the raw model in rules_alone_one_gpu_h200_2026-11-28, the
    # shipped warm start throughout): no base evaluation
    mkdir -p "$R/$arm/run/base" && touch "$R/$arm/run/base/DONE"
    if [[ $arm == G1 ]]; then  # stop once generation is done: the one-node games/s is all it is for
      (while [[ ! -e $R/$arm/run/iter_001/gen/games.summary.json ]]; do sleep 2; done; sleep 1
        pkill -TERM -f "run_dir=$R/$arm/run" ) &
    fi
    # shellcheck disable=SC2046
    python3 -m selfplay_gen.cli iterate run_dir="$R/$arm/run" servers.port="$PORT_BASE" verl.master_port=$((PORT_BASE + 90)) \
      "${COMMON[@]}" $(arm_args "$arm")
    echo $? > "$R/$arm/rc"
    date +%s > "$R/$arm/t1" ;;
  wait)
    end=$((SECONDS + ${2:-540}))
    while ((SECONDS < end)); do
      left=0
      for arm in $ARMS; do [[ -e $R/$arm/rc ]] || left=1; done
      ((left)) || break
      sleep 10
    done
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
    for arm in $ARMS; do
      echo "===== $arm: rc $(cat "$R/$arm/rc" 2> /dev/null || echo running), $(($(date +%s) - $(cat "$R/$arm/t0" 2> /dev/null || date +%s))) s"
      grep -hE "^\+ |===|step:|reward|rror" "$R/$arm/log" 2> /dev/null | cut -c1-240 | tail -n 5
      for f in "$R/$arm"/run/iter_*/gen/*.summary.json; do
        [[ -f $f ]] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1][len('$R/'):], d['games'], 'games', round(d['games_per_s'],2), 'games/s', d['wall_time_s'], 's')" "$f"
      done
    done
    slim ;;
  pack)
    cd "$R" || exit 1
    slim
    find . -path '*lora_adapter*' -size -12M -print0 | tar --null -T - -cf - 2> /dev/null | xz -T0 -1 \
      | split -b 15M -d -a 1 - "$OUT/adapters.tar.xz."
    ls -l "$OUT" ;;
esac
