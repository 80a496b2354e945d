"""The hostile-bundle suite: nothing from a bundle runs, connects or reads outside the workspace before
the operator trusts it, and nothing prints a traceback.

Every bundle (``tests/trust/hostile.py``: 35 cases, built from a real workspace and exported in Aries's
real format) is imported with the real CLI into a fresh home; then one probe process runs the commands
a user would (``tool list``, ``tool doctor``, reading ``/etc/hostname``, a shell call, a web fetch,
``rag query``, ``rag index list``, ``ask``, ``status``, ``replay``) with the model endpoints of the
operator's environment pointing at a loopback canary. Afterwards the canary has seen no connection and
no command wrote into its folder.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.trust.hostile import CASES, REPO, Canary, Case, aries, build_base, make_bundle

NAME = "victim"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_base(tmp_path_factory.mktemp("trust-base"))


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Canary]:
    server = Canary(tmp_path_factory.mktemp("canary"))
    yield server
    server.close()


def _run_id(base: Path) -> str:
    db = sqlite3.connect(base / "audit.db")
    try:
        return str(db.execute("SELECT run_id FROM plan_runs").fetchone()[0])
    finally:
        db.close()


def _env(canary: Canary) -> dict[str, str]:
    return {
        "AXIOMME_EMBEDDER": "hash",
        "OLLAMA_HOST": canary.url,  # the operator's own endpoints: a bundle's model setting would reach them
        "OPENAI_BASE_URL": f"{canary.url}/v1",
        "SECRET_KEY": "sk-operator-secret",
    }


def _probe(home: Path, canary: Canary, run_id: str) -> list[dict[str, object]]:
    commands = [
        ["-w", NAME, "tool", "list", "--json"],
        ["-w", NAME, "tool", "doctor"],
        ["-w", NAME, "tool", "call", "builtin:fs:read_text", "--args", '{"path": "/etc/hostname"}'],
        [
            "-w",
            NAME,
            "tool",
            "call",
            "builtin:shell:run",
            "--args",
            json.dumps({"argv": ["touch", str(canary.folder / "shell")]}),
        ],
        ["-w", NAME, "tool", "call", "builtin:web:fetch", "--args", json.dumps({"url": f"{canary.url}/x"})],
        ["-w", NAME, "rag", "query", "quokka", "--index", "docs", "--json"],
        ["-w", NAME, "rag", "index", "list", "--json"],
        ["-w", NAME, "ask", "where does the quokka live?", "--json"],
        ["-w", NAME, "status", "--json"],
        ["-w", NAME, "replay", run_id],
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as spec:
        json.dump({"commands": commands}, spec)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.trust.probe", spec.name],
            capture_output=True,
            text=True,
            env={**os.environ, "ARIES_HOME": str(home), **_env(canary)},
            timeout=300,
            cwd=REPO,
        )
    finally:
        os.unlink(spec.name)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _one_line(stderr: str) -> bool:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("aries: ")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_bundle(case: Case, base: Path, canary: Canary, tmp_path: Path) -> None:
    bundle = make_bundle(base, tmp_path, case, canary)
    home = tmp_path / "victim-home"
    before = canary.connections
    imported = aries("workspace", "import", str(bundle), "--name", NAME, home=home, env=_env(canary))
    assert "Traceback" not in imported.stdout + imported.stderr
    workspaces = home / "workspaces"
    if case.outcome == "refuse":
        assert imported.returncode == 2, (imported.stdout, imported.stderr)
        assert _one_line(imported.stderr), imported.stderr
        assert "refused" in imported.stderr
        leftovers = [p.name for p in workspaces.iterdir() if p.name != ".trust"] if workspaces.is_dir() else []
        assert leftovers == [], leftovers  # no workspace, no staging folder
        assert canary.connections == before and canary.files() == []
        return
    assert imported.returncode == 0, (imported.stdout, imported.stderr)
    if case.outcome == "quarantine":
        assert "quarantined until you trust it" in imported.stdout, imported.stdout
    root = workspaces / NAME
    assert not (root / "policy.yaml").exists() and not (root / "profiles").exists()
    assert not (root / "commands").exists() and not (root / "AGENTS.md").exists()
    results = _probe(home, canary, _run_id(base))
    for result in results:
        assert not result["traceback"], result
    assert canary.files() == [], f"a bundle's setting ran a command: {canary.files()}"
    assert canary.connections == before, "a bundle's setting opened a connection"
    listing, read, shell, query, indexes, replay = (results[i] for i in (0, 2, 3, 5, 6, 9))
    assert listing["code"] == 0 and json.loads(str(listing["stdout"]))["mcp_servers"] == []
    assert read["code"] != 0 and "outside the allowed roots" in str(read["stdout"]), read
    assert shell["code"] != 0, shell
    assert query["code"] == 0 and "quokka" in str(query["stdout"]), query
    assert all(row.get("roots", []) == [] for row in json.loads(str(indexes["stdout"]))), indexes
    if case.name == "grant-store":  # grants live only in $ARIES_HOME: the bundle's copies are inert data
        from services.settings.operator import load_settings, settings_path

        assert load_settings(settings_path(home)).grants == []
        assert "allowed" not in str(shell["stdout"]) and "operator_session" not in str(shell["stdout"])
    if case.name == "plan-run":
        assert replay["code"] != 0 and "trust the workspace first" in str(replay["stderr"]), replay
    review = aries("workspace", "trust", NAME, "--json", home=home, env=_env(canary))
    assert review.returncode == 0, review.stderr
    data = json.loads(review.stdout)
    if case.outcome == "quarantine":
        assert data["status"] == "untrusted" and data["lines"], data
    if case.name == "hooks-canary":  # the review names each hook first, as the command it runs
        texts = [line["text"] if isinstance(line, dict) else line for line in data["lines"]]
        assert texts[0].startswith("hook pre runs `sh -c 'touch "), texts
        assert any(text.startswith("hook post runs") for text in texts), texts


def test_the_suite_has_every_class_the_issue_names() -> None:
    names = {case.name for case in CASES}
    assert len(CASES) >= 20
    for needed in (
        "mcp-command",
        "roots-slash",
        "commander-policy",
        "commander-setting",
        "cloud-endpoint-key",
        "profile-shell",
        "command-shell-profile",
        "command-named-trust",
        "agents-approved-all",
        "manifest-not-sqlite",
        "tantivy-meta-hostile",
        "hnsw-corrupt",
        "hooks-canary",
        "grant-store",
    ):
        assert needed in names
