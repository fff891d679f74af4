"""`selfplay-gen doctor` on CPU: a fake `nvidia-smi` and fake environments (a real Python that sees only a
directory of package metadata and stub modules, as an environment's site-packages would hold them), so
each verdict, exit status and fix is checked without a GPU."""

from __future__ import annotations

import ctypes
import json
import socket
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfplay_gen import doctor, environments
from selfplay_gen.cli import main

TORCH_STUB = """
__version__ = {version!r}
class version:
    cuda = {cuda!r}
class cuda:
    @staticmethod
    def is_available():
        return {available!r}
    @staticmethod
    def device_count():
        return {devices!r}
"""
try:
    ctypes.CDLL("libnuma.so.1")
    HAS_LIBNUMA = True
except OSError:
    HAS_LIBNUMA = False
# the modules serving.py probes, and what a full install holds
FULL = ("sgl_kernel.flash_ops", "flashinfer_cubin", "xgrammar")


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def fake_env(
    root: Path,
    pins: dict[str, str],
    modules=FULL,
    torch: str = "2.11.0+cu130",
    cuda: str | None = "13.0",
    available: bool = True,
) -> str:
    """A Python whose packages are exactly `pins` (metadata), a torch stub and the `modules` named."""
    site = root / "site"
    site.mkdir(parents=True)
    for name, version in {**pins, "torch": torch}.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (site / "torch").mkdir()
    stub = TORCH_STUB.format(version=torch, cuda=cuda, available=available, devices=1 if available else 0)
    (site / "torch" / "__init__.py").write_text(stub)
    for module in modules:
        *packages, leaf = module.split(".")
        where = site
        for package in packages:
            where = where / package
            where.mkdir(exist_ok=True)
            (where / "__init__.py").touch()
        (where / leaf).mkdir(exist_ok=True)
        (where / leaf / "__init__.py").touch()
    if "sgl_kernel" not in {m.split(".")[0] for m in modules} and "sglang" in pins:
        (site / "sgl_kernel").mkdir()  # sgl-kernel installed, slimmed of its FlashAttention-3 ops
        (site / "sgl_kernel" / "__init__.py").touch()
    return str(executable(root / "python", f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n'))


def nvidia_smi(bin_dir: Path, cuda: str = "13.0") -> None:
    executable(
        bin_dir / "nvidia-smi",
        "#!/bin/sh\n"
        'case "$1" in --query-gpu=*) echo "0, NVIDIA H200, 143771, 771, 580.159.03"; exit 0;; esac\n'
        f'echo "| NVIDIA-SMI 580.159.03    Driver Version: 580.159.03    CUDA Version: {cuda}     |"\n',
    )


def free_port() -> int:
    while True:
        with socket.socket() as one:
            one.bind(("127.0.0.1", 0))
            port = one.getsockname()[1]
        with socket.socket() as two:
            try:
                two.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A bin directory (first on PATH) with nvcc, c++ and ninja, and room to add nvidia-smi."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("nvcc", "c++", "ninja"):
        executable(bin_dir / tool, "#!/bin/sh\nexit 0\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(doctor, "DISK_FAIL_GIB", 0)
    monkeypatch.setattr(doctor, "DISK_WARN_GIB", 0)
    monkeypatch.setattr(environments, "TESTED_PYTHON", sys.version_info[:2])  # the fake environments' Python
    return bin_dir


def run_doctor(tmp_path, *args):
    done = CliRunner().invoke(main, ["doctor", "--port", str(free_port()), "--run-dir", str(tmp_path / "run"), *args])
    return done.exit_code, done.output.splitlines()


def line(output: list[str], name: str) -> str:
    found = [text for text in output if text[6:28].strip() == name]
    assert len(found) == 1, (name, output)
    return found[0]


def model_dir(path: Path, shards=("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    weight_map = {f"layer.{i}": shard for i, shard in enumerate(shards)}
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    for shard in shards:
        (path / shard).write_bytes(b"")
    (path / "tokenizer.json").write_text("{}")
    (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    return path


@pytest.mark.skipif(not HAS_LIBNUMA, reason="this machine has no libnuma.so.1, which the check loads for real")
def test_a_machine_with_the_tested_stack_is_ready(tmp_path, machine, monkeypatch):
    nvidia_smi(machine)
    monkeypatch.setenv("SGLANG_PYTHON", fake_env(tmp_path / "serve", environments.SERVE.pins(with_kernels=False)))
    monkeypatch.setenv("VERL_PYTHON", fake_env(tmp_path / "train", environments.TRAIN.pins(with_kernels=False)))
    code, output = run_doctor(tmp_path, "--model", str(model_dir(tmp_path / "model")))
    assert code == 0, output
    assert output[-1] == "verdict: ready: the loop runs as tested"
    assert all(text.startswith("ok ") for text in output[:-1]), output
    assert "NVIDIA H200, 143771 MiB, 143000 MiB free" in line(output, "gpu 0")
    assert "580.159.03, CUDA 13.0" in line(output, "driver")
    assert "2.11.0+cu130, CUDA 13.0, sees 1 GPU(s)" in line(output, "serve torch")
    assert "from VERL_PYTHON" in line(output, "train")
    assert "as tested (verl 0.9.1)" in line(output, "train packages")
    assert "SGLang's own default" in line(output, "serve sglang attention")


def test_the_fresh_h200s_fallbacks_and_missing_kernels_are_each_named_with_their_fix(tmp_path, machine, monkeypatch):
    """The serve bundle as first installed: sgl-kernel without its FlashAttention-3 ops, no flashinfer-cubin,
    no xgrammar. The loop runs, on SGLang's three fallbacks."""
    nvidia_smi(machine)
    monkeypatch.setenv("SGLANG_PYTHON", fake_env(tmp_path / "s", environments.SERVE.pins(with_kernels=False), ()))
    monkeypatch.setenv("VERL_PYTHON", fake_env(tmp_path / "t", environments.TRAIN.pins(with_kernels=False), ()))
    code, output = run_doctor(tmp_path)
    assert code == 0, output
    assert output[-1].startswith("verdict: ready, with 12 warning(s)")
    attention = line(output, "serve sglang attention")
    assert attention.startswith("warn") and "falls back to triton" in attention
    assert "fix: flashinfer-cubin" in attention and "the whole sglang-kernel wheel" in attention
    sampling = line(output, "serve sglang sampling")
    assert "falls back to pytorch (no prebuilt flashinfer kernels)" in sampling and "fix: flashinfer-cubin" in sampling
    grammar = line(output, "train sglang grammar")
    assert "falls back to none (no xgrammar" in grammar and "fix: xgrammar (gpu/requirements-kernels.txt" in grammar
    kernels = [text for text in output if text[6:28].strip() == "serve kernels"]
    assert [text[30:].split("  -> fix: ")[0] for text in kernels] == [
        "FlashAttention-3 ops of sgl-kernel: missing",
        "prebuilt flashinfer kernels: missing",
        "xgrammar: missing",
    ]
    assert all("fix: " in text for text in kernels)


def test_what_stops_the_loop_fails_with_its_fix(tmp_path, machine, monkeypatch):
    """No GPU driver, SGLang missing from the serving environment, a CPU torch in the training one, the
    port taken, a model with a shard missing: each a FAIL with its fix, and exit status 1."""
    serve_pins = environments.SERVE.pins(with_kernels=False)
    del serve_pins["sglang"]
    monkeypatch.setenv("SGLANG_PYTHON", fake_env(tmp_path / "s", serve_pins))
    train_pins = {**environments.TRAIN.pins(with_kernels=False), "transformers": "5.17.0"}
    cpu = fake_env(tmp_path / "t", train_pins, torch="2.11.0+cpu", cuda=None, available=False)
    monkeypatch.setenv("VERL_PYTHON", cpu)
    model = model_dir(tmp_path / "model")
    (model / "model-00002-of-00002.safetensors").unlink()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = CliRunner().invoke(
            main, ["doctor", "--port", str(port), "--run-dir", str(tmp_path), "--model", str(model)]
        )
    output = done.output.splitlines()
    assert done.exit_code == 1, output
    gpu = line(output, "gpu")
    assert gpu.startswith("FAIL") and "no nvidia-smi" in gpu and "fix: a machine with NVIDIA GPUs" in gpu
    packages = line(output, "serve packages")
    assert packages.startswith("FAIL") and f"missing 1 of {len(serve_pins) + 1}: sglang" in packages
    assert "fix: make gpu (or make gpu WHEELHOUSE=DIR" in packages
    assert not [text for text in output if "serve sglang" in text]  # nothing to probe without SGLang
    torch = line(output, "train torch")
    assert torch.startswith("FAIL") and "(a CPU build)" in torch and "fix: torch 2.11.0 built for CUDA" in torch
    versions = line(output, "train packages")
    assert versions.startswith("warn") and "transformers 5.17.0 (tested 5.9.0)" in versions
    ports = line(output, "ports")
    assert ports.startswith("FAIL") and f"in use: {port}" in ports and "another PORT" in ports
    shard = line(output, "model")
    assert shard.startswith("FAIL") and "missing model-00002-of-00002.safetensors" in shard
    failed = "gpu, serve packages, train torch, ports, model"
    assert output[-1] == f"verdict: the loop cannot run: 5 check(s) failed ({failed})"


def test_a_torch_built_for_a_newer_cuda_than_the_driver_fails(tmp_path, machine, monkeypatch):
    nvidia_smi(machine, cuda="12.8")
    monkeypatch.setenv("SGLANG_PYTHON", fake_env(tmp_path / "s", environments.SERVE.pins(with_kernels=False)))
    monkeypatch.setenv("VERL_PYTHON", fake_env(tmp_path / "t", environments.TRAIN.pins(with_kernels=False)))
    code, output = run_doctor(tmp_path)
    assert code == 1
    torch = line(output, "serve torch")
    assert "built for a newer CUDA than the driver's 12.8" in torch and "fix: a driver for CUDA 13.0" in torch


def test_an_environment_that_does_not_run_and_the_default_without_one(tmp_path, machine, monkeypatch):
    nvidia_smi(machine)
    monkeypatch.setenv("SGLANG_PYTHON", str(executable(tmp_path / "broken", "#!/bin/sh\nexit 3\n")))
    monkeypatch.delenv("VERL_PYTHON", raising=False)
    monkeypatch.setattr(environments, "REPO", tmp_path)  # no .venv-train there
    code, output = run_doctor(tmp_path)
    assert code == 1
    assert "does not run" in line(output, "serve") and "fix: make gpu" in line(output, "serve")
    assert "(python3: no .venv-train)" in line(output, "train")


def test_a_model_directory_is_complete_with_config_weights_tokenizer_and_template(tmp_path):
    model = model_dir(tmp_path / "m", shards=("model.safetensors",))
    assert doctor.model(model).status == "ok"
    (model / "tokenizer_config.json").write_text("{}")
    said = doctor.model(model)
    assert said.status == "FAIL" and "chat template" in said.detail
    (model / "chat_template.jinja").write_text("{{ messages }}")
    assert doctor.model(model).status == "ok"
    (model / "config.json").write_text("{not json")
    assert "config.json: not JSON" in doctor.model(model).detail
    assert "no config.json" in doctor.model(tmp_path / "elsewhere").detail


def test_a_long_list_of_missing_packages_stays_one_readable_line():
    names = [f"p{i}" for i in range(11)]
    assert doctor.listing(names) == "p0, p1, p2, p3, p4, p5, p6, p7 and 3 more"
    assert doctor.listing(names[:8]) == "p0, p1, p2, p3, p4, p5, p6, p7"
