#!/usr/bin/env bash
# A benchmark longer than one call on a GPU machine whose calls last at most 10 minutes, and which is
# released when idle: `start` runs offline_gpu/gpu_learning.sh in its own process session (it outlives
# the call), `wait` watches it for up to a call's length, `pack` puts what a later machine needs to go
# on (adapters, evaluations) into $OUT.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: offline_gpu/gpu_lease.sh [--help] dist DIST | parts DIST PART_DIR | install DIR | installed DIR [SECONDS]
                          | start ROOT PHASE... | run ROOT ARMS_FILE STEP... | wait ROOT [SECONDS]
                          | await ROOT ARM FILE [SECONDS]
                          | pack ROOT PACK_DIR [--slim] | give PACK_DIR OUT_DIR N | unpack ROOT DIR | kernels OUT_DIR

Here, on a machine with PyPI:
  dist DIST            what the GPU machine needs, built by this repository's gpu/ and offline_gpu/ into DIST:
                       site_serve.tar.xz and site_train.tar.xz (gpu/build_bundle.sh; minutes each, mostly xz),
                       the SmolLM2 GGUF's parts (offline_gpu/prepare_model.sh fetch), each with its .sha256, and
                       install_site.sh, prepare_model.sh, gguf_to_hf.py; what is there is kept (downloads
                       cached in DIST/.work and DIST/model, which `parts` leaves out); with INSTALL=wheels,
                       DIST/wheels from `make wheelhouse` (978 MB, the fast kernels whole) in place of the two
                       site bundles, and gpu_setup.sh installs with `make gpu WHEELHOUSE=`
Then, with DIST holding those:
  parts DIST PART_DIR  one tar of DIST split into PART_DIR/pNN/part-NN of PART_MIB MiB, each beside all.sha256 and
                       `parts` (their number): carry one pNN per call, offline_gpu/gpu_setup.sh joins them; a part
                       and the repository's tracked files share a call's 64 MiB (CALL_MIB), so PART_MIB
                       defaults to what they leave (on disk, less 4 MiB); where they leave none, move the
                       committed results (bench/results) out of the checkout while the calls are made
