# shellcheck shell=bash
# Set up the offline bundles on the GPU machine without network access.
#
#   source install_site.sh site_serve.tar.xz                     # SGLang server
#   source install_site.sh site_serve.tar.xz site_train.tar.xz   # + verl (train is a delta)
#
# Must be sourced (it exports variables into the current shell). It
#   * unpacks the bundle(s) into /tmp/site (skipped when the same bundles are already there;
#     a different combination wipes /tmp/site first). Packages of the second bundle that
#     exist in the first in another version (transformers) are removed first, file by file,
#     using the first bundle's RECORD;
#   * puts /tmp/site first on PYTHONPATH (this shadows the machine's own transformers and
#     tokenizers) and /tmp/site/bin last on PATH;
#   * uses libnuma from the system; only if it is missing, it unpacks a libnuma1_*.deb placed
#     next to the first bundle (if any) and adds it to LD_LIBRARY_PATH;
#   * sets CUDA_HOME (and nvcc on PATH) for the kernels SGLang / FlashInfer compile at runtime;
#   * sets the Hugging Face offline variables (and disables Ray usage reporting).
# Environment knobs: PYTHON (default python3), SITE_DIR (default /tmp/site).

(return 0 2>/dev/null) || { echo "install_site.sh: source this file, do not execute it" >&2; exit 1; }

_gpu_site_main() {
  local py=${PYTHON:-python3} site=${SITE_DIR:-/tmp/site} b stamp="" f
  if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: source install_site.sh SERVE_BUNDLE [TRAIN_BUNDLE]" >&2; return 2
  fi
  for b in "$@"; do
    [ -f "$b" ] || { echo "install_site.sh: no such bundle: $b" >&2; return 1; }
    stamp+="$(basename "$b") $(stat -c '%s %Y' "$b");"
  done
  command -v "$py" >/dev/null || { echo "install_site.sh: '$py' not found (set PYTHON=...)" >&2; return 1; }

  if [ -f "$site/.bundles" ] && [ "$(cat "$site/.bundles")" = "$stamp" ]; then
    echo "install_site.sh: $site already holds these bundles; not unpacking again" >&2
  else
    # optional integrity check against BUNDLE.sha256 next to each bundle
    for b in "$@"; do
      if [ -f "$b.sha256" ]; then
        (cd "$(dirname "$b")" && sha256sum -c --quiet "$(basename "$b").sha256") \
          || { echo "install_site.sh: checksum mismatch for $b" >&2; return 1; }
      fi
    done
    # only ever wipe a directory this script created (it holds .bundles) or an empty one
    if [ -e "$site" ] && [ ! -f "$site/.bundles" ] && [ -n "$(ls -A "$site" 2>/dev/null)" ]; then
      echo "install_site.sh: $site exists and was not created by this script; refusing to replace it" >&2
      return 1
    fi
    rm -rf "$site" && mkdir -p "$site" && echo incomplete > "$site/.bundles" || return 1
    echo "install_site.sh: unpacking $(basename "$1") into $site" >&2
    _gpu_site_untar "$py" "$1" "$site" || return 1
    if [ $# -eq 2 ]; then
      echo "install_site.sh: adding $(basename "$2")" >&2
      _gpu_site_replace "$py" "$2" "$site" || return 1
      _gpu_site_untar "$py" "$2" "$site" || return 1
    fi
    echo "$stamp" > "$site/.bundles"
  fi

  case ":${PYTHONPATH:-}:" in *":$site:"*) ;; *) export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}";; esac
  case ":$PATH:" in *":$site/bin:"*) ;; *) export PATH="$PATH:$site/bin";; esac

  # sgl_kernel's compiled ops link against libnuma.so.1
  if ! "$py" -c 'import ctypes; ctypes.CDLL("libnuma.so.1")' 2>/dev/null; then
    f=$(find "$(dirname "$1")" -maxdepth 1 -name 'libnuma1_*.deb' | sort | head -n 1)
    if [ -n "$f" ] && command -v dpkg-deb >/dev/null; then
      mkdir -p "$site/.numa" && dpkg-deb -x "$f" "$site/.numa" || return 1
      export LD_LIBRARY_PATH="$site/.numa/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "install_site.sh: using libnuma from $(basename "$f")" >&2
    else
      echo "install_site.sh: WARNING: libnuma.so.1 is missing and no libnuma1_*.deb lies next to the" \
           "bundle; importing sgl_kernel will fail" >&2
    fi
  fi

  # runtime-compiled kernels need nvcc, a host C++ compiler and ninja
  # (nvcc on PATH may be a wrapper script, so a candidate must hold bin/nvcc and the headers)
  if [ -z "${CUDA_HOME:-}" ]; then
    local cand cands=()
    command -v nvcc >/dev/null && cands+=("$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")")
    cands+=(/usr/local/cuda /usr/local/cuda-13*)
    for cand in "${cands[@]}"; do
      if [ -x "$cand/bin/nvcc" ] && [ -f "$cand/include/cuda_runtime.h" ]; then
        export CUDA_HOME=$cand; break
      fi
    done
  fi
  if [ -n "${CUDA_HOME:-}" ] && ! command -v nvcc >/dev/null && [ -x "$CUDA_HOME/bin/nvcc" ]; then
    export PATH="$CUDA_HOME/bin:$PATH"
  fi
  for f in nvcc c++ ninja; do
    command -v $f >/dev/null || echo "install_site.sh: WARNING: '$f' not found; runtime kernel compilation will fail" >&2
  done

  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
  export RAY_USAGE_STATS_ENABLED=0

  # report versions and check that the bundle's transformers/tokenizers win and import
  "$py" - "$site" <<'EOF'
