"""`make gpu` and `make wheelhouse` on CPU: the environments are made by real pip and venv from a
wheelhouse of small wheels built here (the GPU stack's own wheels are gigabytes), with the same layering
as on a GPU machine: pins without dependency resolution, a later set's pin replacing an earlier one, a
base Python's torch reused, kernels that are not to be had skipped."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from selfplay_gen import environments

REPO = Path(__file__).resolve().parent.parent


def wheel(directory: Path, name: str, version: str, module: str | None = None, more: dict | None = None) -> Path:
    """A pure-Python wheel of `module` (default: `name`) that records its version, with `more` files."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{module or name}/__init__.py": f"VERSION = {version!r}\n",
        **(more or {}),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    out = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return out


def installed(python: Path, *modules: str) -> list[str]:
    code = (
        "import importlib, sys\nfor m in sys.argv[1:]:\n    print(getattr(importlib.import_module(m), 'VERSION', 'x'))"
    )
    done = subprocess.run([str(python), "-c", code, *modules], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout whose gpu/ pins name small wheels, and a wheelhouse that holds them (but one kernel)."""
    pins, house = tmp_path / "gpu", tmp_path / "house"
    pins.mkdir()
    house.mkdir()
    (pins / "requirements-serve.txt").write_text("# the server\nsgl_fake==0.5.12\ntf_fake==5.6.0\n")
    (pins / "requirements-train.txt").write_text("verl_fake==0.9.1\ntf_fake==5.9.0  # replaces the server's\n")
    (pins / "requirements-kernels.txt").write_text("cubin_fake==0.6\nxgr_fake==0.2\n")
    for name, version in [("sgl_fake", "0.5.12"), ("tf_fake", "5.6.0"), ("tf_fake", "5.9.0")]:
        wheel(house, name, version)
    wheel(house, "verl_fake", "0.9.1")
    wheel(house, "cubin_fake", "0.6")  # xgr_fake is not to be had
    monkeypatch.setattr(environments, "REPO", tmp_path)
    monkeypatch.setattr(environments, "PINS", pins)
    return tmp_path, house


def base_python(root: Path, house: Path) -> Path:
    """A Python like a GPU image's: a venv (python3 there is one) that holds torch (this test environment's,
    seen through a .pth) and its own transformers, newer than either pin (the fake's 5.17.0)."""
    base = root / "base"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True)
    site = subprocess.run(
        [str(base / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "image.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    wheel(house, "tf_fake", "5.17.0")
    pip = [sys.executable, "-m", "pip", "--python", str(base / "bin" / "python"), "install", "-q", "--no-deps"]
    subprocess.run([*pip, "--no-index", "--find-links", str(house), "tf_fake==5.17.0"], check=True)
    return base / "bin" / "python"


def test_make_gpu_from_a_wheelhouse_layers_the_pins_and_reuses_the_base_torch(checkout):
    root, house = checkout
    base = base_python(root, house)
    torch = environments.Base.of(str(base)).torch
    assert torch, "the test environment has torch"
    (root / "gpu" / "requirements-base.txt").write_text(f"torch=={torch.split('+')[0]}\n")
    code = environments.main(["create", "--python", str(base), "--wheelhouse", str(house), "--no-doctor"])
    assert code == 0
    serve, train = root / ".venv-serve" / "bin" / "python", root / ".venv-train" / "bin" / "python"
    assert installed(serve, "sgl_fake", "tf_fake", "cubin_fake") == ["0.5.12", "5.6.0", "0.6"]
    assert installed(train, "sgl_fake", "tf_fake", "verl_fake", "cubin_fake") == ["0.5.12", "5.9.0", "0.9.1", "0.6"]
    assert installed(base, "tf_fake") == ["5.17.0"]  # shadowed in the environments, untouched in the base
    # the base Python's torch is seen, not installed; the checkout is on the path; the missing kernel was skipped
    where = "import sys, torch; print(torch.__file__); print(sys.path)"
    torch_file, path = subprocess.run(
        [str(train), "-c", where], capture_output=True, text=True, check=True, cwd="/"
    ).stdout.splitlines()
    assert not torch_file.startswith(str(root)) and repr(str(root)) in path
    assert not list((root / ".venv-train").rglob("xgr_fake*")) and not list((root / ".venv-train").rglob("torch"))
    # and the stages find them with no variable set
    assert environments.sglang_python() == str(serve)
    assert environments.verl_python() == environments.selfplay_python() == str(train)


def test_without_the_tested_torch_the_base_set_is_installed_and_a_missing_wheel_fails(checkout, capsys):
    root, house = checkout
    (root / "gpu" / "requirements-base.txt").write_text("torch==0.0.1\n")
    code = environments.main(["create", "--python", sys.executable, "--wheelhouse", str(house), "--no-doctor"])
    assert code == 1
    assert "requirements-base.txt" in capsys.readouterr().err  # the step that failed: no torch 0.0.1 in it
    wheel(house, "torch", "0.0.1")
    code = environments.main(["create", "--python", sys.executable, "--wheelhouse", str(house), "--no-doctor"])
    assert code == 0
    assert installed(root / ".venv-serve" / "bin" / "python", "torch", "tf_fake") == ["0.0.1", "5.6.0"]


def test_without_environments_every_stage_runs_python3(tmp_path, monkeypatch):
    monkeypatch.setattr(environments, "REPO", tmp_path)
    assert environments.sglang_python() == environments.verl_python() == environments.selfplay_python() == "python3"
    exports = environments.exports()
    shown = subprocess.run(
        ["bash", "-c", 'set -u; eval "$1"; echo "$SGLANG_PYTHON $VERL_PYTHON $SELFPLAY_PYTHON"', "-", exports],
        capture_output=True,
        text=True,
        env={**os.environ, "VERL_PYTHON": "/opt/verl/bin/python"},
        check=True,
    )
    assert shown.stdout.split() == ["python3", "/opt/verl/bin/python", "python3"]


def test_the_shipped_pins_are_exact_and_the_train_set_replaces_transformers():
    serve, train = environments.SERVE.pins(), environments.TRAIN.pins()
    assert serve["sglang"] == train["sglang"] and "verl" in train and "verl" not in serve
    assert serve["transformers"] != train["transformers"]
    assert environments.read_base_torch().count(".") == 2


def test_a_pin_that_is_not_exact_is_named_with_its_file_and_line(tmp_path):
    bad = tmp_path / "requirements-serve.txt"
    bad.write_text("# pins\nsglang>=0.5\n")
    with pytest.raises(ValueError, match=r"requirements-serve.txt:2: 'sglang>=0.5' is not an exact pin"):
        environments.read_pins(bad)


def test_make_wheelhouse_downloads_the_pins_from_local_wheels_without_an_index(tmp_path):
    """gpu/wheelhouse.sh on a copy of gpu/ whose pins name small wheels, pip taking them from FIND_LINKS."""
    gpu, local, house = tmp_path / "gpu", tmp_path / "local", tmp_path / "house"
    gpu.mkdir()
    local.mkdir()
    (gpu / "wheelhouse.sh").write_bytes((REPO / "gpu" / "wheelhouse.sh").read_bytes())
    (gpu / "requirements-serve.txt").write_text("sgl_fake==0.5.12\n")
    (gpu / "requirements-kernels.txt").write_text("cubin_fake==0.6  # the prebuilt kernels\n")
    for name, version in [("sgl_fake", "0.5.12"), ("sgl_fake", "0.5.13"), ("cubin_fake", "0.6")]:
        wheel(local, name, version)
    env = {**os.environ, "PYTHON": sys.executable, "FIND_LINKS": str(local), "PIP_NO_INDEX": "1"}
    done = subprocess.run(
        ["bash", str(gpu / "wheelhouse.sh"), str(house), "serve", "kernels"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in house.glob("*.whl")) == [
        "cubin_fake-0.6-py3-none-any.whl",
        "sgl_fake-0.5.12-py3-none-any.whl",
    ]
    assert "make gpu WHEELHOUSE=" in done.stdout
    (gpu / "requirements-train.txt").write_text("verl_fake>=0.9\n")
    refused = subprocess.run(
        ["bash", str(gpu / "wheelhouse.sh"), str(house), "train"], capture_output=True, text=True, env=env
    )
    assert refused.returncode == 1 and "not an exact pin" in refused.stderr and "verl_fake>=0.9" in refused.stderr


def test_a_bundle_is_the_pinned_set_installed_slimmed_and_packed(tmp_path):
    """gpu/build_bundle.sh on a copy of gpu/ whose serve pins are two small wheels, one of them an
    sglang-kernel with the members the bundle drops (FlashAttention-3 ops, sm100 ops, headers)."""
    gpu, local, out = tmp_path / "gpu", tmp_path / "local", tmp_path / "out"
    gpu.mkdir()
    local.mkdir()
    for name in ("build_bundle.sh", "wheelhouse.sh", "slim_wheel.py"):
        (gpu / name).write_bytes((REPO / "gpu" / name).read_bytes())
    (gpu / "requirements-serve.txt").write_text("sglang_kernel==0.4.2.post2\nsgl_fake==0.5.12\n")
    wheel(
        local,
        "sglang_kernel",
        "0.4.2.post2",
        module="sgl_kernel",
        more={
            "sgl_kernel/common_ops.abi3.so": "sm90",
            "sgl_kernel/flash_ops.abi3.so": "fa3",
            "sgl_kernel/sm100/common_ops.abi3.so": "blackwell",
            "include/ops.h": "header",
            "lib/libops.a": "static",
            "lib64/libops.so": "lib64",
        },
    )
    wheel(local, "sgl_fake", "0.5.12")
    env = {**os.environ, "PYTHON": sys.executable, "FIND_LINKS": str(local), "PIP_NO_INDEX": "1", "XZ_LEVEL": "-1"}
    done = subprocess.run(
        ["bash", str(gpu / "build_bundle.sh"), "serve", str(out)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(["tar", "-tJf", str(out / "site_serve.tar.xz")], capture_output=True, text=True, check=True)
    members = set(listed.stdout.split())
    assert {
        "sgl_kernel/common_ops.abi3.so",
        "sgl_fake/__init__.py",
        "sglang_kernel-0.4.2.post2.dist-info/RECORD",
    } <= members
    assert not [
        m for m in members if "flash_ops" in m or "sm100" in m or m.split("/")[0] in ("include", "lib", "lib64")
    ]
    checked = subprocess.run(["sha256sum", "-c", "site_serve.tar.xz.sha256"], cwd=out, capture_output=True)
    assert checked.returncode == 0
