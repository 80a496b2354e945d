"""Shared pieces of the real-model lane: a workspace set up for the real server, ``aries`` as a
subprocess, the text a Textual screen shows."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from services.workspace.manager import Workspace, WorkspaceManager

PROFILE = """\
name: realtest
description: "The real-model lane: deterministic sampling, a few tools."
tools:
  enable: [{tools}]
model:
  temperature: 0
"""
DOCS = {
    "tantivy.md": "# Tantivy\n\nTantivy is a full-text search engine library written in Rust, used for BM25.\n",
    "approvals.md": "# Approvals\n\nEvery tool call passes the policy gateway. Writes wait for the operator.\n",
}


def real_workspace(
    name: str,
    *,
    models: dict[str, dict[str, int]] | None = None,
    tools: tuple[str, ...] = ("builtin:fs:read_text", "builtin:fs:list_dir", "builtin:fs:write_text"),
    index: bool = False,
    docs_dir: Path | None = None,
) -> Workspace:
    """A workspace with profile ``realtest`` (temperature 0, only ``tools``), optional per-model
    settings, and optionally an index ``docs`` of two small documents (hash embedder)."""
    workspace = WorkspaceManager().create(name)[0]
    folder = workspace.root / "profiles"
    folder.mkdir(exist_ok=True)
    (folder / "realtest.yaml").write_text(PROFILE.format(tools=", ".join(tools)), encoding="utf-8")
    settings: dict[str, Any] = {}
    if models:
        settings["models"] = models
    workspace.update(profile="realtest", **settings)
    (workspace.root / "notes.txt").write_text("the notes\n", encoding="utf-8")
    if index:
        assert docs_dir is not None
        docs_dir.mkdir(parents=True, exist_ok=True)
        for file, text in DOCS.items():
            (docs_dir / file).write_text(text, encoding="utf-8")
        from services.retrieval import RetrievalEngine

        with RetrievalEngine(workspace) as engine:
            engine.index_add(str(docs_dir), "docs")
    return workspace


def aries(*args: str, home: Path, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", **env}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
    )


def screen_text(app: Any) -> str:
    """What the screen shows, as text (from the SVG screenshot; non-breaking spaces as spaces)."""
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r">([^<]*)</text>", svg))).replace("\xa0", " ")


TEMPLATE_TOKEN = re.compile(r"<</?SYS>>|\[/?INST\]|<(?:start|end)_of_turn>|<\|[a-z_]+\|>")
