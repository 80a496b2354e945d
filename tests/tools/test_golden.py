"""Golden transcripts (service level): list a directory, create a file approved by a callback, start a
process and poll it, web search and fetch against loopback servers, and denials reaching the caller
as structured results.  Each golden file holds the normalized transcript tool entries and audit rows.

Regenerate after an intended change with ``ARIES_UPDATE_GOLDEN=1 pytest tests/tools/test_golden.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.tools.calls import ApprovalDecision, ApprovalRequest
from services.tools.gateway import ToolGateway
from services.workspace.transcripts import Transcript
from tests.tools.conftest import LoopbackServer, Sandbox, make_policy

pytestmark = pytest.mark.timeout(60)

GOLDEN = Path(__file__).parent / "golden"
VOLATILE = {
    "timestamp",
    "message_id",
    "conversation_id",
    "duration_ms",
    "approval_wait_ms",
    "started_at",
    "runtime_s",
    "seconds_since_output",
    "pid",
    "fetched_at",
    "created_at",
    "ended_at",
    "call_id",
    "run_id",
    "bytes",
}  # bytes: the size of the JSON payload, which holds temp paths
ID_PATTERNS = [
    (re.compile(r"call-\d{8}-\d{6}-[0-9a-f]{8}"), "<call_id>"),
    (re.compile(r"\bp\d+-[0-9a-f]{6}\b"), "<process_id>"),
    (re.compile(r"aries-\d+-[0-9a-f]{8}"), "<session>"),
]


def normalize(value: Any, replacements: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {
            k: ("<volatile>" if k in VOLATILE and v is not None else normalize(v, replacements))
            for k, v in sorted(value.items())
        }
    if isinstance(value, list):
        return [normalize(v, replacements) for v in value]
    if isinstance(value, str):
        for old in sorted(replacements, key=len, reverse=True):
            value = value.replace(old, replacements[old])
        for pattern, placeholder in ID_PATTERNS:
            value = pattern.sub(placeholder, value)
    return value


def check_golden(name: str, gateway: ToolGateway, transcript: Transcript, replacements: dict[str, str]) -> None:
    entries = transcript.read().entries
    assert entries and all(e["role"] == "tool" for e in entries)
    for entry in entries:
        assert set(entry) >= {
            "timestamp",
            "role",
            "content",
            "conversation_id",
            "message_id",
            "tool_name",
            "input",
            "output",
            "status",
            "duration_ms",
            "call_id",
        }
    audit = [
        {
            key: call[key]
            for key in (
                "step_index",
                "tool_name",
                "args",
                "status",
                "decision",
                "rule_id",
                "approved_by",
                "tier",
                "source",
            )
        }
        for call in gateway.audit.calls(run_id=gateway.run_id)
    ]
    # Transcript and audit agree call by call.
    calls = gateway.audit.calls(run_id=gateway.run_id)
    assert [e["call_id"] for e in entries] == [c["call_id"] for c in calls]
    assert [e["status"] for e in entries] == ["success" if c["status"] == "success" else "fail" for c in calls]
    actual = normalize({"transcript": entries, "audit": audit}, replacements)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("ARIES_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with ARIES_UPDATE_GOLDEN=1"
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert actual == expected


@pytest.fixture
def replacements(sandbox: Sandbox) -> dict[str, str]:
    return {
        str(sandbox.root.resolve()): "<root>",
        str(sandbox.outside.resolve()): "<outside>",
        str(sandbox.workspace.root.resolve()): "<workspace>",
    }


def test_golden_list_directory(sandbox: Sandbox, gateway: ToolGateway, replacements: dict[str, str]) -> None:
    transcript = sandbox.workspace.new_transcript()
    result = gateway.execute_sync("builtin:fs:list_dir", {"path": ".", "recursive": True}, transcript=transcript)
    assert result.ok
    check_golden("list_directory", gateway, transcript, replacements)


def test_golden_create_file(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway], replacements: dict[str, str]
) -> None:
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        seen.append(request)
        return ApprovalDecision.once()

    gateway = gateway_factory(approver=approver)
    transcript = sandbox.workspace.new_transcript()
    created = gateway.execute_sync(
        "builtin:fs:write_text",
        {"path": "notes/todo.md", "text": "- ship the gateway\n", "create_dirs": True},
        transcript=transcript,
    )
    assert created.ok and (sandbox.root / "notes" / "todo.md").read_text() == "- ship the gateway\n"
    assert len(seen) == 1 and seen[0].preview is not None and "+- ship the gateway" in seen[0].preview["diff"]
    gateway.execute_sync("builtin:fs:list_dir", {"path": "notes"}, transcript=transcript)
    check_golden("create_file", gateway, transcript, replacements)


def test_golden_start_process_and_poll(sandbox: Sandbox, gateway: ToolGateway, replacements: dict[str, str]) -> None:
    transcript = sandbox.workspace.new_transcript()
    started = gateway.execute_sync(
        "builtin:shell:start", {"argv": ["python3", "-c", "print('hello from aries')"]}, transcript=transcript
    )
    assert started.ok and started.data is not None
    process = gateway.processes.get(started.data["process_id"])
    process.popen.wait(10)  # let it finish so that one poll sees the end, deterministically
    for reader in process.readers:
        reader.join(5)
    polled = gateway.execute_sync(
        "builtin:shell:poll", {"process_id": started.data["process_id"]}, transcript=transcript
    )
    assert polled.data is not None and polled.data["stdout_tail"] == "hello from aries\n"
    assert polled.data["exit_code"] == 0 and polled.data["running"] is False
    check_golden("start_process_and_poll", gateway, transcript, replacements)


def test_golden_web_search_and_fetch(
    sandbox: Sandbox,
    web_server: LoopbackServer,
    gateway_factory: Callable[..., ToolGateway],
    replacements: dict[str, str],
) -> None:
    policy = make_policy(
        sandbox.root,
        web__schemes=["http"],
        web__allow_private=[f"127.0.0.1:{web_server.port}"],
        web__searxng_url=f"{web_server.url}/searx",
    )
    gateway = gateway_factory(policy)
    transcript = sandbox.workspace.new_transcript()
    found = gateway.execute_sync("builtin:web:search", {"query": "aries", "max_results": 1}, transcript=transcript)
    assert found.ok and found.data is not None
    url = found.data["results"][0]["url"]
    fetched = gateway.execute_sync("builtin:web:fetch", {"url": url}, transcript=transcript)
    assert fetched.ok and fetched.data is not None
    extracted = gateway.execute_sync(
        "builtin:web:extract", {"artifact_id": fetched.data["artifact_id"]}, transcript=transcript
    )
    assert extracted.ok
    citations = {a.id: a.provenance for a in sandbox.workspace.artifacts.list()}
    assert citations[fetched.data["artifact_id"]]["url"] == url
    # The stored search results name the server's (random) port, so their artifact id varies.
    volatile_ids = {
        web_server.url: "<server>",
        found.data["artifact_id"]: "<search_artifact>",
        found.meta["artifacts"][0]["hash"]: "sha256:<search_artifact_hash>",
    }
    check_golden("web_search_and_fetch", gateway, transcript, {**replacements, **volatile_ids})


def test_golden_denials(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway], replacements: dict[str, str]
) -> None:
    gateway = gateway_factory(approver=lambda request: ApprovalDecision.deny("not today"))
    transcript = sandbox.workspace.new_transcript()
    policy_denied = gateway.execute_sync(
        "builtin:fs:read_text", {"path": "../outside/secret.txt"}, transcript=transcript
    )
    operator_denied = gateway.execute_sync("builtin:shell:run", {"argv": ["echo", "hi"]}, transcript=transcript)
    disabled = gateway_factory(make_policy(sandbox.root, tool_classes={"fs": "enabled"}))
    class_denied = disabled.execute_sync("builtin:shell:run", {"argv": ["echo", "hi"]})
    for result in (policy_denied, operator_denied, class_denied):
        assert result.status == "error" and result.error is not None and result.error.type == "PolicyDenied"
        assert result.data is None and result.error.details["rule"]
        assert result.meta["decision"]["action"] == "deny"
    assert class_denied.error is not None and class_denied.error.details["rule"] == "default.deny"
    check_golden("denials", gateway, transcript, replacements)
