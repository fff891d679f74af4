#!/usr/bin/env bash
# Self-play iterations of any game: evaluate the initial model -> warm start if it cannot play -> per iteration,
# generate with the current model on new instances -> convert -> train -> merge; every model is evaluated;
# checkpoints of a competitive game play each other (cross-play).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: run_selfplay_iteration.sh [--dry-run] [--help] [HYDRA_OVERRIDE...]

Stages under RUN_DIR, each skipped once its DONE marker exists (a stopped run resumes):
  base/      the initial model evaluated (eval/heldout, eval/human)
  warm/      the warm start (WARM_START): the game's teacher games from scripted players (gen/games.jsonl;
             matching: the demonstration protocol, negotiation: the negotiator at full strength), their
             SFT parquet (gen/), verl SFT (train/, merged model train/hf)
  iter_NNN/  games of the current model on instances never used before (gen/: seeds NNN x 10**6 on),
             converted and trained on (train/, merged model train/hf) with TRAINER
  crossplay/ (CROSSPLAY=1) each checkpoint from the initial one (warm, else base) on against the initial
             one and the one before it: NAME__OPPONENT/eval holds both seat orders and both self-plays
Every model is evaluated with the server that plays its games, on held-out instances (seeds from
10**9, never trained on) and, for the matching game, on the 134 human instances; the rows go to
the run-level reports RUN_DIR/report/heldout and RUN_DIR/report/human (base, warm, iter_1, ...;
matching: each beside the random-matching baseline of its instances, with paired differences and
ratings; negotiation: points per seat, deals). With CROSSPLAY=1, RUN_DIR/report/crossplay has
each checkpoint's win/tie/loss rates against the initial model and the previous checkpoint in
both seat orders, and Bradley-Terry ratings per checkpoint (rating.png). RUN_DIR/summary.md lists
each stage's training games, their agreement and reward, and its wall time. Extra arguments go
to verl (Hydra overrides). --dry-run prints every command instead of running it.

Environment (default):
  INITIAL_MODEL       Hugging Face model directory (the embedded SmolLM2-135M-Instruct, converted once)
  GAME                the game (matching | negotiation) (matching)
  REWARD_MODE         the game's reward mode for every game played (negotiation: cooperative |
                      semi-competitive | competitive; unset: the game's default, semi-competitive)
  CROSSPLAY           1: after the iterations, cross-play of the checkpoints (see crossplay/) | 0: none
                      (1 for games other than matching, 0 for matching)
  NUM_ITERATIONS      RL iterations (3)
  TRAINER             grpo (offline GRPO on whole groups) | filtered-bc (SFT on the best games of each
                      group: filtered behaviour cloning / expert iteration) (grpo)
  GAMES_PER_ITER      games generated per iteration (grpo 1024, filtered-bc 4096)
  GAMES_PER_INSTANCE  games per instance = GRPO group size (8)
  EPOCHS_PER_ITER     training epochs per iteration (grpo 1, filtered-bc 2)
  RL_LR               learning rate of the iterations (grpo 1e-5, filtered-bc 1e-3)
  RL_BATCH_SIZE       rows per training step (grpo: 16 groups of GAMES_PER_INSTANCE games; filtered-bc: 32)
  RL_MINI_BATCH_SIZE  grpo: rows per PPO update, so a step makes RL_BATCH_SIZE / RL_MINI_BATCH_SIZE
                      updates and the later ones are clipped (RL_BATCH_SIZE / 2)
  RL_LORA_RANK        filtered-bc: each iteration trains a LoRA adapter of this rank on the current model
                      and folds it in; 0: full fine-tuning (16)
  TOP_FRACTION        filtered-bc: share of each group's games imitated (0.125: the best of 8)
  LEAGUE_SIZE         0: self-play | N: iteration i's training games put one of the last N earlier
                      checkpoints (base, warm, iter_1, ...) in seat 1, served beside the current model
                      (run_selfplay_generation.sh PARTNER_MODEL), and train on seat 0's rows only. The
                      opponent is the one whose held-out rating (RUN_DIR/report/heldout) is nearest the
                      current model's (evaluated first for it), or, without ratings, each in turn (0).
                      Negotiation's self-play evaluations give no ratings, so its league takes each in turn
  WARM_START          auto: warm start when the initial model agrees in less than WARM_START_BELOW of
                      its held-out games | teacher: always | none: never (auto)
  WARM_START_BELOW    agreement rate below which auto warm-starts (0.5)
  WARM_GAMES          teacher games for the warm start (4096)
  TEACHER_PLAN        matching: the warm-start teacher's plan: by-reviewer (about 0.82, learnable by a 135M
                      model) | by-score (about 0.88, for larger models; its proposals run to some 650
                      tokens, so MAX_NEW_TOKENS defaults to 768 with it) (by-reviewer)
  WARM_EPOCHS         warm-start epochs (2)
  WARM_LORA_RANK      the warm start trains a LoRA adapter of this rank; 0: full fine-tuning (16)
  WARM_LR             warm-start learning rate (LoRA 1e-3, full fine-tuning 1e-4)
  TEMPERATURE         sampling temperature of every game, evaluation and training (0.7)
  RUN_DIR             run directory (data/iterations)
  MAX_PROMPT_LENGTH   prompt limit for conversion and training (1024)
  MAX_RESPONSE_LENGTH response limit for generation (a seat's budget), conversion and training (3072)
  EVAL_INSTANCES, EVAL_GAMES_PER_INSTANCE  held-out evaluation size (64 x 8), also of each cross-play pairing
  SELFPLAY_PYTHON     python with selfplay_gen importable (python3)
  SELFPLAY_GEN        selfplay-gen command (selfplay-gen if on PATH, else $SELFPLAY_PYTHON -m selfplay_gen.cli)
  SELFPLAY_CONVERT    selfplay-convert command (likewise)
Everything else (MAX_MOVES, MAX_NEW_TOKENS, PORT, TP, DP, SGLANG_PYTHON, N_GPUS,
TRAIN_BATCH_SIZE, LR, VERL_PYTHON, ...) is read by run_selfplay_generation.sh / run_selfplay_training.sh.
EOF
}

