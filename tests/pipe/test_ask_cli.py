"""``aries ask``, ``aries ingest`` and ``aries status`` as a pipe uses them: real ``aries`` subprocesses
with ``ARIES_HOME`` in a temp dir, the real turn loop, gateway, audit store and index, and scripted
Ollama-protocol servers on loopback. Every JSON output is validated against the shipped schemas."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from services.audit.log import AuditStore
from services.pipe.request import ERROR_SCHEMA, INGEST_SCHEMA, RESPONSE_SCHEMA, schema_errors
from tests.models.servers import Call, Reply, ScriptedServer

pytestmark = pytest.mark.timeout(240)

DOCS = {
    "approvals.md": "# Approvals\n\nEvery tool call passes the policy gateway. Writes wait for the operator, "
    "who approves once, for the session, or denies with a reason.\n",
    "tantivy.md": "# Tantivy\n\nTantivy is a full-text search engine library written in Rust, used for BM25.\n",
}
QUESTION = "What is Tantivy, the search engine library?"


def aries(*args: str, home: Path, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", **env}
    for name in ("ARIES_MODEL", "OLLAMA_HOST", "OPENAI_BASE_URL") if "ARIES_MODEL" not in env else ():
        environ.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def valid(data: Any, schema: str) -> Any:
    assert schema_errors(data, schema) == [], schema_errors(data, schema)
    return data


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aries: "), stderr
    return lines[0]


@pytest.fixture
def demo(aries_home: Path, tmp_path: Path) -> Path:
    """Workspace ``demo`` with index ``docs``, built by ``aries ingest --json`` (checked here)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    done = aries("ingest", str(docs), "-w", "demo", "--index", "docs", "--json", home=aries_home)
    assert done.returncode == 0, done.stderr
    result = valid(json.loads(done.stdout), INGEST_SCHEMA)
    assert result["index"] == "docs" and result["errors"] == []
    assert sorted((i["path"], i["status"]) for i in result["ingested"]) == [
        ("approvals.md", "added"),
        ("tantivy.md", "added"),
    ]
    assert all(i["chunks"] >= 1 for i in result["ingested"])
    again = aries("-w", "demo", "ingest", str(docs), "--index", "docs", "--json", home=aries_home)
    repeat = json.loads(again.stdout)
    assert repeat["ingested"] == [] and sorted(repeat["unchanged"]) == sorted(DOCS)
    assert repeat["id"] != result["id"]
    return aries_home / "workspaces" / "demo"


@pytest.fixture
def ollama() -> Any:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


def model_env(server: ScriptedServer) -> dict[str, str]:
    return {"ARIES_MODEL": "ollama:llama3.2:3b", "OLLAMA_HOST": server.url}


def provider_name(root: Path, tool_id: str) -> str:
    """The name the model is offered for ``tool_id`` under the workspace's policy (as the loop maps it)."""
    from services.assistant import TurnLoop
    from services.models.offline import OfflineProvider
    from services.session.session import Session
    from services.workspace.manager import Workspace

    with Session(Workspace(root, "demo"), interactive=False) as session:
        _, names = TurnLoop(session, OfflineProvider()).offered_tools()
        return names.provider_name(tool_id)


def test_request_json_on_stdin_offline_validates_and_cites(demo: Path, aries_home: Path) -> None:
    request = {"id": "req-1", "query": QUESTION, "mode": "ask", "settings": {"k": 3, "cloud_allowed": False}}
    done = aries("ask", "--stdin", "--json", "-w", "demo", home=aries_home, stdin=json.dumps(request))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    response = valid(json.loads(done.stdout), RESPONSE_SCHEMA)
    assert response["id"] == "req-1" and response["model"] == "offline" and response["index"] == "docs"
    local = response["provenance"]["local"]
    assert local and local[0]["source"] == "tantivy.md" and local[0]["cited"]
    assert local[0]["handle"] in response["answer"] and response["provenance"]["cloud"] == []
    assert 0 < response["confidence"]["local"] <= 1 and response["confidence"]["cloud"] == 0
    assert response["cloud"] == {"mode": "off", "status": "off"}
    # logs_ref points at the turn in the workspace's transcript.
    path, turn = response["logs_ref"].split("#")
    assert turn.endswith("-t0001")
    entries = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert Path(path).parent == demo / "transcripts"
    assert [e["role"] for e in entries if e.get("turn_id") == turn][-1] == "assistant"
    # Same input and configuration → the same answer, provenance and confidence.
    again = aries("ask", "--stdin", "--json", "-w", "demo", home=aries_home, stdin=json.dumps(request))
    second = json.loads(again.stdout)
    for key in ("answer", "provenance", "confidence"):
        assert second[key] == response[key]


