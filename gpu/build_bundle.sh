#!/usr/bin/env bash
# Build an offline install bundle for the GPU machine without network access.
#
#   bash gpu/build_bundle.sh serve OUT_DIR   -> OUT_DIR/site_serve.tar.xz   (SGLang server)
#   bash gpu/build_bundle.sh train OUT_DIR   -> OUT_DIR/site_train.tar.xz   (verl; delta on top of serve)
#
# A bundle is the pinned set installed into one directory and packed below 60 MiB (oversized wheels
# slimmed), for machines that take files of a limited size and use them through PYTHONPATH
# (gpu/install_site.sh). Where whole wheels can travel, a wheelhouse (gpu/wheelhouse.sh) and
# `make gpu WHEELHOUSE=DIR` give the same set in environments of their own, with the fast kernels.
#
# Runs on any Linux x86_64 machine with Python >= 3.9, a recent pip and access to PyPI.
# The target is fixed: CPython 3.12, manylinux x86_64 (glibc >= 2.34), torch 2.11 / CUDA 13
# already installed there. Steps:
#   1. gpu/wheelhouse.sh: every pin of requirements-KIND.txt for the target platform (cached in
#      OUT_DIR/.work, so re-runs only fetch what is missing);
#   2. (there too) the pins that PyPI only has as source distributions, built as pure-Python wheels;
#   3. slim the oversized wheels with slim_wheel.py (sglang-kernel, ray);
#   4. pip install --no-deps --no-compile --target STAGING from exactly that wheel set
#      (no index, no pip configuration), check that every pin landed, fix script shebangs;
#   5. pack STAGING into OUT_DIR/site_KIND.tar.xz (+ .sha256) and print its size.
#
# Environment knobs (all optional):
#   PYTHON       interpreter whose pip is used (default: python3)
#   FIND_LINKS   space-separated local wheel directories pip may reuse before downloading
#   XZ_LEVEL     xz preset (default: -9e)      XZ_THREADS  xz threads (default: 0 = auto)
#   KEEP_STAGING set to 1 to keep the unpacked staging directory after packing
set -euo pipefail

die() { echo "build_bundle: ERROR: $*" >&2; exit 1; }
log() { echo "build_bundle: $*" >&2; }

[ $# -eq 2 ] || die "usage: bash build_bundle.sh {serve|train} OUT_DIR"
KIND=$1
case "$KIND" in serve|train) ;; *) die "unknown bundle kind '$KIND' (use serve or train)";; esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REQ=$HERE/requirements-$KIND.txt
SLIM=$HERE/slim_wheel.py
[ -f "$REQ" ] || die "missing $REQ"
[ -f "$SLIM" ] || die "missing $SLIM"

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || die "python interpreter '$PY' not found (set PYTHON=...)"
"$PY" -m pip --version >/dev/null 2>&1 || die "'$PY -m pip' does not work"
for prog in tar xz sha256sum; do command -v $prog >/dev/null || die "'$prog' not found"; done
tar --version 2>/dev/null | grep -q 'GNU tar' || die "GNU tar is required (for reproducible archives)"

mkdir -p "$2"
DEST=$(cd "$2" && pwd)
WORK=$DEST/.work
DL=$WORK/wheels-$KIND        # downloaded wheels (cache, kept between runs)
SLIMMED=$WORK/slim           # slimmed copies
SET=$WORK/set-$KIND          # exactly the wheels that get installed
STAGE=$WORK/stage-$KIND      # pip --target directory that becomes the bundle
BUNDLE=$DEST/site_$KIND.tar.xz
mkdir -p "$DL" "$SLIMMED"

# Target platform: CPython 3.12 on x86_64 with glibc 2.34 or newer.
PLAT=(--python-version 3.12 --implementation cp --abi cp312)   # abi3 / none tags are implied
for minor in $(seq 34 -1 5); do PLAT+=(--platform "manylinux_2_${minor}_x86_64"); done
PLAT+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 --platform any)