DRY_RUN=0
overrides=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) usage; exit 0 ;;
    *) overrides+=("$arg") ;;
  esac
done

NUM_ITERATIONS=${NUM_ITERATIONS:-3}
TRAINER=${TRAINER:-grpo}
case "$TRAINER" in grpo|filtered-bc) ;; *) echo "TRAINER must be grpo or filtered-bc, not '$TRAINER'" >&2; exit 2 ;; esac
export GAMES_PER_INSTANCE=${GAMES_PER_INSTANCE:-8}
TOP_FRACTION=${TOP_FRACTION:-0.125}
# measured on one H100 (bench/results/learning/): filtered BC with a LoRA adapter at lr 1e-3 on the best of 8
# games gained +0.042 on held-out instances in 3 iterations of 4,096 games (2,048: +0.034; lr 2e-3 or 5e-4: less);
# GRPO's full fine-tuning needs lr 1e-5 or more, because the merged model is bf16 and smaller steps round away
if [[ $TRAINER == grpo ]]; then
  RL_LR=${RL_LR:-1e-5} RL_BATCH_SIZE=${RL_BATCH_SIZE:-16} RL_LORA_RANK=0 EPOCHS_PER_ITER=${EPOCHS_PER_ITER:-1}
  RL_MINI_BATCH_SIZE=${RL_MINI_BATCH_SIZE:-$(((RL_BATCH_SIZE + 1) / 2))} GAMES_PER_ITER=${GAMES_PER_ITER:-1024}
else
  RL_LR=${RL_LR:-1e-3} RL_BATCH_SIZE=${RL_BATCH_SIZE:-32} RL_LORA_RANK=${RL_LORA_RANK:-16} EPOCHS_PER_ITER=${EPOCHS_PER_ITER:-2}
  RL_MINI_BATCH_SIZE=$RL_BATCH_SIZE GAMES_PER_ITER=${GAMES_PER_ITER:-4096}
