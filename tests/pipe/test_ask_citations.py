"""``aries ask --json`` lists each sentence of the answer with its citation verdict (issue 33 item 4):
a real ``aries`` subprocess, the real index, a scripted Ollama-protocol server on loopback; the output
is validated against the shipped response schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.pipe.request import RESPONSE_SCHEMA
from tests.models.servers import Reply, ScriptedServer
from tests.pipe.test_ask_cli import aries, demo, model_env, ollama, valid  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(240)


def test_ask_json_lists_each_sentence_with_its_verdict(demo: Path, aries_home: Path, ollama: ScriptedServer) -> None:  # noqa: F811
    found = aries("-w", "demo", "rag", "query", "Tantivy", "-k", "1", "--json", home=aries_home)
    cited = json.loads(found.stdout)["hits"][0]["handle"]
    answer = (
        f"Tantivy is a full-text search library written in Rust [{cited}]. "
        f"Penguins migrate across Antarctic ice every winter [{cited}]. "
        "It was created by Paul Masurel.\n\n"
        "```\ncode [docs:0123456789abcdef] is not prose\n```\n"
    )
    ollama.add(Reply(text=answer))
    done = aries("ask", "--json", "-w", "demo", "What is Tantivy?", home=aries_home, **model_env(ollama))
    assert done.returncode == 0, done.stderr
    response = valid(json.loads(done.stdout), RESPONSE_SCHEMA)
    checks = response["citation_checks"]
    assert checks["method"] == "overlap" and checks["invented"] == []
    rows = [(s["verdict"], [c["handle"] for c in s["citations"]]) for s in checks["sentences"]]
    assert rows == [("supported", [cited]), ("unsupported", [cited]), ("uncited", [])]
    first = checks["sentences"][0]
    assert answer[first["start"] : first["end"]].startswith("Tantivy is a full-text")
    assert first["text"] == "Tantivy is a full-text search library written in Rust."
    assert checks["counts"] == {"supported": 1, "uncited": 1, "unsupported": 1}
    assert "not proven true" in checks["help"] and "negation" in checks["help"]
