"""The bridge's fixtures: the redaction corpus, and a loopback "cloud" that records every byte.

``RecordingCloud`` is the scripted OpenAI-compatible server of ``tests/models/servers.py`` (checked
against the official ``openai`` client) that also keeps each request exactly as it arrived: the
request line, every header and the raw body bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.workspace.bridge_config import BridgeConfig
from tests.models.servers import Recorded, Reply, ScriptedServer

CORPUS = Path(__file__).parent / "corpus"
KEY_ENV = "ARIES_TEST_CLOUD_KEY"
CORPUS_HOSTS = ("build01", "git.acme-corp.net")
CORPUS_PROJECTS = ("Bluebird", "ProjectNightjar")


def must_redact() -> list[dict[str, Any]]:
    return list(json.loads((CORPUS / "must_redact.json").read_text(encoding="utf-8")))


def must_not_redact() -> list[str]:
    return list(json.loads((CORPUS / "must_not_redact.json").read_text(encoding="utf-8")))


class RecordingCloud(ScriptedServer):
    def __init__(self) -> None:
        super().__init__("openai", models=["cloud-model"])
        self.raw: list[bytes] = []

    async def _record(self, request: Any) -> Any:
        body = await request.read() if request.can_read_body else b""  # aiohttp keeps it for the next read
        head = f"{request.method} {request.path_qs}\n" + "".join(f"{k}: {v}\n" for k, v in request.headers.items())
        self.raw.append(head.encode("utf-8") + b"\n" + body)
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        self.requests.append(Recorded(request.method, request.path, dict(request.headers), parsed))
        return parsed

    def received(self) -> bytes:
        return b"\n".join(self.raw)

    def user_messages(self) -> list[str]:
        return [body["messages"][-1]["content"] for body in self.chat_requests()]

    def answer(self, count: int, text: str = "A general answer.") -> None:
        self.add(*[Reply(text=text) for _ in range(count)])


@pytest.fixture
def cloud() -> Iterator[RecordingCloud]:
    server = RecordingCloud().start()
    yield server
    server.stop()


def config_for(server: RecordingCloud | None, mode: str, **extra: Any) -> BridgeConfig:
    return BridgeConfig(
        mode=mode,  # type: ignore[arg-type]
        base_url=server.base_url if server else "http://127.0.0.1:9/v1",
        model="cloud-model",
        api_key_env=KEY_ENV,
        hostnames=CORPUS_HOSTS,
        projects=CORPUS_PROJECTS,
        **extra,
    )


ENV = {KEY_ENV: "test-key-not-a-secret"}