fi
WARM_START=${WARM_START:-auto}
export GAME=${GAME:-matching} REWARD_MODE=${REWARD_MODE:-}
if [[ $GAME == matching ]]; then CROSSPLAY=${CROSSPLAY:-0}; else CROSSPLAY=${CROSSPLAY:-1}; fi
case "$CROSSPLAY" in 0|1) ;; *) echo "CROSSPLAY must be 0 or 1, not '$CROSSPLAY'" >&2; exit 2 ;; esac
LEAGUE_SIZE=${LEAGUE_SIZE:-0}
[[ $LEAGUE_SIZE =~ ^[0-9]+$ ]] || { echo "LEAGUE_SIZE must be a number of checkpoints, not '$LEAGUE_SIZE'" >&2; exit 2; }
WARM_START_BELOW=${WARM_START_BELOW:-0.5}
WARM_GAMES=${WARM_GAMES:-4096}
teacher_args=()
if [[ -n ${TEACHER_PLAN:-} ]]; then
  teacher_args=(--teacher-plan "$TEACHER_PLAN")
  [[ $TEACHER_PLAN != by-score ]] || export MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-768}
fi
WARM_EPOCHS=${WARM_EPOCHS:-2}
WARM_LORA_RANK=${WARM_LORA_RANK:-16}
if ((WARM_LORA_RANK > 0)); then WARM_LR=${WARM_LR:-1e-3}; else WARM_LR=${WARM_LR:-1e-4}; fi
# measured on one H100 (bench/results/learning/): the warm start plays 0.679 at 0.7 and 0.658 at 1.0 on
# held-out instances; generation, evaluation and the trainer's replay all read this one setting
export TEMPERATURE=${TEMPERATURE:-0.7}
RUN_DIR=${RUN_DIR:-data/iterations}
export MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1024}
export MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-3072}
export MAX_RESPONSE_TOKENS=$MAX_RESPONSE_LENGTH
export SELFPLAY_PYTHON=${SELFPLAY_PYTHON:-python3}
if [[ -z ${SELFPLAY_GEN:-} ]]; then
  if command -v selfplay-gen > /dev/null; then SELFPLAY_GEN=selfplay-gen; else SELFPLAY_GEN="$SELFPLAY_PYTHON -m selfplay_gen.cli"; fi
fi
if [[ -z ${SELFPLAY_CONVERT:-} ]]; then
  if command -v selfplay-convert > /dev/null; then SELFPLAY_CONVERT=selfplay-convert; else SELFPLAY_CONVERT="$SELFPLAY_PYTHON -m convert.cli"; fi
fi
export SELFPLAY_GEN SELFPLAY_CONVERT
case "$WARM_START" in auto|teacher|none) ;; *) echo "WARM_START must be auto, teacher or none, not '$WARM_START'" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
limits=(--max-prompt-tokens "$MAX_PROMPT_LENGTH" --max-response-tokens "$MAX_RESPONSE_LENGTH")
dry=()
[[ $DRY_RUN -eq 0 ]] || dry=(--dry-run)
read -r -a gen_cmd <<< "$SELFPLAY_GEN"
read -r -a convert_cmd <<< "$SELFPLAY_CONVERT"
game_args=()  # the matching game is the commands' default
[[ $GAME == matching ]] || game_args=(--game "$GAME")
[[ -z $REWARD_MODE ]] || game_args+=(--reward-mode "$REWARD_MODE")

STEP=setup
on_exit() {
  local rc=$?
  if ((rc != 0)); then echo "run_selfplay_iteration.sh: step '$STEP' failed (exit $rc)" >&2; fi
}
trap on_exit EXIT

# run STEP COMMAND...: print the command; run it unless --dry-run.
run() {
  STEP=$1; shift
  printf '+'; printf ' %q' "$@"; printf '\n'
  [[ $DRY_RUN -eq 1 ]] || "$@"
}

# stage STEP COMMAND...: print and run a stage script, which itself honours --dry-run.
stage() {
  STEP=$1; shift
  printf '+'; printf ' %q' "$@"; printf '\n'
  "$@"
}

