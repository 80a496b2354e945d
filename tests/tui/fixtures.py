"""Deterministic workspaces for TUI tests: fixed ids and timestamps, no clock, no randomness."""

from __future__ import annotations

from services.workspace.manager import Workspace, WorkspaceManager
from services.workspace.transcripts import Transcript

CONVERSATION = "c-20260101-090000-00000001"


NAMES = ("a.md", "b.md", "c.md")


def workspace_with_transcript(name: str = "demo") -> Workspace:
    workspace, _ = WorkspaceManager().create(name)
    transcript = Transcript(workspace.transcripts_dir, CONVERSATION)
    transcript.append("user", "What changed in the ingest pipeline?", timestamp="2026-01-01T09:00:00.000Z")
    transcript.append(
        "assistant",
        "Chunk boundaries are now deterministic: the same input yields the same chunk ids.",
        timestamp="2026-01-01T09:00:02.000Z",
    )
    transcript.append(
        "tool",
        "3 entries",
        timestamp="2026-01-01T09:00:03.000Z",
        tool_name="builtin:fs:list_dir",
        input={"path": "docs"},
        output={
            "path": "/home/me/demo/docs",
            "root": "/home/me/demo",
            "entries": [{"path": n, "name": n, "type": "file", "size": 120 * (i + 1)} for i, n in enumerate(NAMES)],
            "count": 3,
            "hidden_by_policy": 0,
        },
        status="success",
        duration_ms=4,
    )
    transcript.append("system", "Workspace demo opened.", timestamp="2026-01-01T09:00:04.000Z")
    workspace.artifacts.add_bytes(
        b"# Findings\n\nAll chunk ids matched across two runs.\n",
        "findings.md",
        description="run comparison",
        provenance={"kind": "test"},
    )
    return workspace
