"""Issue 29, typed tool outputs: a plan run recorded by the code *before* the outputs became pydantic
models (``tests/fixtures/replay_issue29``, made by ``python -m tests.replay_fixture``) replays with
no divergence, and every tool output serialises to the same bytes as then — in the transcript (the
tools' own key order) and in the audit store (its canonical JSON) — save the fields that differ on
every run by design (``services.plans.runner.VOLATILE``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.plans.runner import VOLATILE
from services.tools.outputs import output_of
from services.workspace.manager import WorkspaceManager
from tests.replay_fixture import FIXTURE, lay_out, load, page_routes, recorded_transcript
from tests.test_plans import aries


def _steady(value: Any) -> Any:
    """``value`` without its volatile fields, in its own key order (unlike ``runner.stable``)."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


def _tool_outputs(lines: list[str]) -> list[str]:
    """The tool results of a transcript as text. Left out, as they differ between machines and not
    between versions: ``meta.bytes`` (the size of the output, which holds the workspace's path; ``data``
    holds what it counts) and a shell call's ``meta.sandbox.os`` (the OS sandbox this machine has:
    bubblewrap, or Landlock where bwrap is missing, with its own notes; the limits stay compared)."""
    entries = [json.loads(line) for line in lines if line.strip()]
    outputs = [_steady(e["output"]) for e in entries if e.get("role") == "tool"]
    for output in outputs:
        output["meta"].pop("bytes", None)
        sandbox = output["meta"].get("sandbox")
        if isinstance(sandbox, dict):
            sandbox.pop("os", None)
    return [json.dumps(output, ensure_ascii=False) for output in outputs]


def _stored_outputs(root: Path, run_id: str) -> list[str | None]:
    conn = sqlite3.connect(root / "audit.db")
    try:
        rows = conn.execute(
            "SELECT r.output_json FROM tool_results r JOIN tool_calls c ON c.call_id = r.call_id"
            " WHERE r.run_id = ? ORDER BY c.step_index",
            (run_id,),
        ).fetchall()
    finally:
        conn.close()
    return [None if text is None else json.dumps(_steady(json.loads(text))) for (text,) in rows]


def test_a_run_recorded_before_typed_outputs_replays_with_no_divergence_and_the_same_bytes(
    aries_home: Path, loopback: Callable[..., Any]
) -> None:
    assert (FIXTURE / "audit.sql").is_file()
    server = loopback(page_routes())
    host = f"127.0.0.1:{server.port}"
    workspace, _ = WorkspaceManager().create("demo")
    root = workspace.root
    lay_out(root)
    load(root, host)
    (recorded,) = json.loads(aries("-w", "demo", "runs", "--json", home=aries_home).stdout)
    run_id = recorded["run_id"]
    (root / "out.txt").write_text("old\n")  # as it was before the recorded run overwrote it

    replayed = aries("-w", "demo", "replay", run_id, "--json", home=aries_home)
    result = json.loads(replayed.stdout)
    assert result["divergences"] == [], result["divergences"]
    statuses = [s["status"] for s in result["steps"]]
    assert statuses == ["success"] * 7 + ["error"]
    assert replayed.returncode == 0  # no divergence (the last step fails in both runs: a missing file)

    again = result["run_id"]
    assert _stored_outputs(root, again) == _stored_outputs(root, run_id)
    before = _tool_outputs(recorded_transcript(root, host))
    (transcript,) = (root / "transcripts").glob("*.ndjson")
    after = _tool_outputs(transcript.read_text(encoding="utf-8").splitlines())
    assert len(before) == 8
    for line in recorded_transcript(root, host):  # the models keep the tools' key order and values
        entry = json.loads(line)
        if entry.get("role") == "tool" and entry["output"]["status"] == "ok":
            data = entry["output"]["data"]
            model = output_of(entry["tool_name"], data)
            assert model is not None and json.dumps(model.model_dump()) == json.dumps(data), entry["tool_name"]
    for index, (old, new) in enumerate(zip(before, after, strict=True)):
        assert new == old, index
