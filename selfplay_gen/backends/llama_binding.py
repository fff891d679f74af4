"""The llama-cpp-python binding, imported with the settings every user of it needs: the `llamacpp`
backend, which samples through it, and `gguf_export`, which quantizes through it. Apart from both,
so that neither imports the other for it."""

from __future__ import annotations

import os

from .base import BackendError


def import_llama_cpp():
    """The `llama_cpp` module, or an error that says how to get it."""
    # OpenMP threads that wait by spinning starve each other on shared cores: with other work on
    # 2 cores, 2 spinning threads sampled 3.6 tokens/s where 1 thread sampled 19 (bench/results/cpu_engines/)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as err:
        raise BackendError(
            "the llamacpp backend needs llama-cpp-python (it builds llama.cpp from source, a few minutes): "
            'CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TOOLS=OFF" pip install llama-cpp-python; '
            f"or play with --backend local (transformers, slower) [{err}]"
        ) from None
    from llama_cpp import _logger

    _logger.set_verbose(False)  # llama.cpp logs every tensor it loads otherwise
    return llama_cpp
