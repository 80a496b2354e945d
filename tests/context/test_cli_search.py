"""``aries context find|search|trace`` through the real CLI (subprocesses): ranked URIs, JSON, traces
listed and shown after the process that wrote them is gone, bad settings fail fast with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from services.context.index import sync_index
from services.context.tiers import synthesize_tiers
from services.context.tree import ContextTree
from services.context.uri import AxiomUri
from services.retrieval import RetrievalEngine
from services.retrieval.settings import RetrievalSettings
from services.workspace.manager import WorkspaceManager
from tests.context.ctx_fixtures import NESTED


def aries(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", **env},
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def build(home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    tree = ContextTree(workspace.root / "context")
    for rel, text in NESTED.items():
        tree.write_text(AxiomUri.root("resources").join(rel), text, actor="user")
    synthesize_tiers(tree, AxiomUri.root("resources"))
    with RetrievalEngine(workspace, RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"})) as engine:
        sync_index(tree, engine)
    workspace.close()


def test_find_search_and_trace_through_the_cli(aries_home: Path) -> None:
    build(aries_home)
    found = aries("-w", "demo", "context", "find", "llamas graze", "-n", "3", home=aries_home)
    assert found.returncode == 0, found.stderr
    assert "axiom://resources/animals/mammals/llamas/grazing.md" in found.stdout.splitlines()[1]
    assert "trace " in found.stdout
    searched = aries("-w", "demo", "context", "search", "alpaca fleece", "--max-depth", "3", "--json", home=aries_home)
    assert searched.returncode == 0, searched.stderr
    data = json.loads(searched.stdout)
    assert data["hits"][0]["uri"] == "axiom://resources/animals/mammals/alpacas/fleece.md"
    trace_id = data["trace"]["id"]
    assert data["trace"]["start_points"] and data["trace"]["steps"] and data["trace"]["stop_reason"]
    listed = aries("-w", "demo", "context", "trace", home=aries_home)
    assert listed.returncode == 0 and trace_id in listed.stdout.splitlines()[1]
    shown = aries("-w", "demo", "context", "trace", trace_id, home=aries_home)
    assert shown.returncode == 0, shown.stderr
    assert "start points:" in shown.stdout and "steps:" in shown.stdout and "stop reason:" in shown.stdout
    missing = aries("-w", "demo", "context", "trace", "nope", home=aries_home)
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and "nope" in missing.stderr
    # every find/search is one row of the request log, with its trace id
    log = json.loads(aries("-w", "demo", "context", "log", "--json", home=aries_home).stdout)
    rows = [row for row in log if row["operation"] in ("find", "search")]
    assert [row["operation"] for row in rows][:2] == ["search", "find"] and rows[0]["trace_id"] == trace_id


def test_bad_settings_fail_fast_from_every_search_command(aries_home: Path) -> None:
    for command in (["find", "x"], ["search", "x"], ["trace"]):
        for env in ({"AXIOMME_RETRIEVAL_BACKEND": "postgres"}, {"AXIOMME_RERANKER": "v9"}):
            done = aries("context", *command, home=aries_home, **env)
            assert done.returncode == 2, (command, env, done.returncode)
            assert done.stderr.startswith("aries: ") and done.stderr.count("\n") == 1, done.stderr
            assert next(iter(env)) in done.stderr