import importlib.metadata as md, os, sys
site = os.path.realpath(sys.argv[1])
out = []
for name in ("torch", "sglang", "transformers", "tokenizers", "flashinfer-python", "verl", "ray"):
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    where = "bundle" if os.path.realpath(str(d.locate_file(""))) == site else "system"
    out.append(f"{name} {d.version} ({where})")
print("install_site.sh: " + ", ".join(out), file=sys.stderr)
try:
    import tokenizers, transformers
except Exception as exc:
    print(f"install_site.sh: WARNING: importing transformers failed: {exc!r}", file=sys.stderr)
else:
    for mod in (tokenizers, transformers):
        if not os.path.realpath(mod.__file__).startswith(site + os.sep):
            print(f"install_site.sh: WARNING: {mod.__name__} is imported from {mod.__file__}, "
                  "not from the bundle", file=sys.stderr)
EOF
  echo "install_site.sh: PYTHONPATH=$PYTHONPATH CUDA_HOME=${CUDA_HOME:-unset}" >&2
}

_gpu_site_untar() {  # PYTHON BUNDLE DEST
  if command -v xz >/dev/null; then
    tar -xJf "$2" -C "$3"
  else
    "$1" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2], filter="tar")' "$2" "$3"
  fi
}

_gpu_site_replace() {  # PYTHON BUNDLE SITE: uninstall projects the bundle brings in another version
  local names
  if command -v xz >/dev/null; then
    names=$(tar -tJf "$2" | sed -n 's#^\([^/]*\.dist-info\)/.*#\1#p' | sort -u)
  else
    names=$("$1" -c 'import sys, tarfile; print("\n".join(sorted({n.split("/")[0] for n in tarfile.open(sys.argv[1], "r:xz").getnames() if n.split("/")[0].endswith(".dist-info")})))' "$2")
  fi
  [ -n "$names" ] || { echo "install_site.sh: $2 holds no .dist-info directories" >&2; return 1; }
  # shellcheck disable=SC2086
  "$1" - "$3" $names <<'EOF'
import csv, glob, os, re, shutil, sys
site, incoming = os.path.realpath(sys.argv[1]), sys.argv[2:]
def project(dist_info):
    return re.sub(r"[-_.]+", "-", dist_info[: -len(".dist-info")].rsplit("-", 1)[0]).lower()
wanted = {project(d): d for d in incoming}
for d in sorted(os.listdir(site)):
    if not d.endswith(".dist-info") or d in incoming or project(d) not in wanted:
        continue
    dirs = set()
    with open(os.path.join(site, d, "RECORD"), newline="") as fh:
        for row in csv.reader(fh):
            if not row:
                continue
            path = os.path.realpath(os.path.join(site, row[0]))
            if not path.startswith(site + os.sep) or not os.path.isfile(path):
                continue
            os.remove(path)
            parent, stem = os.path.split(path)
            if stem.endswith(".py"):
                for pyc in glob.glob(os.path.join(parent, "__pycache__", stem[:-3] + ".*.pyc")):
                    os.remove(pyc)
            dirs.add(parent)
    shutil.rmtree(os.path.join(site, d), ignore_errors=True)
    for parent in sorted(dirs, key=len, reverse=True):
        while parent.startswith(site + os.sep):
            cache = os.path.join(parent, "__pycache__")
            if os.path.isdir(cache) and not os.listdir(cache):
                os.rmdir(cache)
            try:
                os.rmdir(parent)
            except OSError:
                break
            parent = os.path.dirname(parent)
    print(f"install_site.sh: replaced {d} by {wanted[project(d)]}", file=sys.stderr)
EOF
}

_gpu_site_main "$@"
_gpu_site_rc=$?
unset -f _gpu_site_main _gpu_site_untar _gpu_site_replace
eval "unset _gpu_site_rc; return $_gpu_site_rc"
