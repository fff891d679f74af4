"""A backend whose start fails releases what it opened: no aiohttp session is left unclosed
(aiohttp would print "Unclosed client session" and the session's repr after the run's error)."""

import aiohttp
import pytest
from fake_sglang import free_port

from selfplay_gen.backends.base import BackendError, BackendOptions, backend_class


@pytest.fixture
def sessions(monkeypatch):
    """Every aiohttp session opened while the test runs."""
    opened: list[aiohttp.ClientSession] = []
    init = aiohttp.ClientSession.__init__

    def tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(aiohttp.ClientSession, "__init__", tracked)
    return opened


@pytest.mark.parametrize("name, says", [("sglang", "cannot reach SGLang"), ("openai", "failed after 2 attempts")])
async def test_a_start_that_fails_closes_its_session(sessions, name, says):
    options = BackendOptions(
        base_urls=(f"http://127.0.0.1:{free_port()}",), unreachable_s=0.2, max_retries=1, retry_backoff_s=0.01
    )
    with pytest.raises(BackendError, match=says):
        async with backend_class(name)(options, None):
            pass
    assert sessions and all(session.closed for session in sessions)
