#!/usr/bin/env bash
# GPU runbook of the efficacy benchmark (bench/results/learning/): base -> warm start -> RL iterations,
# GRPO and filtered behaviour cloning side by side from the same warm start, through run_selfplay_iteration.sh.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: offline_gpu/gpu_learning.sh [--dry-run] [--help] MODEL_DIR ROOT [PHASE...]

On a GPU machine (after `source offline_gpu/gpu_setup.sh`), with MODEL_DIR the raw SmolLM2-135M-Instruct:
  probe    verl SFT speed with a few trainer settings on 512 teacher games (TOTAL_STEPS=6 each, one after
           the other); the fastest one's settings go to ROOT/sft_args, which later phases pass as SFT_ARGS
  warm     the base model evaluated, then the warm start on teacher games by full fine-tuning
           (ROOT/full; ROOT/warm_steps steps when the probe ran) and, with LORA_RANK > 0 (16), side by side a
           LoRA adapter of that rank (ROOT/lora; its hf/lora_adapter is the embedded default's adapter)
  embedded ROOT/embedded: the embedded warm start (selfplay_gen/data/warm_start, the shipped adapter) folded
           into MODEL_DIR as its warm stage, so `WARM=embedded rl` starts from the model users get
  rl       from ROOT/WARM (lora), NUM_ITERATIONS iterations of each run of RL_RUNS side by side, each with
           its own SGLang ports (PORT and PORT + 1 for a second server: a league's opponent, cross-play;
           the first run's PORT is FIRST_PORT, 30000: another ROOT's runs beside them take another);
           negotiation runs start from NEG_WARM's warm stage when NEG_WARM names a finished run;
           RL_RUNS is a list of NAME:VAR=VALUE,VAR=VALUE for run_selfplay_iteration.sh (default: GRPO as
           ROOT/grpo and filtered behaviour cloning as ROOT/fbc; a value may hold commas:
           SKILL_LEVELS=novice,expert). WARM=none, or a run of another game
           (GAME=negotiation), adopts no warm stage: the run warms up on its own game's teacher itself
           (WARM_START=teacher), and a negotiation run ends with cross-play of its checkpoints, e.g.
             RL_RUNS="neg:GAME=negotiation,REWARD_MODE=semi-competitive,TRAINER=filtered-bc,NUM_ITERATIONS=2,
             WARM_GAMES=2048,GAMES_PER_ITER=1024,EVAL_INSTANCES=96,EVAL_GAMES_PER_INSTANCE=2" (one word)
           (semi-competitive for filtered BC: the best game of a seat's group is a deal that gave it much;
           competitive rewards rank a refused deal above every lost one, cooperative ones not the seats)
  restore  a run continued on another machine: its adapters came back without the models (ROOT/NAME/
           iter_NNN/train/hf/lora_adapter), so each iteration's model is folded again onto the model it trained
           from (iter_NNN/trained_from; without it, the one before), a chain of stages in one process that
           writes each model once (merge_lora --onto)
  generation  the generation benchmark (bench/generation.py) of GEN_MODEL (MODEL_DIR; a trained model plays
           whole games, MAX_NEW_TOKENS (512) per turn) alone on the GPU: GEN_GAMES (1024)
           games, GEN_CONCURRENCY (512) in flight (a game starts as one ends, so the longest games do not leave
           the server idle at the end of each wave), against GEN_SEQUENTIAL (16) of them one at a time and a
           saturation flood
           (ROOT/generation/generation.{json,md})
  collect  python bench/analysis/learning.py ROOT RESULTS: the table, plot and JSON of the benchmark, and each run's
           cross-play report (RESULTS/NAME_crossplay/)
Default phases: probe warm rl collect. Every phase resumes where it stopped (the iteration script's DONE
markers). Runs that share the GPU get a share of its memory each, and train in SFT micro-batches of
SHARED_SFT_MICRO_TOKENS (8192) tokens unless SFT_MICRO_TOKENS is set. Logs: ROOT/logs/.
USAGE
}

DRY_RUN=0
args=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) usage; exit 0 ;;
    *) args+=("$arg") ;;
  esac
