"""``aries context …`` end to end through real ``aries`` subprocesses (ARIES_HOME in a temp dir, hash
embedder, the real engine): scenarios A, C, D, E, a URL add on loopback, SIGKILL during add at
every step followed by ``aries context reconcile``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.context.test_service import make_docs

pytestmark = pytest.mark.timeout(600)


def aries(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", **env}
    environ.pop("ARIES_CONTEXT_INGEST_FAULT", None) if "ARIES_CONTEXT_INGEST_FAULT" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=environ,
        timeout=180,
    )


def ok(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.lstrip().startswith(("{", "[")) else result.stdout


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aries: "), result.stderr
    return lines[0]


@pytest.fixture
def demo(aries_home: Path) -> Path:
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    return aries_home / "workspaces" / "demo"


def test_scenario_a_and_e_through_the_cli(demo: Path, aries_home: Path, tmp_path: Path) -> None:
    docs = make_docs(tmp_path)
    added = ok(aries("-w", "demo", "context", "add", str(docs), "--no-wait", "--json", home=aries_home))
    assert added["uri"] == "axiom://resources/docs" and added["queue"] is None
    # E: the queue is visible, readable, and read-only
    queue = ok(aries("-w", "demo", "context", "ls", "axiom://queue", "--json", home=aries_home))
    assert [e["name"].rsplit("-", 1)[-1] for e in queue] == ["tiers.json", "index.json"]
    job = ok(aries("-w", "demo", "context", "read", queue[0]["uri"], home=aries_home))
    assert job["state"] == "pending"
    # the next writing command reconciles first: the queue drains
    assert ok(aries("-w", "demo", "context", "reconcile", "--json", home=aries_home))["consistent"] is True
    assert ok(aries("-w", "demo", "context", "ls", "axiom://queue", "--json", home=aries_home)) == []
    # A: tiers and an L2 file
    l0 = ok(aries("-w", "demo", "context", "read", "axiom://resources/docs", "--tier", "L0", home=aries_home))
    assert "docs" in l0
    l1 = ok(aries("-w", "demo", "context", "read", "axiom://resources/docs", "--tier", "L1", home=aries_home))
    assert "README.md" in l1
    l2 = ok(aries("-w", "demo", "context", "read", "axiom://resources/docs/guide/install.md", home=aries_home))
    assert l2.startswith("# Install")
    listing = ok(aries("-w", "demo", "context", "ls", "axiom://resources/docs", "--all", "--json", home=aries_home))
    assert {".abstract.md", ".overview.md", "README.md", "guide", "notes.txt"} == {e["name"] for e in listing}
    # typed errors, one line
    again = aries("-w", "demo", "context", "add", str(docs), home=aries_home)
    assert again.returncode != 0 and "already exists" in one_line(again)
    bad = aries("-w", "demo", "context", "ls", "axiom://resources/../user", home=aries_home)
    assert bad.returncode == 2 and one_line(bad)
    into_queue = aries("-w", "demo", "context", "add", str(docs), "--to", "axiom://queue/x", home=aries_home)
    assert into_queue.returncode == 2 and "read-only" in one_line(into_queue)


def test_scenario_e_temp_is_visible_during_an_add(demo: Path, aries_home: Path, tmp_path: Path) -> None:
    docs = make_docs(tmp_path)
    env = {
        **os.environ,
        "ARIES_HOME": str(aries_home),
        "AXIOMME_EMBEDDER": "hash",
        "ARIES_CONTEXT_INGEST_FAULT": "staged:sleep=30",
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "app", "-w", "demo", "context", "add", str(docs), "--no-wait"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        temp = demo / "context" / "temp"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _staging_in(temp):
            time.sleep(0.2)
        seen = ok(aries("-w", "demo", "context", "ls", "axiom://temp", "--json", home=aries_home))
        staging = [e for e in seen if e["name"].startswith("staging-")]
        assert len(staging) == 1
        payload = ok(aries("-w", "demo", "context", "ls", staging[0]["uri"] + "/payload", "--json", home=aries_home))
        assert {e["name"] for e in payload} == {"README.md", "guide", "notes.txt"}
        assert not (demo / "context" / "resources" / "docs").exists()  # not visible outside temp yet
    finally:
        child.kill()
        child.wait()


def _staging_in(temp: Path) -> bool:
    return temp.is_dir() and any(p.name.startswith("staging-") for p in temp.iterdir())


STEPS = ("staged", "finalized", "enqueued", "running", "worked")


@pytest.mark.parametrize("step", STEPS)
def test_sigkill_during_add_then_reconcile_is_consistent(
    step: str, demo: Path, aries_home: Path, tmp_path: Path
) -> None:
    docs = make_docs(tmp_path)
    killed = aries(
        "-w", "demo", "context", "add", str(docs), home=aries_home, ARIES_CONTEXT_INGEST_FAULT=f"{step}:kill"
    )
    assert killed.returncode == -9, killed.stderr
    resource = demo / "context" / "resources" / "docs"
    files = (
        sorted(p.relative_to(resource).as_posix() for p in resource.rglob("*") if p.is_file())
        if resource.exists()
        else []
    )
    # never half-moved: absent, or every file there
    assert files in ([], ["README.md", "guide/install.md", "notes.txt"]) or set(files) >= {
        "README.md",
        "guide/install.md",
        "notes.txt",
    }
    report = ok(aries("-w", "demo", "context", "reconcile", "--json", home=aries_home))
    assert report["consistent"] and report["queue_remaining"] == 0
    if step == "staged":
        assert len(report["staging_removed"]) == 1 and not resource.exists()
    else:
        for folder in (resource, resource / "guide"):
            assert (folder / ".abstract.md").is_file() and (folder / ".overview.md").is_file()
    temp = demo / "context" / "temp"
    assert [p.name for p in temp.iterdir() if not p.name.startswith(".")] == []
    assert [p.name for p in (demo / "context" / "queue").iterdir() if not p.name.startswith(".")] == []
    again = ok(aries("-w", "demo", "context", "reconcile", "--json", home=aries_home))
    assert again["tiers_changed"] == [] and again["jobs_processed"] == 0
    indexed = again["index"] or {}
    assert indexed.get("added", []) == [] and indexed.get("updated", []) == []
    if step != "staged":
        unchanged = [p for p in indexed.get("unchanged", []) if p.startswith("resources/") and "/." not in p]
        assert sorted(unchanged) == [
            "resources/docs/README.md",
            "resources/docs/guide/install.md",
            "resources/docs/notes.txt",
        ]
    # no orphan chunk in either store: the manifest, Tantivy and Chroma agree chunk by chunk
    checked = aries("-w", "demo", "rag", "index", "check", "context", home=aries_home)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_scenario_c_session_through_the_cli(demo: Path, aries_home: Path, tmp_path: Path) -> None:
    assert ok(aries("-w", "demo", "context", "session", "new", "s1", home=aries_home)).strip() == "s1"
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text(
        json.dumps({"role": "user", "content": "I prefer tabs over spaces."})
        + "\n"
        + json.dumps({"role": "tool", "tool_name": "probe", "content": "exit 0"})
        + "\n"
        + json.dumps({"role": "user", "content": "TODO: write the release notes."})
        + "\n",
        encoding="utf-8",
    )
    ok(aries("-w", "demo", "context", "session", "append", "s1", str(jsonl), home=aries_home))
    report = ok(aries("-w", "demo", "context", "session", "commit", "s1", "--json", home=aries_home))
    assert report["archived"] == 3 and report["written"]
    assert report["queue"]["remaining"] == 0 and not report["queue"]["failed"]
    for uri in report["written"]:
        assert uri.startswith(("axiom://user/memories/", "axiom://agent/memories/"))
        ok(aries("-w", "demo", "context", "read", uri, home=aries_home))
    indexed = report["queue"]["index"]["added"]
    assert any(p.startswith(("user/memories/", "agent/memories/")) for p in indexed)
    missing = aries("-w", "demo", "context", "session", "commit", "nope", home=aries_home)
    assert missing.returncode != 0 and one_line(missing)


def test_scenario_d_export_import_and_unsafe_package(demo: Path, aries_home: Path, tmp_path: Path) -> None:
    docs = make_docs(tmp_path)
    ok(aries("-w", "demo", "context", "add", str(docs), home=aries_home))
    package = tmp_path / "docs.axpkg"
    ok(aries("-w", "demo", "context", "export", "axiom://resources/docs", str(package), home=aries_home))
    imported = ok(
        aries(
            "-w",
            "demo",
            "context",
            "import",
            str(package),
            "--to",
            "axiom://resources/copy",
            "--vectorize",
            "--json",
            home=aries_home,
        )
    )
    assert len(imported["jobs"]) == 2 and imported["queue"]["remaining"] == 0
    src, dst = demo / "context" / "resources" / "docs", demo / "context" / "resources" / "copy"
    for name in ("README.md", "guide/install.md", "notes.txt"):
        assert (src / name).read_bytes() == (dst / name).read_bytes()
    assert (dst / ".abstract.md").is_file()
    hostile = tmp_path / "hostile.axpkg"
    from tests.context.test_packages import _member, _package, _with_manifest

    _package(hostile, _with_manifest(_member("sub/../../x.md", b"x")))
    refused = aries("-w", "demo", "context", "import", str(hostile), "--to", "axiom://resources/evil", home=aries_home)
    assert refused.returncode == 2 and one_line(refused)
    assert not (demo / "context" / "resources" / "evil").exists()
    assert not (demo / "context" / "x.md").exists()


def test_url_add_through_the_cli(demo: Path, aries_home: Path, loopback: Any) -> None:
    from aiohttp import web

    from tests.tools.conftest import policy_data

    async def page(_request: Any) -> Any:
        return web.Response(text="# Wombats\n\nWombats dig burrows.\n", content_type="text/markdown")

    server = loopback({"/wombats.md": page})
    data = policy_data(demo)
    data["web"] = {"schemes": ["http"], "allow_private": [f"127.0.0.1:{server.port}"]}
    (demo / "policy.yaml").write_text(json.dumps(data), encoding="utf-8")
    added = ok(
        aries("-w", "demo", "context", "add", f"{server.url}/wombats.md", "--approve", "--json", home=aries_home)
    )
    assert added["uri"] == "axiom://resources/wombats.md" and added["queue"]["remaining"] == 0
    assert (demo / "context" / "resources" / "wombats.md").read_text() == "# Wombats\n\nWombats dig burrows.\n"
    refused = aries("-w", "demo", "context", "add", "http://127.0.0.1:9/x.md", "--approve", home=aries_home)
    assert refused.returncode == 3 and "refused" in one_line(refused)
    unapproved = aries(
        "-w", "demo", "context", "add", f"{server.url}/wombats.md", "--to", "axiom://resources/w2.md", home=aries_home
    )
    assert unapproved.returncode == 3 and "needs approval" in one_line(unapproved)  # guide mode: NETWORK asks
    assert not (demo / "context" / "resources" / "w2.md").exists()


def test_evidence_through_the_cli(demo: Path, aries_home: Path, tmp_path: Path) -> None:
    ok(aries("-w", "demo", "context", "add", str(make_docs(tmp_path)), home=aries_home))
    out = ok(aries("-w", "demo", "context", "evidence", "--out", str(tmp_path / "ev"), home=aries_home))
    names = [Path(line).name for line in out.splitlines()]
    assert names == ["operability.md", "reliability.md", "security.md"]
    for name in names:
        text = (tmp_path / "ev" / name).read_text()
        assert "| FAIL |" not in text and "Totals:" in text


@pytest.mark.parametrize(
    "command",
    [("context", "ls"), ("context", "find", "rivers"), ("context", "session", "new"), ("context", "reconcile")],
)
def test_a_bad_backend_setting_fails_fast_from_every_context_command(
    demo: Path, aries_home: Path, command: tuple[str, ...]
) -> None:
    done = aries("-w", "demo", *command, home=aries_home, AXIOMME_RETRIEVAL_BACKEND="postgres")
    assert done.returncode == 2 and "AXIOMME_RETRIEVAL_BACKEND='postgres'" in one_line(done)
    assert not (demo / "context" / "session").exists() or not any((demo / "context" / "session").iterdir())
