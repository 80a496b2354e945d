"""Fixtures: a scripted Ollama server and a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.models.servers import ScriptedServer


@pytest.fixture
def ollama_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


@pytest.fixture
def openai_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer("openai").start()
    yield server
    server.stop()