done
((${#args[@]} >= 2)) || { usage >&2; exit 2; }
MODEL_DIR=${args[0]}
ROOT=${args[1]}
PHASES=("${args[@]:2}")
# an empty or wrong MODEL_DIR (gpu_setup.sh not sourced, so $MODEL unset) would have `embedded` and `restore` fold
# adapters onto something that is no model, and fail only once a run has started
if ((!DRY_RUN)) && [[ ! -f $MODEL_DIR/config.json ]]; then
  echo "gpu_learning.sh: MODEL_DIR '$MODEL_DIR' is not a model directory (no config.json); on the GPU machine," \
    "\`source offline_gpu/gpu_setup.sh\` exports it as \$MODEL" >&2
  exit 2
fi
((${#PHASES[@]})) || PHASES=(probe warm rl collect)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WARM=${WARM:-lora}
RL_RUNS=${RL_RUNS:-grpo:TRAINER=grpo fbc:TRAINER=filtered-bc}
RESULTS=${RESULTS:-$ROOT/results}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$REPO
# the Pythons of `make gpu`'s environments where they exist, unless SELFPLAY_PYTHON, VERL_PYTHON, SGLANG_PYTHON name others
eval "$(python3 "$REPO/selfplay_gen/environments.py" exports)"
export SELFPLAY_GEN="$SELFPLAY_PYTHON -m selfplay_gen.cli" SELFPLAY_CONVERT="$SELFPLAY_PYTHON -m convert.cli"
read -r -a gen_cmd <<< "$SELFPLAY_GEN"
read -r -a convert_cmd <<< "$SELFPLAY_CONVERT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RAY_DEDUP_LOGS=0
export VERL_LOGGING_LEVEL=${VERL_LOGGING_LEVEL:-WARN}
export INITIAL_MODEL=$MODEL_DIR NUM_ITERATIONS=${NUM_ITERATIONS:-3}
# two runs share one GPU: each SGLang server and each verl rollout engine takes a share of its memory
# (SGLang takes its fraction of the memory free when it starts)
EXTRA_SGLANG_ARGS="$("$SELFPLAY_PYTHON" -m selfplay_gen.serving sglang-args --python "$SGLANG_PYTHON") --mem-fraction-static ${SGLANG_MEM_FRACTION:-0.25}"
export EXTRA_SGLANG_ARGS
export GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.2}
# a run's second server (a league's opponent, a cross-play partner) and its first then take this share each
export PARTNER_MEM_FRACTION=${PARTNER_MEM_FRACTION:-0.12}
# an SFT step at the loop's default micro-batch (SFT_MICRO_TOKENS 32768) reserves most of the GPU's memory, so
# runs side by side train in micro-batches of SHARED_SFT_MICRO_TOKENS each unless SFT_MICRO_TOKENS is set
shared_sft=()
[[ -n ${SFT_MICRO_TOKENS:-} ]] || shared_sft=(SFT_MICRO_TOKENS="${SHARED_SFT_MICRO_TOKENS:-8192}")
LORA_RANK=${LORA_RANK:-16}
GEN_MODEL=${GEN_MODEL:-$MODEL_DIR}
dry=()
[[ $DRY_RUN -eq 0 ]] || dry=(--dry-run)
[[ $DRY_RUN -eq 1 ]] || mkdir -p "$ROOT/logs"

pids=()
# launch NAME PORT VAR=VALUE...: run_selfplay_iteration.sh under ROOT/NAME in the background.
launch() {
  local name=$1 port=$2
  shift 2
  echo "=== $name (port $port): $*"
  if [[ $DRY_RUN -eq 1 ]]; then
    env RUN_DIR="$ROOT/$name" PORT="$port" "$@" "$REPO/run_selfplay_iteration.sh" "${dry[@]}"
  else
    env RUN_DIR="$ROOT/$name" PORT="$port" "$@" "$REPO/run_selfplay_iteration.sh" > "$ROOT/logs/$name.log" 2>&1 &
    pids+=($!)
  fi
}

# finish: wait for every launched run; stop with their logs' ends if one failed.
finish() {
  local pid rc=0
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  pids=()
  ((rc == 0)) || { tail -n 30 "$ROOT"/logs/*.log >&2; echo "gpu_learning: a run failed (exit $rc); logs: $ROOT/logs" >&2; exit "$rc"; }
}

# adopt NAME FROM STAGE...: ROOT/NAME starts from ROOT/FROM's finished STAGEs (and its reports).
adopt() {
  local name=$1 from=$2 stage
  shift 2
  echo "=== $name starts from $from: $*"
  [[ $DRY_RUN -eq 0 ]] || return 0
  mkdir -p "$ROOT/$name"
  for stage in "$@" report; do
    [[ -e $ROOT/$name/$stage || ! -e $ROOT/$from/$stage ]] || cp -r "$ROOT/$from/$stage" "$ROOT/$name/"
  done
}

# until_done FILE: wait for a run to finish a stage (or for every run to have stopped).
until_done() {
  [[ $DRY_RUN -eq 0 ]] || return 0
  while [[ ! -e $1 ]]; do
    sleep 5
    local pid alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    ((alive)) || finish
  done
}

# SFT trainer settings to compare: the script's defaults (measured fastest), with recomputation (for larger
# models), and with smaller micro-batches (less memory)
PROBES=("defaults:"
        "recompute:model.enable_gradient_checkpointing=True"
        "small_micro_batches:data.max_token_len_per_gpu=16384")

# probe: time a few SFT steps per setting; keep the fastest setting in ROOT/sft_args.
probe() {
  local dir=$ROOT/probe spec name rate rc best="" best_rate=0
  run_cmd "${gen_cmd[@]}" --backend scripted --scripted-policy teacher --seed 400000000 --num-games 512 \
    --games-per-instance 1 --out "$dir/games.jsonl" --resume --quiet
  run_cmd "${convert_cmd[@]}" "$dir/games.jsonl" --format sft --top-fraction 1 --out-dir "$dir" --overwrite --model "$MODEL_DIR"
  for spec in "${PROBES[@]}"; do
    name=${spec%%:*}
    echo "=== probe $name: ${spec#*:}"
    [[ $DRY_RUN -eq 1 ]] && continue
    rc=0
    env MODE=sft MODEL_PATH="$MODEL_DIR" TRAIN_FILES="$dir/train.parquet" VAL_FILES="$dir/val.parquet" \
      OUT_DIR="$dir/$name" TOTAL_STEPS=6 SFT_ARGS="${spec#*:}" "$REPO/run_selfplay_training.sh" \
      > "$ROOT/logs/probe_$name.log" 2>&1 || rc=$?
    # the training bar's last rate ("12.3s/it" or "1.5it/s") as steps per second
    rate=$(grep -a "Epoch" "$ROOT/logs/probe_$name.log" | grep -aoE '[0-9.]+(s/it|it/s)' | tail -1 \
           | awk '/s\/it/ { printf "%.4f", 1 / $1 } /it\/s/ { printf "%.4f", $1 }')
    ((rc == 0)) || rate=""
    echo "probe $name: ${rate:-failed} steps/s (${spec#*:})" | tee -a "$ROOT/probe.txt"
    if [[ -n $rate ]] && awk -v a="$rate" -v b="$best_rate" 'BEGIN { exit !(a > b) }'; then best=${spec#*:} best_rate=$rate; fi
  done
  echo "$best" > "$ROOT/sft_args"
  # warm-start steps that fit WARM_SECONDS at the best rate, between 30 and one epoch of 4096 games (128)
  awk -v r="$best_rate" -v t="${WARM_SECONDS:-300}" 'BEGIN { s = int(r * t); print (s < 30 ? 30 : s > 128 ? 128 : s) }' \
    > "$ROOT/warm_steps"
}

# restore: refold every run's stages whose model did not travel (only their LoRA adapters do), in order, from
# MODEL_DIR: its warm start, then each iteration onto the model it trained from (its stage's trained_from file:
# the last promoted checkpoint, which is not the stage before one that was kept out; without the file, the stage
# before). Stages without weights that follow one another are one chain, folded in one process (merge_lora
# --onto): each stage's weights written once. Runs share no stage, so each run folds in its own process at once.
restore() {
  local run pids=() failed=0 pid
  for run in "$ROOT"/*/; do
    restore_run "$run" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return "$failed"
}

restore_run() {
  local run=$1 hf model=$MODEL_DIR chain=() parent before=$MODEL_DIR
  for hf in "$run"warm/train/hf "$run"iter_*/train/hf; do
    [[ -d $hf ]] || continue
    parent=$(cat "${hf%/train/hf}/trained_from" 2> /dev/null || true)
    if [[ -d $parent && $(realpath -m "$parent") != $(realpath -m "$before") ]]; then
      fold_chain "$model" "${chain[@]}"
      model=$parent chain=()
    fi
    before=$hf
    if [[ -d $hf/lora_adapter ]] && ! compgen -G "$hf/*.safetensors" > /dev/null; then
      chain+=("$hf")
      continue
    fi
    fold_chain "$model" "${chain[@]}"
    model=$hf chain=()
  done
  fold_chain "$model" "${chain[@]}"
}

fold_chain() {
  (($# > 1)) || return 0
  run_cmd "$SELFPLAY_PYTHON" -m selfplay_gen.verl.merge_lora --onto "$@"
}

run_cmd() {
  # one write a line: runs restored side by side print their commands whole
  printf '+%s\n' "$(printf ' %q' "$@")"
  [[ $DRY_RUN -eq 1 ]] || "$@"
}

for phase in "${PHASES[@]}"; do
  SFT_ARGS=$(cat "$ROOT/sft_args" 2> /dev/null || echo "${SFT_ARGS:-}")
  export SFT_ARGS
  case "$phase" in
    probe) probe ;;
    warm)   # a LoRA run (LORA_RANK > 0) starts once the first has evaluated the base model
      steps=()
      [[ ! -f $ROOT/warm_steps ]] || steps=(TOTAL_STEPS="$(cat "$ROOT/warm_steps")")
      share=()
      ((LORA_RANK == 0)) || share=("${shared_sft[@]}")
      launch full 30000 WARM_START=teacher NUM_ITERATIONS=0 WARM_LORA_RANK=0 "${steps[@]}" "${share[@]}"
      if ((LORA_RANK > 0)); then
        until_done "$ROOT/full/base/DONE"
        adopt lora full base
        launch lora 30001 WARM_START=teacher NUM_ITERATIONS=0 WARM_LORA_RANK="$LORA_RANK" "${steps[@]}" "${share[@]}"
      fi
      finish ;;
    embedded)   # the shipped adapter as the warm stage; the raw model was evaluated before (0.000)
      dir=$ROOT/embedded
      if [[ ! -e $dir/warm/DONE ]]; then
        run_cmd mkdir -p "$dir/base" "$dir/warm/train/hf"
        run_cmd cp -r "$REPO/selfplay_gen/data/warm_start" "$dir/warm/train/hf/lora_adapter"
        fold_chain "$MODEL_DIR" "$dir/warm/train/hf"
        run_cmd touch "$dir/base/DONE" "$dir/warm/DONE"
      fi ;;
    rl)
      port=${FIRST_PORT:-30000}
      share=()
      (($(wc -w <<< "$RL_RUNS") == 1)) || share=("${shared_sft[@]}")
      for spec in $RL_RUNS; do
        name=${spec%%:*}
        # VAR=VALUE pieces split on commas; a piece without VAR= belongs to the value before it
        # (SKILL_LEVELS=novice,expert, LEAGUE_SCRIPTED=0.3,1)
        IFS=, read -r -a pieces <<< "${spec#*:}"
        vars=()
        for piece in "${pieces[@]}"; do
          if [[ $piece =~ ^[A-Z_][A-Z0-9_]*= || ${#vars[@]} -eq 0 ]]; then
            vars+=("$piece")
          else
            vars[-1]+=",$piece"
          fi
        done
        game=matching
        for var in "${vars[@]}"; do [[ $var != GAME=* ]] || game=${var#GAME=}; done
        # the shared warm stage is the matching game's (WARM); a negotiation run adopts NEG_WARM's (a run of
        # NUM_ITERATIONS=0 on the negotiation teacher), so runs compared side by side start from one model
        warm_run=$WARM
        [[ $game == matching ]] || warm_run=${NEG_WARM:-none}
        [[ $warm_run == none ]] || adopt "$name" "$warm_run" base warm
        launch "$name" "$port" WARM_START=teacher "${share[@]}" "${vars[@]}"
        port=$((port + 2))
      done
      finish ;;
    restore) restore ;;
    generation)
      dir=$ROOT/generation
      if [[ ! -e $dir/DONE ]]; then
        run_cmd mkdir -p "$dir"
        run_cmd env MODEL="$GEN_MODEL" PORT=30100 SGLANG_ARGS="--mem-fraction-static ${SGLANG_MEM_FRACTION:-0.25}" \
          bash "$REPO/offline_gpu/gpu_serve.sh"
        run_cmd "$SELFPLAY_PYTHON" "$REPO/bench/generation.py" --backend sglang --base-url http://127.0.0.1:30100 \
          --tokenizer "$GEN_MODEL" --num-games "${GEN_GAMES:-1024}" --concurrency "${GEN_CONCURRENCY:-512}" \
          --sequential-games "${GEN_SEQUENTIAL:-16}" --games-per-instance 8 --max-new-tokens "${MAX_NEW_TOKENS:-512}" \
          --max-moves 30 \
          --out "$dir"
        run_cmd env PORT=30100 bash "$REPO/offline_gpu/gpu_serve.sh" stop
        run_cmd touch "$dir/DONE"
      fi ;;
    collect)
      echo "+ $SELFPLAY_PYTHON $REPO/bench/analysis/learning.py $ROOT $RESULTS"
      [[ $DRY_RUN -eq 1 ]] || "$SELFPLAY_PYTHON" "$REPO/bench/analysis/learning.py" "$ROOT" "$RESULTS" ;;
    *) echo "unknown phase '$phase' (probe, warm, embedded, rl, restore, generation, collect)" >&2; exit 2 ;;
  esac
done
