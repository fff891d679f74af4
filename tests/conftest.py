"""Session-wide fixtures: the embedded model's tokenizer and the raw model's directory (loaded once).

Backend and loop tests run the raw SmolLM2-135M-Instruct: they test plumbing (batching, budgets,
multi-turn contexts) with short turns, which the raw model's invalid moves give; the default, warm-
started model is tested playing in test_embedded_model.py."""

import pytest

from selfplay_gen import models


@pytest.fixture(scope="session")
def tokenizer():
    return models.load_tokenizer()


@pytest.fixture(scope="session")
def local_model_dir() -> str:
    return models.resolve(models.RAW_MODEL)