def test_plain_text_on_stdin_and_as_argument(demo: Path, aries_home: Path) -> None:
    piped = aries("-w", "demo", "ask", home=aries_home, stdin=QUESTION + "\n")
    assert piped.returncode == 0, piped.stderr
    assert "offline (no model)" in piped.stdout and "tantivy.md" in piped.stdout
    assert "provenance: " in piped.stdout and "confidence.local" in piped.stdout
    argued = aries("ask", "-w", "demo", *QUESTION.split(), home=aries_home)
    assert argued.returncode == 0 and argued.stdout == piped.stdout


def test_ephemeral_without_workspace_answers_with_zero_confidence(aries_home: Path) -> None:
    done = aries("ask", "--stdin", "--json", home=aries_home, stdin='{"query": "anything?"}')
    assert done.returncode == 0, done.stderr
    response = valid(json.loads(done.stdout), RESPONSE_SCHEMA)
    assert response["index"] is None and response["provenance"]["local"] == []
    assert response["confidence"]["local"] == 0 and "no index is in use" in response["answer"]


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        ('{"query": ', "request JSON: not valid JSON"),
        ('{"query": 3}', "request JSON: query: 3 is not of type 'string'"),
        ('{"query": "x", "settings": {"k": 0}}', "request JSON: settings.k: 0 is less than the minimum of 1"),
        ('{"query": "x", "sttings": {}}', "request JSON: (top level): Additional properties are not allowed"),
        ('{"query": "x", "mode": "ingest"}', "use: aries ingest PATH"),
        ('{"id": "a"}', "request JSON: (top level): 'query' is a required property"),
        ("   \n", "no question"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_json_error_on_stdout(aries_home: Path, stdin: str, expected: str) -> None:
    plain = aries("ask", "--stdin", home=aries_home, stdin=stdin)
    assert plain.returncode == 2 and plain.stdout == ""
    assert expected in one_line(plain.stderr)
    as_json = aries("ask", "--stdin", "--json", home=aries_home, stdin=stdin)
    assert as_json.returncode == 2 and expected in one_line(as_json.stderr)
    error = valid(json.loads(as_json.stdout), ERROR_SCHEMA)
    assert error["exit_code"] == 2 and error["error"]["type"] == "InvalidInput"
    assert not (aries_home / "workspaces").exists()  # nothing was created for a refused request


def test_bad_flags_unknown_tool_and_profile_exit_2(aries_home: Path) -> None:
    assert aries("ask", "-k", "0", "x", home=aries_home).returncode == 2
    unknown = aries("ask", "--approve", "builtin:fs:nope", "x", home=aries_home)
    assert unknown.returncode == 2 and "--approve builtin:fs:nope: no such tool" in one_line(unknown.stderr)
    profile = aries("ask", "--profile", "no-such-profile", "x", home=aries_home)
    assert profile.returncode == 2 and "no-such-profile" in one_line(profile.stderr)
    researcher = aries("ask", "--profile", "researcher", "x", "--json", home=aries_home)
    assert researcher.returncode == 0, researcher.stderr
    both = aries("ask", "--stdin", "x", home=aries_home, stdin="y")
    assert both.returncode == 2 and "not both" in one_line(both.stderr)


def test_scripted_model_answer_validates(demo: Path, aries_home: Path, ollama: ScriptedServer) -> None:
    handle = aries("-w", "demo", "rag", "query", "Tantivy", "-k", "1", "--json", home=aries_home)
    cited = json.loads(handle.stdout)["hits"][0]["handle"]
    ollama.add(Reply(text=f"Tantivy is a Rust search library [{cited}]."))
    stdin = json.dumps({"query": QUESTION})
    done = aries("ask", "--stdin", "--json", "-w", "demo", home=aries_home, stdin=stdin, **model_env(ollama))
    assert done.returncode == 0, done.stderr
    response = valid(json.loads(done.stdout), RESPONSE_SCHEMA)
    assert response["answer"] == f"Tantivy is a Rust search library [{cited}]."
    assert response["model"] == "ollama:llama3.2:3b"
    by_handle = {hit["handle"]: hit for hit in response["provenance"]["local"]}
    assert by_handle[cited]["cited"] and response["confidence"]["local"] > 0
    # The model got the retrieved chunk as untrusted data.
    sent = json.dumps(ollama.chat_requests()[0]["messages"])
    assert "<<<untrusted retrieved" in sent and cited in sent


def test_a_proposed_write_is_denied_headless_and_allowed_with_approve(
    demo: Path, aries_home: Path, ollama: ScriptedServer
) -> None:
    write = provider_name(demo, "builtin:fs:write_text")
    call = Call(write, {"path": "summary.txt", "text": "ok\n"}, id="w1")
    ollama.add(Reply(tool_calls=[call]), Reply(text="I could not write it."))
    denied = aries("ask", "--json", "-w", "demo", "write a summary", home=aries_home, **model_env(ollama))
    assert denied.returncode == 3, denied.stderr
    assert "builtin:fs:write_text was refused" in one_line(denied.stderr)
    assert "rerun with --approve builtin:fs:write_text" in denied.stderr
    response = valid(json.loads(denied.stdout), RESPONSE_SCHEMA)
    assert response["answer"] == "I could not write it."
    [record] = response["tool_calls"]
    assert record["tool_id"] == "builtin:fs:write_text" and record["status"] == "denied"
    assert not (demo / "summary.txt").exists()
    # The denial reached the model as a structured result, with the way out.
    second = json.dumps(ollama.chat_requests()[1]["messages"])
    assert "PolicyDenied" in second and "--approve builtin:fs:write_text" in second
    with AuditStore.for_workspace(demo) as audit:
        assert audit.get_call(record["call_id"])["status"] == "denied"

    ollama.add(Reply(tool_calls=[call]), Reply(text="Written."))
    approve = ("--approve", "builtin:fs:write_text")
    allowed = aries("ask", "-w", "demo", *approve, "write a summary", home=aries_home, **model_env(ollama))
    assert allowed.returncode == 0, allowed.stderr
    assert (demo / "summary.txt").read_text() == "ok\n"
    # Each ask is a conversation of its own: the earlier ask's dialogue does not reach the model.
    third = ollama.chat_requests()[2]["messages"]
    assert [m["role"] for m in third].count("user") == 1 and "I could not write it." not in json.dumps(third)
    assert "tool builtin:fs:write_text: ok" in allowed.stdout

    status = aries("status", "-w", "demo", "--json", "--calls", "2", home=aries_home, **model_env(ollama))
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert [(c["tool_name"], c["status"]) for c in report["last_calls"]] == [
        ("builtin:fs:write_text", "denied"),
        ("builtin:fs:write_text", "success"),
    ]
    assert report["model"]["reachable"] and "llama3.2:3b" in report["model"]["models"]
    assert report["active_index"] == "docs" and [i["name"] for i in report["indexes"]] == ["docs"]
    assert report["cloud"]["mode"] == "off"


def test_a_call_a_policy_rule_refuses_is_not_said_to_need_approve(
    demo: Path, aries_home: Path, ollama: ScriptedServer
) -> None:
    """A deny rule (``.env``) is not an approval: the hint does not send the operator to ``--approve``
    (found by the agentic bench: the hint said "rerun with --approve" for ``fs.deny.dotenv``)."""
    (demo / ".env").write_text("TOKEN=x\n", encoding="utf-8")
    read = provider_name(demo, "builtin:fs:read_text")
    ollama.add(Reply(tool_calls=[Call(read, {"path": ".env"}, id="r1")]), Reply(text="I cannot read it."))
    denied = aries("ask", "-w", "demo", "what is in .env?", home=aries_home, **model_env(ollama))
    assert denied.returncode == 3, denied.stderr
    assert "builtin:fs:read_text was refused" in denied.stderr
    assert "a policy rule refuses it, which --approve cannot change" in denied.stderr
    assert "rerun with --approve" not in denied.stderr


def test_a_call_written_as_text_is_listed_as_such(demo: Path, aries_home: Path, ollama: ScriptedServer) -> None:
    """A Hermes-style call in the answer's text runs through the gateway; ``ask --json`` says it was
    read from text (a native call says false)."""
    read = provider_name(demo, "builtin:fs:read_text")
    (demo / "notes.txt").write_text("the notes\n", encoding="utf-8")
    call = json.dumps({"name": read, "arguments": {"path": "notes.txt"}})
    ollama.add(Reply(text=f"Reading.\n<tool_call>\n{call}\n</tool_call>"), Reply(text="They say: the notes."))
    done = aries("ask", "--json", "-w", "demo", "what do the notes say?", home=aries_home, **model_env(ollama))
    assert done.returncode == 0, done.stderr
    response = valid(json.loads(done.stdout), RESPONSE_SCHEMA)
    assert response["answer"] == "They say: the notes."
    [record] = response["tool_calls"]
    assert record["tool_id"] == "builtin:fs:read_text" and record["status"] == "ok" and record["from_text"] is True
    assert "the notes" in json.dumps(ollama.chat_requests()[1]["messages"])


def test_provider_unreachable_exits_4(demo: Path, aries_home: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"ARIES_MODEL": "ollama:llama3.2", "OLLAMA_HOST": f"127.0.0.1:{port}"}
    done = aries("ask", "--json", "-w", "demo", QUESTION, home=aries_home, **env)
    assert done.returncode == 4
    assert "not reachable" in one_line(done.stderr)
    error = valid(json.loads(done.stdout), ERROR_SCHEMA)
    assert error["exit_code"] == 4 and error["error"]["code"] == "provider_unavailable" and error["id"]
    status = aries("status", "-w", "demo", home=aries_home, **env)
    assert status.returncode == 4 and "does not answer" in status.stdout


def test_status_of_an_ephemeral_workspace_offline(aries_home: Path) -> None:
    done = aries("status", "--json", home=aries_home)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["workspace"]["ephemeral"] and report["indexes"] == [] and report["last_calls"] == []
    assert report["model"]["label"] == "offline" and report["model"]["reachable"]
    bad = aries("status", home=aries_home, ARIES_MODEL="nope:x")
    assert bad.returncode == 2 and "not usable" in bad.stdout


def test_ask_json_says_which_tools_were_offered_and_why(demo: Path, aries_home: Path, ollama: ScriptedServer) -> None:
    ollama.add(Reply(text="It is about approvals."))
    done = aries("ask", "--json", "-w", "demo", "read the file approvals.md", home=aries_home, **model_env(ollama))
    assert done.returncode == 0, done.stderr
    offered = valid(json.loads(done.stdout), RESPONSE_SCHEMA)["context"]["tools_offered"]
    assert offered["offered"][0] == "builtin:fs:read_text" and offered["tokens"] <= offered["budget"] <= 1200
    why = {row["tool"]: row for row in offered["tools"]}
    assert why["builtin:fs:read_text"]["why"].startswith("matched: read, file")
    assert any(not row["offered"] and row["why"] == "no match" for row in offered["tools"])
    sent = [tool["function"]["name"] for tool in ollama.chat_requests()[0]["tools"]]
    assert len(sent) == len(offered["offered"])