On the GPU machine, once every part has arrived (in /tmp/gpu-parts), in the background:
  install DIR          copy this checkout to DIR and source offline_gpu/gpu_setup.sh there, detached (DIR.log, then
                       DIR.rc, its exit status), so the next calls carry more (a model's chunks) while `make gpu`
                       runs; later calls `source DIR/offline_gpu/gpu_setup.sh` from DIR once it is done (at once)
                       and run DIR/offline_gpu/gpu_lease.sh, whose runs find the environments there
  installed DIR [SECONDS]
                       until the install ends or SECONDS pass (560): the end of its log; exits with its status, 3
                       while it runs
On the GPU machine, after `source offline_gpu/gpu_setup.sh` in the same call:
  start ROOT PHASE...  copy this repository to ROOT.repo and run offline_gpu/gpu_learning.sh "$MODEL" ROOT PHASE... there,
                       detached (setsid), logging to ROOT/logs/lease.log; the environment is passed on
  run ROOT ARMS_FILE STEP...
                       runs of one's own, detached, in ROOT.repo like `start`: ARMS_FILE (bash, sourced after
                       offline_gpu/arms.sh, whose helpers it may use) defines a function
                       arm_NAME for each, called in the copy with ARM_DIR=ROOT/NAME (its log, rc, t0 and t1
                       there) and PORT_BASE, 100 ports of its own (ROOT/NAME/port: the same on each run of the
                       arm, apart from every other arm's in ROOT); the STEPs run one after the other, and a step
                       A+B runs A and B at once (`run /tmp/r K.sh K0 K1 R1+R2`). A later `run` in the same ROOT
                       copies the checkout afresh (arms still at work keep their copy): to run again an arm that
                       failed or was stopped, whose earlier log is kept as log.1, log.2, ...
  wait ROOT [SECONDS]  until the run ends or SECONDS pass (560): prints each run's summary (or each arm's exit
                       status, time and log's end) and the log's end; exits 0 while it runs or when it ended
                       well, 1 when it failed
  await ROOT ARM FILE [SECONDS]
                       until ROOT/ARM/FILE exists (exit 0), the arm ends without it (exit 4, with the arm's exit
                       status and log's end) or SECONDS pass (560; exit 3): a call that packs a run once its
                       stage is saved, and says so at once where the arm stopped early
  pack ROOT PACK_DIR [--slim]
                       ROOT without models, checkpoints, training games and parquet (the LoRA adapters, every
                       evaluation, report, summary and log stay) as PACK_DIR/pack.tar.xz.NN, 15 MiB each,
                       beside pack.sha256 (the whole stream's) and pack.count; --slim leaves the adapters out
                       too: the results so far, small enough to bring back while the run goes on
  give PACK_DIR OUT_DIR N   batch N (0, 1, ...) of the pieces, 4 of them, with pack.sha256 and pack.count,
                       into OUT_DIR: what one call may bring back (8 files, 64 MiB)
  unpack ROOT DIR      every call: DIR's pieces (of any batches) gathered in $TMPDIR/pack-in/SHA256, apart from
                       any other pack's; once all have come, checked and unpacked into ROOT; exit 3 while
                       some are missing. A run of the loop resumed there folds each finished stage's adapter
                       back onto the model it trained from as it comes to it (`gpu_learning.sh ... restore`
                       folds every run's at once)
  kernels OUT_DIR      the kernels this machine compiled on first use (SGLang's tvm-ffi builds, Triton's and
                       CUDA's caches under $HOME) as OUT_DIR/kernels.tar.xz. Put that file into DIST before
                       `parts`: gpu_setup.sh restores it, and the next machine's first SGLang start skips the
                       compilation
USAGE
}
case ${1:-} in -h|--help) usage; exit 0 ;; esac
(($# >= 2)) || { usage >&2; exit 2; }
cmd=$1 ROOT=$2
shift 2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# where, under $HOME, the GPU stack keeps what it compiles on first use
KERNEL_CACHES=(.cache/tvm-ffi .cache/sglang .cache/flashinfer .cache/torch_extensions .triton/cache .nv/ComputeCache)

# ROOT.repo: this run's copy of the checkout, not the call's tree, which the machine replaces between calls (nor
# another run's); `make gpu`'s environments stay in the checkout and are linked in, where the scripts find them.
# The committed results come along: an arm may start from an adapter committed there
copy_tree() {
  rm -rf "$1" && mkdir -p "$1"
  tar -C "$REPO" --exclude=./.git --exclude='./.gpu*' --exclude='./.venv*' -cf - . \
    | tar -C "$1" -xf -
}
# (a copy that an earlier call's arms still work in is moved aside, not removed: they go on in it)
copy_checkout() {
  local copy=$ROOT.repo venv
  copy_tree "$copy.new" && mkdir -p "$ROOT/logs"
  for venv in .venv-serve .venv-train; do [[ ! -d $REPO/$venv ]] || ln -s "$REPO/$venv" "$copy.new/$venv"; done
  [[ ! -e $copy ]] || mv "$copy" "$copy.$(date +%s%N)"
  mv "$copy.new" "$copy" && rm -f "$ROOT/logs/lease.rc"
}

# one arm of `run`: arm_NAME of the arms file, in the copy, its exit status and times beside its log
run_arm() {
  local name=$1 dir=$ROOT/$1 n=1
  mkdir -p "$dir" && rm -f "$dir/rc" && date +%s > "$dir/t0"
  if [[ -e $dir/log ]]; then # an earlier run of the arm (one that failed, or was stopped to be run again)
    while [[ -e $dir/log.$n ]]; do n=$((n + 1)); done
    mv "$dir/log" "$dir/log.$n"
  fi
  (cd "$ROOT.repo" && ARM_DIR=$dir PORT_BASE=$2 "arm_$name") > "$dir/log" 2>&1 < /dev/null
  echo $? > "$dir/rc" && date +%s > "$dir/t1"
}

# an arm's first port, kept in ROOT/NAME/port: the same on every run of the arm, and apart from every other arm's
# in ROOT, those that another `run` call started on this machine included (a server of theirs on an arm's port
# would answer its /health)
arm_port() {
  local file=$ROOT/$1/port last=29900 other
  if [[ ! -s $file ]]; then
    for other in "$ROOT"/*/port; do
      [[ -s $other ]] && (($(cat "$other") > last)) && last=$(cat "$other")
    done
    mkdir -p "$ROOT/$1" && echo $((last + 100)) > "$file"
  fi
  cat "$file"
}

# every step in turn, the arms of a step (A+B) at once; the run fails when any arm does
run_steps() {
  local step name port failed=0
  for step in "$@"; do
    for name in ${step//+/ }; do
      port=$(arm_port "$name") # here, not in the background: one arm at a time takes the next ports
      run_arm "$name" "$port" &
    done
    wait
    for name in ${step//+/ }; do [[ $(cat "$ROOT/$name/rc") == 0 ]] || failed=1; done
  done
  return $failed
}
case "$cmd" in
  dist)
    mkdir -p "$ROOT"
    if [[ ${INSTALL:-bundles} == wheels ]]; then
      make -C "$REPO" wheelhouse DIR="$ROOT/wheels"
    else
      for kind in serve train; do
        [[ -f $ROOT/site_$kind.tar.xz ]] || bash "$REPO/gpu/build_bundle.sh" "$kind" "$ROOT"
      done
    fi
    if ! compgen -G "$ROOT/*.gguf.part-*" > /dev/null; then
      bash "$REPO/offline_gpu/prepare_model.sh" fetch "$ROOT/model"
      ln -f "$ROOT"/model/*.gguf.part-* "$ROOT"/model/*.gguf.sha256 "$ROOT/"
    fi
    cp -f "$REPO/gpu/install_site.sh" "$REPO/offline_gpu/prepare_model.sh" "$REPO/offline_gpu/gguf_to_hf.py" "$ROOT/"
    ls -l "$ROOT" ;;
  parts)
    # shellcheck source=offline_gpu/call_room.sh
    source "$REPO/offline_gpu/call_room.sh"
    part_mib=${PART_MIB:-$(call_room_mib)}
    ((part_mib > 0)) || { echo "gpu_lease: $(no_room part PART_MIB)" >&2; exit 1; }
    rm -rf "$1" && mkdir -p "$1"
    tar -C "$ROOT" --exclude=./.work --exclude=./model -cf "$1/all.tar" .
    split -b "${part_mib}M" -d -a 2 "$1/all.tar" "$1/part-"
    sha256sum "$1/all.tar" | cut -d' ' -f1 > "$1/all.sha256"
    rm "$1/all.tar"
    count=$(find "$1" -name 'part-*' | wc -l)
    for part in "$1"/part-*; do
      dir=$1/p${part##*-}
      mkdir -p "$dir" && mv "$part" "$dir/" && cp "$1/all.sha256" "$dir/" && echo "$count" > "$dir/parts"
    done
    rm "$1/all.sha256"
    du -sh "$1"/p* ;;
  install)
    copy_tree "$ROOT" && rm -f "$ROOT.rc"
    # expanded by the detached shell, its $0 DIR; gpu_setup.sh exports MODEL only once it has installed everything
    # shellcheck disable=SC2016
    setsid bash -c 'cd "$0" && unset MODEL && source offline_gpu/gpu_setup.sh && [[ -n ${MODEL:-} ]]; echo $? > "$0.rc"' \
      "$ROOT" > "$ROOT.log" 2>&1 < /dev/null &
    echo "installing in $ROOT (pid $!; log $ROOT.log)" ;;
  installed)
    end=$((SECONDS + ${1:-560}))
    while [[ ! -e $ROOT.rc ]] && ((SECONDS < end)); do sleep 3; done
    tail -n 5 "$ROOT.log" 2> /dev/null || true
    [[ -e $ROOT.rc ]] || { echo "installed: $ROOT is still installing" >&2; exit 3; }
    exit "$(cat "$ROOT.rc")" ;;
  start)
    copy_checkout
    copy=$ROOT.repo
    export PYTHONPATH=$copy${PYTHONPATH:+:$PYTHONPATH}
    # shellcheck disable=SC2016  # expanded by the detached shell: its $0 is ROOT, $1 the copy, then the phases
    setsid bash -c 'bash "$1/offline_gpu/gpu_learning.sh" "${@:2}"; echo $? > "$0/logs/lease.rc"' \
      "$ROOT" "$copy" "$MODEL" "$ROOT" "$@" > "$ROOT/logs/lease.log" 2>&1 < /dev/null &
    echo "started gpu_learning.sh $* (pid $!)" ;;
  run)
    (($# >= 2)) || { usage >&2; exit 2; }
    arms=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    shift
    copy_checkout
    export PYTHONPATH=$ROOT.repo${PYTHONPATH:+:$PYTHONPATH}
    # shellcheck source=offline_gpu/arms.sh
    source "$ROOT.repo/offline_gpu/arms.sh"
    # shellcheck disable=SC1090
    source "$arms"
    for step in "$@"; do
      for name in ${step//+/ }; do
        [[ $(type -t "arm_$name") == function ]] || { echo "run: $arms defines no arm_$name" >&2; exit 2; }
      done
    done
    export -f arm_port run_arm run_steps
    export ROOT ARMS=$arms
    # shellcheck disable=SC2016  # expanded by the detached shell, which reads the arms file again
    setsid bash -c 'source "$ROOT.repo/offline_gpu/arms.sh" && source "$ARMS" && run_steps "$@"
      echo $? > "$ROOT/logs/lease.rc"' run "$@" \
      > "$ROOT/logs/lease.log" 2>&1 < /dev/null &
    echo "started $* from $arms (pid $!)" ;;
  wait)
    end=$((SECONDS + ${1:-560}))
    while [[ ! -e $ROOT/logs/lease.rc ]] && ((SECONDS < end)); do sleep 10; done
    for summary in "$ROOT"/*/summary.md; do [[ -e $summary ]] && { echo "== $summary"; cat "$summary"; }; done
    for arm in "$ROOT"/*/t0; do
      [[ -e $arm ]] || continue
      arm=$(dirname "$arm")
      echo "== ${arm##*/}: exit $(cat "$arm/rc" 2> /dev/null || echo -), $(($(cat "$arm/t1" 2> /dev/null || date +%s) - $(cat "$arm/t0"))) s"
      tail -n 3 "$arm/log" | cut -c1-240
    done
    tail -n 15 "$ROOT/logs/lease.log"
    [[ ! -e $ROOT/logs/lease.rc ]] || { echo "finished: exit $(cat "$ROOT/logs/lease.rc")"; exit "$(cat "$ROOT/logs/lease.rc")"; } ;;
  await)
    arm=$ROOT/$1 end=$((SECONDS + ${3:-560}))
    until [[ -e $arm/$2 ]]; do
      if [[ -e $arm/rc && ! -e $arm/$2 ]]; then
        echo "await: ${arm##*/} ended (exit $(cat "$arm/rc")) without $2" >&2
        tail -n 5 "$arm/log" | cut -c1-240 >&2
        exit 4
      fi
      ((SECONDS < end)) || { echo "await: no $arm/$2 after ${3:-560} s" >&2; exit 3; }
      sleep 2
    done
    echo "await: $arm/$2" ;;
  pack)
    rm -rf "$1" && mkdir -p "$1"
    slim=()
    [[ ${2:-} != --slim ]] || slim=(--exclude=lora_adapter)
    tar -C "$ROOT" --exclude='checkpoints' --exclude='gen/games.jsonl' --exclude='*.parquet' \
      --exclude='model*.safetensors' "${slim[@]}" -cf - . | xz -T0 -6 | split -b 15M -d -a 2 - "$1/pack.tar.xz."
    cat "$1"/pack.tar.xz.* | sha256sum | cut -d' ' -f1 > "$1/pack.sha256"
    find "$1" -name 'pack.tar.xz.*' | wc -l > "$1/pack.count"
    ls -l "$1" ;;
  give)
    first=$((4 * $2))
    cp "$ROOT/pack.sha256" "$ROOT/pack.count" "$1/"
    for ((n = first; n < first + 4 && n < $(cat "$ROOT/pack.count"); n++)); do cp "$ROOT/pack.tar.xz.$(printf %02d "$n")" "$1/"; done
    ls -l "$1" ;;
  unpack)
    # the pieces of one pack (named by its checksum) gather apart from any other pack's
    [[ -s $1/pack.sha256 ]] || { echo "unpack: no pack.sha256 in $1" >&2; exit 1; }
    gather=${TMPDIR:-/tmp}/pack-in/$(cat "$1/pack.sha256")
    mkdir -p "$gather" "$ROOT"
    cp -f "$1"/pack.* "$gather/"
    have=$(find "$gather" -name 'pack.tar.xz.*' | wc -l)
    ((have >= $(cat "$gather/pack.count"))) || { echo "unpack: have $have of $(cat "$gather/pack.count") pieces"; exit 3; }
    [[ $(cat "$gather"/pack.tar.xz.* | sha256sum | cut -d' ' -f1) == $(cat "$gather/pack.sha256") ]] \
      || { echo "unpack: checksum mismatch of the joined pieces" >&2; exit 1; }
    cat "$gather"/pack.tar.xz.* | xz -d | tar -C "$ROOT" -xf - && echo "unpacked into $ROOT" ;;
  kernels)
    mkdir -p "$ROOT"
    found=()
    for dir in "${KERNEL_CACHES[@]}"; do [[ -d $HOME/$dir ]] && found+=("$dir"); done
    du -sh "$HOME"/.cache/* "$HOME/.triton" "$HOME/.nv" 2> /dev/null || true
    ((${#found[@]})) || { echo "kernels: none of ${KERNEL_CACHES[*]} under $HOME" >&2; exit 1; }
    tar -C "$HOME" -cf - "${found[@]}" | xz -T0 -6 > "$ROOT/kernels.tar.xz"
    echo "kernels: ${found[*]} -> $ROOT/kernels.tar.xz ($(du -h "$ROOT/kernels.tar.xz" | cut -f1))" ;;
  *) usage >&2; exit 2 ;;
esac
