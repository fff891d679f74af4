"""offline_gpu/gpu_serve.sh's start of an SGLang server, with a stand-in `python3` first on PATH whose
`sglang.launch_server` fails or serves /health as a test asks: a start that found too little GPU memory is
tried again, any other exit fails at once with the server's log, and `stop` ends the server (shellcheck:
test_scripts.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_sglang import free_port

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "offline_gpu" / "gpu_serve.sh"

# `python3 -m sglang.launch_server ... --port P`: the Nth start (counted in $STUB_DIR/starts) prints the
# line $STUB_DIR/fail.N holds and exits 1 when that file exists, else answers /health on P until killed;
# `python3 -m selfplay_gen.serving ...` writes its arguments to $STUB_DIR/serving_args
STUB = """#!/usr/bin/env bash
if [[ "$2" == selfplay_gen.serving ]]; then echo "$@" > "$STUB_DIR/serving_args"; echo "--tp 1"; exit 0; fi
n=$(( $(cat "$STUB_DIR/starts" 2> /dev/null || echo 0) + 1 ))
echo "$n" > "$STUB_DIR/starts"
if [[ -f "$STUB_DIR/fail.$n" ]]; then cat "$STUB_DIR/fail.$n"; exit 1; fi
port=${@: -1}
for ((i = 1; i <= $#; i++)); do [[ ${!i} == --port ]] && { j=$((i + 1)); port=${!j}; }; done
exec "$REAL_PYTHON" -c '
import http.server, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
' "$port"
"""

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="gpu_serve.sh asks /health with curl")


@pytest.fixture
def serve(tmp_path):
    """Run gpu_serve.sh against the stand-in; stops whatever it started afterwards."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(STUB)
    (bin_dir / "python3").chmod(0o755)
    port = free_port()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_DIR": str(tmp_path)}
    env |= {"REAL_PYTHON": sys.executable, "PORT": str(port), "MODEL": str(tmp_path / "model"), "RETRY_WAIT_S": "0"}

    def run(*args: str, **settings: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SCRIPT), *args], env=env | settings, capture_output=True, text=True, timeout=60
        )

    run.port = port  # type: ignore[attr-defined]
    yield run
    run("stop")
    for name in ("log", "pid"):
        Path(f"/tmp/sglang-{port}.{name}").unlink(missing_ok=True)


def starts(tmp_path: Path) -> int:
    return int((tmp_path / "starts").read_text())


def test_a_start_short_of_memory_is_tried_again_and_stop_ends_the_server(serve, tmp_path):
    (tmp_path / "fail.1").write_text("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")
    result = serve()
    assert result.returncode == 0, result.stderr
    assert "too little free GPU memory (try 1 of 3)" in result.stderr and f"up on {serve.port}" in result.stderr
    assert starts(tmp_path) == 2
    assert serve().returncode == 0 and starts(tmp_path) == 2  # already up: not started again

    assert serve("stop").returncode == 0
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline
        and subprocess.run(["curl", "-sf", f"http://127.0.0.1:{serve.port}/health"]).returncode == 0
    ):
        time.sleep(0.2)
    assert subprocess.run(["curl", "-sf", f"http://127.0.0.1:{serve.port}/health"]).returncode != 0


def test_a_server_that_exits_otherwise_fails_at_once_with_its_log(serve, tmp_path):
    (tmp_path / "fail.1").write_text("ValueError: unknown model architecture\n")
    started = time.monotonic()
    result = serve()
    assert result.returncode == 1 and time.monotonic() - started < 30
    assert "unknown model architecture" in result.stderr and "exited before /health answered" in result.stderr
    assert starts(tmp_path) == 1


def test_memory_is_tried_only_start_tries_times(serve, tmp_path):
    for n in (1, 2):
        (tmp_path / f"fail.{n}").write_text("RuntimeError: Not enough memory.\n")
    result = serve(START_TRIES="2")
    assert result.returncode == 1 and starts(tmp_path) == 2
    assert "(try 1 of 2)" in result.stderr and "exited before /health answered" in result.stderr


def test_the_server_runs_in_sglangs_own_environment_and_gets_its_arguments(serve, tmp_path):
    """With `make gpu`'s environments (gpu_setup.sh's SGLANG_PYTHON), python3 is the training one: the server
    and the choice of its arguments are SGLang's environment's."""
    sglang_python = tmp_path / "sglang-env-python"
    sglang_python.write_text(
        f'#!/usr/bin/env bash\necho "$@" > "$STUB_DIR/ran_in_sglang_env"\nexec {tmp_path}/bin/python3 "$@"\n'
    )
    sglang_python.chmod(0o755)
    result = serve(SGLANG_PYTHON=str(sglang_python))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ran_in_sglang_env").read_text().startswith("-m sglang.launch_server")
    assert f"--python {sglang_python}" in (tmp_path / "serving_args").read_text()
