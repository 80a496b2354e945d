"""The real-model lane: Aries against ``python -m llama_cpp.server`` serving Gemma 3 270M.

Marked ``slow``. One server per test session (per xdist worker), started on first use; every test
skips with one line when ``llama_cpp`` (the ``realmodel`` extra) or the model package is missing —
unless ``ARIES_REQUIRE_REALMODEL=1`` (set by ``.ci/run`` once it installed them): then it fails.
See ``tests/real_model/llama_server.py`` and ``tests/real_model/install.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.real_model.llama_server import LlamaServer, missing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "real_model" in item.nodeid.split("::")[0]:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    reason = missing()
    if reason is not None:
        if os.environ.get("ARIES_REQUIRE_REALMODEL") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    server = LlamaServer(tmp_path_factory.mktemp("llama-server")).start()
    yield server
    server.stop()
