"""Backends are registered by name and imported only when used: the server backends run without
torch (a client machine need not have it), and an unknown name is refused with the known ones."""

import subprocess
import sys

import pytest

from selfplay_gen.backends.base import MODULES, backend_class


def imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in ('torch', 'transformers') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


def test_server_backends_do_not_import_torch():
    lookup = "from selfplay_gen.backends.base import backend_class\nbackend_class('sglang'); backend_class('openai')"
    assert imported_after(lookup) == set()
    assert "torch" in imported_after(lookup + "\nbackend_class('local')")
    assert "torch" not in imported_after(lookup + "\nbackend_class('llamacpp')")  # llama.cpp and numpy only


def test_every_name_resolves_to_its_class_and_unknown_names_are_refused():
    assert {name: backend_class(name).name for name in MODULES} == {name: name for name in MODULES}
    known = r"\['llamacpp', 'local', 'openai', 'sglang'\]"
    with pytest.raises(ValueError, match=r"unknown backend 'vllm'; choose one of " + known):
        backend_class("vllm")
