"""Golden transcripts of Desktop Ops (the spec's §8 list): list a directory, create a file (approved),
start a process and poll it, search the web and fetch a result (loopback SearXNG and web server).

Each request goes parser → plan → ``run_desktop_plan`` through a real ``Session`` (gateway, audit
store, transcript). The golden file holds the transcript (the plan notice, each tool entry, the
summary notice) and the audit rows, with volatile fields dropped as ``tests/tools/test_golden.py``
does. Regenerate after an intended change with ``ARIES_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.audit.log import AuditStore
from services.desktop import DesktopRun, parse_request, run_desktop_plan
from services.session.session import Session
from services.tools.calls import ApprovalDecision, ApprovalRequest
from tests.tools.conftest import LoopbackServer, Sandbox, policy_data
from tests.tools.test_golden import normalize

pytestmark = pytest.mark.timeout(60)

GOLDEN = Path(__file__).parent / "golden"
AUDIT_KEYS = ("step_index", "tool_name", "args", "status", "decision", "rule_id", "approved_by", "tier", "source")


class Desk:
    def __init__(self, sandbox: Sandbox, policy: dict[str, Any]) -> None:
        self.sandbox = sandbox
        self.asked: list[ApprovalRequest] = []
        path = sandbox.base / "policy.yaml"
        path.write_text(json.dumps(policy), encoding="utf-8")
        self.session = Session(sandbox.workspace, policy_file=path, approver=self.approve, interactive=False)

    def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision.once()

    def run(self, request: str) -> DesktopRun:
        return asyncio.run(run_desktop_plan(self.session, parse_request(request)))

    def check(self, name: str, replacements: dict[str, str]) -> None:
        entries = self.session.conversation.read().entries
        with AuditStore.for_workspace(self.sandbox.workspace.root) as audit:
            calls = audit.calls(limit=100)
        tools = [e for e in entries if e["role"] == "tool"]
        assert [e["call_id"] for e in tools] == [c["call_id"] for c in calls]  # transcript and audit agree
        assert all(e["role"] in {"tool", "notice"} for e in entries)
        audit_rows = [{key: call[key] for key in AUDIT_KEYS} for call in calls]
        actual = normalize({"transcript": entries, "audit": audit_rows}, replacements)
        path = GOLDEN / f"{name}.json"
        if os.environ.get("ARIES_UPDATE_GOLDEN") == "1":
            path.write_text(json.dumps(actual, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
        assert path.exists(), f"missing golden file {path}; run with ARIES_UPDATE_GOLDEN=1"
        assert actual == json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def replacements(sandbox: Sandbox) -> dict[str, str]:
    return {
        str(sandbox.root.resolve()): "<root>",
        str(sandbox.outside.resolve()): "<outside>",
        str(sandbox.workspace.root.resolve()): "<workspace>",
        str(sandbox.base.resolve()): "<base>",
    }


@pytest.fixture
def desk(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[Desk]:
    monkeypatch.delenv("ARIES_MODEL", raising=False)
    desk = Desk(sandbox, policy_data(sandbox.root))
    yield desk
    desk.session.close()


def test_golden_list_directory(desk: Desk, replacements: dict[str, str]) -> None:
    run = desk.run("list the files in . recursively")
    assert run.ok and desk.asked == []
    names = [e["path"] for e in run.outcomes[0].result.data["entries"]]  # type: ignore[index]
    assert names == sorted(names) and "sub/ok.txt" in names
    desk.check("list_directory", replacements)


def test_golden_create_file(desk: Desk, sandbox: Sandbox, replacements: dict[str, str]) -> None:
    run = desk.run('create notes/todo.md with "buy milk"')
    assert run.ok and (sandbox.root / "notes" / "todo.md").read_text() == "buy milk\n"
    [asked] = desk.asked  # guide mode: a write waits for the operator
    assert asked.tool_id == "builtin:fs:write_text" and "+buy milk" in asked.preview["diff"]  # type: ignore[index]
    assert desk.run("list notes").ok
    again = desk.run('create notes/todo.md with "buy bread"')  # create never overwrites
    assert not again.ok and (sandbox.root / "notes" / "todo.md").read_text() == "buy milk\n"
    desk.check("create_file", replacements)


def test_golden_start_process_and_poll(desk: Desk, replacements: dict[str, str]) -> None:
    # No output: the poll (wait_s) returns when the process ends, so the transcript is the same every run.
    run = desk.run("start python3 -c 'import time; time.sleep(0.3)' and poll it")
    assert run.ok, run.summary()
    started, polled = (o.result.data for o in run.outcomes)
    assert started is not None and polled is not None
    assert polled["process_id"] == started["process_id"]
    assert polled["running"] is False and polled["exit_code"] == 0
    desk.check("start_process_and_poll", replacements)


def test_golden_web_search_and_fetch(
    sandbox: Sandbox, web_server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, replacements: dict[str, str]
) -> None:
    monkeypatch.delenv("ARIES_MODEL", raising=False)
    policy = policy_data(
        sandbox.root,
        web__schemes=["http"],
        web__allow_private=[f"127.0.0.1:{web_server.port}"],
        web__searxng_url=f"{web_server.url}/searx",
    )
    desk = Desk(sandbox, policy)
    try:
        run = desk.run("search the web for aries and fetch the second result")
        assert run.ok, run.summary()
        found, fetched = (o.result.data for o in run.outcomes)
        assert found is not None and fetched is not None
        assert run.outcomes[1].args["url"] == found["results"][1]["url"] == f"{web_server.url}/page.html?i=2"
        citations = {a.id: a.provenance for a in sandbox.workspace.artifacts.list()}
        assert citations[fetched["artifact_id"]]["url"] == found["results"][1]["url"]  # a citation, stored
        assert [r.tool_id for r in desk.asked] == ["builtin:web:search", "builtin:web:fetch"]  # NETWORK: approved
        search_hash = run.outcomes[0].result.meta["artifacts"][0]["hash"]  # the results name the server's port
        volatile = {
            web_server.url: "<server>",
            search_hash: "sha256:<search_artifact_hash>",
            found["artifact_id"]: "<search_artifact>",
        }
        desk.check("web_search_and_fetch", {**replacements, **volatile})
    finally:
        desk.session.close()


def test_a_failed_step_stops_the_plan_with_a_reason(desk: Desk) -> None:
    run = desk.run("search the web for aries and fetch the first result")  # no searxng_url in this policy
    assert not run.ok and len(run.outcomes) == 1
    assert run.stopped is not None and run.stopped.startswith("step 1 (builtin:web:search) ended in")
    assert run.stopped.endswith("; step 2 did not run")