# Wheels to slim: "<wheel file prefix>|<drop pattern> <drop pattern> ...".
#  sglang-kernel: flash_ops (FlashAttention-3, ~1 GiB unpacked; only loaded by the fa3
#    attention backend), the sm100 (Blackwell) ops, C/C++ headers and static libraries.
#    What is left runs on sm90 (H100/H200) with the triton attention backend.
#  ray: ray/jars is only for Java workers.
SLIM_RULES=(
  "sglang_kernel-0.4.2.post2-|sgl_kernel/flash_ops.abi3.so sgl_kernel/sm100/ include/ lib/*.a lib64/"
  "ray-2.60.0-|ray/jars/"
)

# ---------------------------------------------------------------- read the pins
PINS=()
while IFS= read -r line; do
  line=${line%%#*}; line=$(echo "$line" | tr -d '[:space:]')
  [ -z "$line" ] && continue
  [[ "$line" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$ ]] || die "not an exact pin in $REQ: '$line'"
  PINS+=("$line")
done < "$REQ"
[ ${#PINS[@]} -gt 0 ] || die "no pins in $REQ"
log "$KIND: ${#PINS[@]} pinned packages"

norm() { echo "$1" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g'; }
# wheel file name prefix for a pin: name with runs of -_. as "_", then "-VERSION-"
wheel_prefix() { local n=${1%%==*} v=${1#*==}; echo "$(echo "$n" | sed -E 's/[-_.]+/_/g')-$v-"; }
# the single wheel in directory $1 for pin $2 (fails on zero or several matches)
find_wheel() {
  local dir=$1 pin=$2 matches
  mapfile -t matches < <(find "$dir" -maxdepth 1 -type f -iname "$(wheel_prefix "$pin")*.whl" | sort)
  [ ${#matches[@]} -eq 1 ] || return 1
  echo "${matches[0]}"
}

# ---------------------------------------------------------------- 1. download (and build source-only pins)
log "downloading into $DL (already present files are reused)"
bash "$HERE/wheelhouse.sh" "$DL" "$KIND" > "$WORK/download-$KIND.log" 2>&1 \
  || { tail -n 30 "$WORK/download-$KIND.log" >&2; die "gpu/wheelhouse.sh failed (full log: $WORK/download-$KIND.log)"; }

# ---------------------------------------------------------------- 3. slim
slim_patterns_for() {  # print drop patterns if the wheel file $1 has a slimming rule
  local base rule; base=$(basename "$1")
  for rule in "${SLIM_RULES[@]}"; do
    case "$base" in "${rule%%|*}"*) echo "${rule#*|}"; return 0;; esac
  done
  return 1
}

rm -rf "$SET"; mkdir -p "$SET"
for pin in "${PINS[@]}"; do
  w=$(find_wheel "$DL" "$pin") || die "expected exactly one wheel for $pin in $DL (delete stale files there)"
  if pats=$(slim_patterns_for "$w"); then
    slimmed=$SLIMMED/$(basename "$w")
    if [ -f "$slimmed" ] && [ "$slimmed" -nt "$w" ] && [ "$slimmed" -nt "$SLIM" ] && [ "$slimmed" -nt "$HERE/build_bundle.sh" ]; then
      log "reusing slimmed $(basename "$w")"
    else
      drops=()
      for p in $pats; do drops+=(--drop "$p"); done
      "$PY" "$SLIM" "$w" "$SLIMMED" "${drops[@]}" >&2 || die "slimming $(basename "$w") failed"
    fi
    w=$slimmed
  fi
  ln -f "$w" "$SET/" 2>/dev/null || cp -f "$w" "$SET/"
done
[ "$(find "$SET" -name '*.whl' | wc -l)" -eq ${#PINS[@]} ] || die "wheel set size differs from the number of pins"

# ---------------------------------------------------------------- 4. install into staging
log "installing ${#PINS[@]} wheels into $STAGE"
rm -rf "$STAGE"
# No index and no pip configuration: only the wheels in $SET can be used.
env -i PATH="$PATH" HOME="${HOME:-/tmp}" TMPDIR="${TMPDIR:-/tmp}" LC_ALL=C.UTF-8 PIP_CONFIG_FILE=/dev/null \
  "$PY" -m pip install --disable-pip-version-check --no-warn-script-location --no-deps --no-compile \
  --no-index --find-links "$SET" --only-binary=:all: "${PLAT[@]}" --target "$STAGE" -r "$REQ" \
  > "$WORK/install-$KIND.log" 2>&1 \
  || { tail -n 30 "$WORK/install-$KIND.log" >&2; die "pip install --target failed (log: $WORK/install-$KIND.log)"; }

# every pin must be present exactly once, with the pinned version
mapfile -t dists < <(cd "$STAGE" && ls -d -- *.dist-info)
[ ${#dists[@]} -eq ${#PINS[@]} ] || die "expected ${#PINS[@]} .dist-info directories, found ${#dists[@]}"
for pin in "${PINS[@]}"; do
  want="$(norm "${pin%%==*}")==${pin#*==}"
  found=0
  for d in "${dists[@]}"; do
    b=${d%.dist-info}
    [ "$(norm "${b%-*}")==${b##*-}" = "$want" ] && { found=1; break; }
  done
  [ $found -eq 1 ] || die "pin $pin not found in the staging directory"
done

# console scripts name the build interpreter; make them use the target's python3
if [ -d "$STAGE/bin" ]; then
  for f in "$STAGE"/bin/*; do
    [ -f "$f" ] || continue
    head -c 2 "$f" | grep -q '#!' || continue
    sed -i -E '1s|^#!.*python[0-9.]*$|#!/usr/bin/env python3|' "$f"
  done
  build_py=$("$PY" -c 'import os, sys; print(os.path.realpath(sys.executable))')
  if grep -lF -e "$build_py" -e "$("$PY" -c 'import sys; print(sys.executable)')" "$STAGE"/bin/* >/dev/null 2>&1; then
    die "some scripts in bin/ still refer to the build machine's interpreter"
  fi
fi
find "$STAGE" -name direct_url.json -path '*.dist-info/*' -delete
grep -rlF -- "$WORK" "$STAGE" --include=RECORD --include=INSTALLER >/dev/null 2>&1 \
  && die "staging metadata refers to the build directory"

# ---------------------------------------------------------------- 5. pack
log "packing $(du -sh "$STAGE" | cut -f1) into $BUNDLE (xz ${XZ_LEVEL:--9e}; takes a few minutes)"
tmp=$BUNDLE.partial
trap 'rm -f "$tmp"' EXIT
mapfile -t entries < <(cd "$STAGE" && ls -A)
( cd "$STAGE" && LC_ALL=C tar --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime='2025-01-01 00:00:00 UTC' --format=gnu -cf - -- "${entries[@]}" ) \
  | xz "${XZ_LEVEL:--9e}" -T"${XZ_THREADS:-0}" -c > "$tmp"
xz -t "$tmp" || die "xz integrity check failed"
mv -f "$tmp" "$BUNDLE"
trap - EXIT
(cd "$DEST" && sha256sum "$(basename "$BUNDLE")" > "$(basename "$BUNDLE").sha256")
[ "${KEEP_STAGING:-0}" = 1 ] || rm -rf "$STAGE"

bytes=$(stat -c %s "$BUNDLE")
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "bundle: $BUNDLE"
echo "size:   $mib MiB ($bytes bytes), ${#PINS[@]} packages"
if [ "$bytes" -gt $((60 * 1024 * 1024)) ]; then
  echo "WARNING: $BUNDLE is larger than 60 MiB" >&2
fi