# serve STEP MODEL LABEL NUM_GAMES SEED OUT_DIR [CONVERT_ARGS] [PARTNER]: one SGLang server for MODEL
# plays NUM_GAMES training games (against PARTNER in seat 1, if given) into OUT_DIR/gen (converted
# with CONVERT_ARGS) and evaluates MODEL as LABEL into EVAL_FOR/eval (EVAL_FOR: the stage that made MODEL)
# unless that evaluation is done.
serve() {
  local eval_dir=$EVAL_FOR/eval
  [[ ! -e $eval_dir/DONE ]] || eval_dir=
  stage "$1" env MODEL_NAME="$2" EVAL_LABEL="$3" NUM_GAMES="$4" SEED="$5" OUT_DIR="$6/gen" CONVERT_ARGS="${7:-}" \
    PARTNER_MODEL="${8:-}" \
    EVAL_DIR="$eval_dir" EVAL_APPEND_TO="$RUN_DIR/report" "$HERE/run_selfplay_generation.sh" "${dry[@]}"
  [[ $DRY_RUN -eq 1 ]] || touch "$EVAL_FOR/eval/DONE"
}

# train STEP MODE MODEL DIR [VAR=VALUE...]: run_selfplay_training.sh on DIR/gen into DIR/train.
train() {
  local step=$1 mode=$2 model=$3 dir=$4
  shift 4
  stage "$step" env MODE="$mode" MODEL_PATH="$model" TRAIN_FILES="$dir/gen/train.parquet" \
    VAL_FILES="$(val_file "$dir/gen")" OUT_DIR="$dir/train" EXPERIMENT="$(basename "$dir")" "$@" \
    "$HERE/run_selfplay_training.sh" "${dry[@]}" "${overrides[@]}"
}

