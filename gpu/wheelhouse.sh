#!/usr/bin/env bash
# A wheelhouse of the GPU stack, built on a machine with a package index, for `make gpu WHEELHOUSE=DIR`
# (and gpu/build_bundle.sh) on one without:
#
#   bash gpu/wheelhouse.sh DIR [SET...]      (make wheelhouse DIR=...)
#
# SET names gpu/requirements-SET.txt: serve, train and kernels by default (the pinned sets, each wheel
# whole: the full sglang-kernel, flashinfer-cubin, xgrammar); `base` adds requirements-base.txt with its
# dependencies (torch and CUDA's libraries: several GiB), for machines without the tested torch.
# The target is fixed: CPython 3.12 on x86_64 with glibc 2.34 or newer. Pinned sets are downloaded
# without dependencies (`make gpu` installs them with --no-deps); pins published only as source
# distributions are built here as pure-Python wheels. Files already in DIR are reused.
#
# Environment knobs (optional): PYTHON (default python3), FIND_LINKS (space-separated local wheel
# directories pip may take wheels from before the index).
set -euo pipefail

die() { echo "wheelhouse: ERROR: $*" >&2; exit 1; }
log() { echo "wheelhouse: $*" >&2; }

(($# >= 1)) || die "usage: bash gpu/wheelhouse.sh DIR [serve|train|kernels|base ...]"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
DEST=$(cd "$1" && pwd)
shift
SETS=("$@")
((${#SETS[@]})) || SETS=(serve train kernels)
PY=${PYTHON:-python3}
"$PY" -m pip --version > /dev/null 2>&1 || die "'$PY -m pip' does not work (set PYTHON=...)"

# Target platform: CPython 3.12 on x86_64 with glibc 2.34 or newer.
PLAT=(--python-version 3.12 --implementation cp --abi cp312)   # abi3 / none tags are implied
for minor in $(seq 34 -1 5); do PLAT+=(--platform "manylinux_2_${minor}_x86_64"); done
PLAT+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 --platform any)
# Pins that PyPI publishes only as source distributions; built here as pure-Python wheels.
SDIST_ONLY="antlr4-python3-runtime"
FL=()
for d in ${FIND_LINKS:-}; do FL+=(--find-links "$d"); done

norm() { echo "$1" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g'; }
is_sdist_only() { local n; n=$(norm "${1%%==*}"); for s in $SDIST_ONLY; do [[ $n == "$(norm "$s")" ]] && return 0; done; return 1; }
# pins of a requirements file, one a line (comments and blank lines dropped)
pins() { sed -e 's/#.*//' -e 's/[[:space:]]//g' "$1" | grep -v '^$' || true; }

for set in "${SETS[@]}"; do
  req=$HERE/requirements-$set.txt
  [[ -f $req ]] || die "no $req (sets: serve, train, kernels, base)"
  log "$set: $(pins "$req" | wc -l) requirements into $DEST"
  if [[ $set == base ]]; then   # not pins: resolved with their dependencies, for the target
    "$PY" -m pip download --disable-pip-version-check --only-binary=:all: "${PLAT[@]}" "${FL[@]}" -d "$DEST" -r "$req" >&2 \
      || die "pip download of $req failed"
    continue
  fi
  binary=$DEST/.req-$set-binary.txt
  : > "$binary"
  while IFS= read -r pin; do
    [[ $pin =~ ^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$ ]] || die "not an exact pin in $req: '$pin'"
    if ! is_sdist_only "$pin"; then echo "$pin" >> "$binary"; continue; fi
    name=$(echo "${pin%%==*}" | sed -E 's/[-_.]+/_/g')
    if compgen -G "$DEST/${name}-${pin#*==}-*.whl" > /dev/null; then continue; fi
    log "building a wheel of $pin from its source distribution"
    "$PY" -m pip wheel --disable-pip-version-check --no-deps --no-binary "${pin%%==*}" "${FL[@]}" -w "$DEST" "$pin" >&2 \
      || die "building $pin failed"
  done < <(pins "$req")
  "$PY" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: "${PLAT[@]}" "${FL[@]}" \
    -d "$DEST" -r "$binary" >&2 || die "pip download of $req failed"
  rm -f "$binary"
done
echo "wheelhouse: $DEST holds $(find "$DEST" -maxdepth 1 -name '*.whl' | wc -l) wheels ($(du -sh "$DEST" | cut -f1)); on the machine without an index: make gpu WHEELHOUSE=$DEST"
