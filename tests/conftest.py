"""Session-wide fixtures: the embedded model's tokenizer and directory (loaded once)."""
import pytest

from selfplay_gen import models


@pytest.fixture(scope="session")
def tokenizer():
    return models.load_tokenizer()


@pytest.fixture(scope="session")
def local_model_dir() -> str:
    return models.resolve(None)