# val_file DIR: DIR/val.parquet, or DIR/train.parquet when the split left no validation rows.
val_file() {
  if [[ $DRY_RUN -eq 0 ]] && [[ $("$SELFPLAY_PYTHON" -c 'import sys, os, pyarrow.parquet as pq
print(pq.ParquetFile(sys.argv[1]).metadata.num_rows if os.path.exists(sys.argv[1]) else 0)' "$1/val.parquet") -eq 0 ]]; then
    echo "$1/train.parquet"
  else
    echo "$1/val.parquet"
  fi
}

# opponent ITERATION: the index in `checkpoints` of the league's opponent for ITERATION (nothing when the
# league is off or has no earlier checkpoint): among the last LEAGUE_SIZE checkpoints before the current
# model (the last), the one rated nearest it on held-out instances, else each in turn.
opponent() {
  local earlier=$((${#checkpoints[@]} - 1))
  ((LEAGUE_SIZE > 0 && earlier > 0)) || return 0
  local first=$((earlier > LEAGUE_SIZE ? earlier - LEAGUE_SIZE : 0))
  "$SELFPLAY_PYTHON" - "$RUN_DIR/report/heldout/metrics.json" "$1" "$first" "${labels[@]}" <<'PY'
import json, sys
from pathlib import Path
report, iteration, first, labels = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
rows = json.loads(report.read_text())["iterations"] if report.exists() else []
ratings = {e["label"].split(": ", 1)[-1]: (e.get("rating") or {}).get("rating") for e in rows}
pool, current = range(first, len(labels) - 1), ratings.get(labels[-1])
if current is not None and all(ratings.get(labels[k]) is not None for k in pool):
    print(min(pool, key=lambda k: (abs(ratings[labels[k]] - current), -k)))  # a tie: the later one
else:
    print(pool[iteration % len(pool)])
PY
}

# done_row STAGE DIR SECONDS: mark DIR done with its summary row, and rewrite RUN_DIR/summary.{tsv,md}.
# The row counts every training game in DIR/gen/games.jsonl, also those of a run that resumed there.
done_row() {
  [[ $DRY_RUN -eq 0 ]] || return 0
  "$SELFPLAY_PYTHON" - "$1" "$2" "$3" > "$2/summary_row.tsv" <<'PY'
import sys
from pathlib import Path
from selfplay_gen.runner import Summary
stage, root, seconds = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
games = root / "gen" / "games.jsonl"
gen = Summary.of_file(games).to_dict() if games.exists() else {}
print("\t".join([stage, str(gen.get("games", "")), *(f"{gen[k]:.4f}" if k in gen else "" for k in
                 ("agreement_rate", "mean_reward")), seconds]))
PY
  touch "$2/DONE"
  local header=$'stage\ttraining games\tagreement\tmean reward\twall time (s)'
  { echo "$header"; cat "$RUN_DIR"/*/summary_row.tsv; } > "$RUN_DIR/summary.tsv.tmp"
  awk -F'\t' '{ line = "|"; for (i = 1; i <= NF; i++) line = line " " $i " |"; print line }
              NR == 1 { print "|---|---|---|---|---|" }' "$RUN_DIR/summary.tsv.tmp" > "$RUN_DIR/summary.md.tmp"
  mv "$RUN_DIR/summary.tsv.tmp" "$RUN_DIR/summary.tsv"
  mv "$RUN_DIR/summary.md.tmp" "$RUN_DIR/summary.md"
}

STEP=initial-model
if [[ -z ${INITIAL_MODEL:-} ]]; then
  if [[ $DRY_RUN -eq 1 ]]; then INITIAL_MODEL=EMBEDDED_MODEL_DIR
  else INITIAL_MODEL=$("$SELFPLAY_PYTHON" -c 'from selfplay_gen.models import resolve; print(resolve(None))'); fi
fi
[[ $DRY_RUN -eq 1 ]] || mkdir -p "$RUN_DIR"/{base,warm}

EVAL_FOR=$RUN_DIR/base
if [[ ! -e $RUN_DIR/base/DONE ]]; then
  started=$SECONDS
  serve "base: evaluate" "$INITIAL_MODEL" base 0 0 "$RUN_DIR/base/eval"
  done_row base "$RUN_DIR/base" $((SECONDS - started))
fi

model=$INITIAL_MODEL
label=base
checkpoints=("$model")  # every model so far, in order, and their labels: the league's pool
labels=("$label")
if [[ $WARM_START == auto ]]; then
  WARM_START=none
  if [[ $DRY_RUN -eq 1 ]] || "$SELFPLAY_PYTHON" - "$RUN_DIR/base/eval/heldout/metrics.json" "$WARM_START_BELOW" <<'PY'
import json, sys
metrics = json.load(open(sys.argv[1]))
agreement = metrics["models"]["base"]["agreement_rate"]["mean"]
print(f"initial model: held-out agreement {agreement:.3f}", file=sys.stderr)
sys.exit(0 if agreement < float(sys.argv[2]) else 1)
PY
  then WARM_START=teacher; fi
fi
if [[ $WARM_START == teacher ]]; then
  dir=$RUN_DIR/warm
  if [[ ! -e $dir/DONE ]]; then
    started=$SECONDS
    run "warm start: teacher games" "${gen_cmd[@]}" "${game_args[@]}" --backend scripted --scripted-policy teacher \
      "${teacher_args[@]}" --seed 500000000 \
      --num-games "$WARM_GAMES" --games-per-instance 1 --out "$dir/gen/games.jsonl" --resume --quiet
    run "warm start: convert" "${convert_cmd[@]}" "$dir/gen/games.jsonl" --format sft --top-fraction 1 \
      --out-dir "$dir/gen" --overwrite --model "$INITIAL_MODEL" "${limits[@]}"
    train "warm start: train" sft "$model" "$dir" EPOCHS="$WARM_EPOCHS" LR="$WARM_LR" LORA_RANK="$WARM_LORA_RANK"
    done_row warm "$dir" $((SECONDS - started))
  fi
  model=$dir/train/hf
  label=warm
  checkpoints+=("$model")
  labels+=("$label")
fi
EVAL_FOR=$RUN_DIR/$label

convert_args=${limits[*]}
[[ $TRAINER == grpo ]] || convert_args="--format sft --top-fraction $TOP_FRACTION $convert_args"
for ((i = 1; i <= NUM_ITERATIONS; i++)); do
  dir=$RUN_DIR/$(printf 'iter_%03d' "$i")
  if [[ ! -e $dir/DONE ]]; then
    echo "=== iteration $i of $NUM_ITERATIONS ($TRAINER): model $model -> $dir"
    started=$SECONDS
    if ((LEAGUE_SIZE > 0 && ${#checkpoints[@]} > 1)) && [[ ! -e $EVAL_FOR/eval/DONE ]]; then
      serve "$label: evaluate (its league rating)" "$model" "$label" 0 0 "$EVAL_FOR/eval"
    fi
    STEP="iteration $i: opponent"
    pick=$(opponent "$i")
    partner=
    iteration_args=$convert_args
    if [[ -n $pick ]]; then
      partner=${checkpoints[pick]}
      iteration_args="$convert_args --seat 0"
      echo "iteration $i: seat 1 is ${labels[pick]} ($partner); training on seat 0"
    fi
    serve "iteration $i: generate" "$model" "$label" "$GAMES_PER_ITER" $((i * 1000000)) "$dir" "$iteration_args" \
      "$partner"
    mode=offline
    [[ $TRAINER == grpo ]] || mode=sft
    train "iteration $i: train" "$mode" "$model" "$dir" EPOCHS="$EPOCHS_PER_ITER" LR="$RL_LR" \
      TRAIN_BATCH_SIZE="$RL_BATCH_SIZE" MINI_BATCH_SIZE="$RL_MINI_BATCH_SIZE" LORA_RANK="$RL_LORA_RANK"
    done_row "iter_$i" "$dir" $((SECONDS - started))
  else
    echo "iteration $i: done already ($dir/DONE), skipped"
  fi
  model=$dir/train/hf
  label=iter_$i
  checkpoints+=("$model")
  labels+=("$label")
  EVAL_FOR=$dir
done
[[ -e $EVAL_FOR/eval/DONE ]] || serve "$label: evaluate" "$model" "$label" 0 0 "$EVAL_FOR/eval"

# crossplay: each checkpoint from the initial one (the warm start, else base) on plays the initial one and
# the one before it, both seat orders, on the held-out instances (two servers at once); one report then
# reads every pairing's games: the later checkpoint's win rates and everyone's ratings (the initial one 0)
reports=("$RUN_DIR/report/heldout/report.md")
if ((CROSSPLAY)); then
  first=0
  [[ ${labels[1]:-} != warm ]] || first=1
  own=()  # per checkpoint, its self-play games (from the first pairing it played in)
  cross=()
  for ((i = first + 1; i < ${#labels[@]}; i++)); do
    opponents=("$first")
    ((i - 1 == first)) || opponents+=($((i - 1)))
    for j in "${opponents[@]}"; do
      a=${labels[i]} b=${labels[j]}
      dir=$RUN_DIR/crossplay/${a}__$b
      if [[ ! -e $dir/DONE ]]; then
        stage "crossplay: $a vs $b" env MODEL_NAME="${checkpoints[i]}" EVAL_LABEL="$a" PARTNER_MODEL="${checkpoints[j]}" \
          PARTNER_LABEL="$b" NUM_GAMES=0 OUT_DIR="$dir" CROSSPLAY_DIR="$dir/eval" "$HERE/run_selfplay_generation.sh" "${dry[@]}"
        [[ $DRY_RUN -eq 1 ]] || touch "$dir/DONE"
      fi
      played=$dir/eval/games
      cross+=(--from-games "$a,$b=$played/${a}__$b.jsonl" --from-games "$b,$a=$played/${b}__$a.jsonl")
      [[ -n ${own[i]:-} ]] || own[i]="$a=$played/${a}__$a.jsonl"
      [[ -n ${own[j]:-} ]] || own[j]="$b=$played/${b}__$b.jsonl"
    done
  done
  if ((${#cross[@]})); then
    inputs=()
    for spec in "${own[@]}"; do inputs+=(--from-games "$spec"); done  # checkpoint order: the initial one first
    run "crossplay: report" "${gen_cmd[@]}" eval "${game_args[@]}" "${inputs[@]}" "${cross[@]}" \
      --out "$RUN_DIR/report/crossplay"
    reports+=("$RUN_DIR/report/crossplay/report.md")
  fi
fi
STEP=finished
if [[ $DRY_RUN -eq 0 ]]; then cat "$RUN_DIR/summary.md" "${reports[@]}"; fi
echo "final model: $model"
