"""The audit store is checked when it is opened, and every storage failure is one typed line.

Real SQLite files damaged on purpose; a read-only and a full file system are real tmpfs mounts in
a private mount namespace (``unshare -rm``), skipped where the kernel does not allow that.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from services.audit.db import SCHEMA_VERSION, AuditStoreError
from services.audit.log import AuditStore
from services.errors import AriesError
from services.tools.calls import ApprovalDecision
from services.tools.gateway import ToolGateway
from tests.tools.conftest import Sandbox

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[2]


def _filled(path: Path, rows: int = 400) -> None:
    with AuditStore(path) as store:
        store.start_run("r-1")
        for n in range(rows):
            store.record_call(
                call_id=f"c-{n}",
                run_id="r-1",
                step_index=n,
                tool_name="builtin:fs:read_text",
                args={"path": f"file-{n}.txt", "pad": "x" * 200},
                created_at="2026-01-01T00:00:00.000Z",
                source="test",
                tier="READ_ONLY",
            )
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0  # checkpointed


def _one_line(error: AriesError) -> str:
    assert "\n" not in error.message and "Traceback" not in error.message
    return error.message


def test_a_fresh_store_is_versioned(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with AuditStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_corrupt_bytes_in_the_middle_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _filled(path)
    size = path.stat().st_size
    page = 4096
    assert size > 8 * page
    with path.open("r+b") as handle:  # overwrite two whole pages in the middle
        handle.seek((size // page // 2) * page)
        handle.write(bytes(range(256)) * (2 * page // 256))
    with pytest.raises(AuditStoreError) as caught:
        AuditStore(path)
    message = _one_line(caught.value)
    assert "damaged" in message and str(path) in message and "move it aside" in message


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _filled(path)
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    with pytest.raises(AuditStoreError) as caught:
        AuditStore(path)
    assert "damaged" in _one_line(caught.value) or "malformed" in caught.value.message


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    path.write_bytes(b"this is not sqlite\n" * 400)
    with pytest.raises(AuditStoreError, match="not an SQLite database"):
        AuditStore(path)


def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _filled(path, rows=3)
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 4}")
    before = path.read_bytes()
    with pytest.raises(AuditStoreError) as caught:
        AuditStore(path)
    assert _one_line(caught.value).startswith(
        f"audit.db was written by a newer Aries (schema {SCHEMA_VERSION + 4}; this one knows {SCHEMA_VERSION})"
    )
    assert path.read_bytes() == before  # never silently migrated


def test_an_older_store_is_migrated_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _filled(path, rows=3)
    with sqlite3.connect(path) as db:  # what an Aries before versioning left: user_version 0
        db.execute("PRAGMA user_version = 0")
        db.execute("CREATE TABLE retrievals (id INTEGER PRIMARY KEY, query TEXT)")
        db.execute("INSERT INTO retrievals(query) VALUES ('kept')")
    with AuditStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert [c["call_id"] for c in store.calls()] == ["c-0", "c-1", "c-2"]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT query FROM retrievals").fetchall() == [("kept",)]


def test_the_retrieval_audit_refuses_a_damaged_file_too(tmp_path: Path) -> None:
    from services.retrieval.audit import RetrievalAudit

    path = tmp_path / "audit.db"
    path.write_bytes(b"garbage" * 1000)
    audit = RetrievalAudit(path)
    with pytest.raises(AuditStoreError, match="not an SQLite database"):
        audit.record(query="q", index="i", embedding_model="m", params={}, hits=[])


def test_the_cli_says_one_line_for_a_damaged_audit_db(aries_home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ARIES_HOME": str(aries_home)}
    cli = [sys.executable, "-m", "app.cli"]
    subprocess.run([*cli, "workspace", "new", "demo"], env=env, check=True, capture_output=True)
    (aries_home / "workspaces" / "demo" / "audit.db").write_bytes(b"\x00garbage" * 2000)
    done = subprocess.run(
        [*cli, "-w", "demo", "tool", "call", "builtin:fs:list_dir", "--args", '{"path": "."}'],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aries: ") and "audit database" in lines[0]


# -- the tier on the call row (item 2) ----------------------------------------------------------


def test_the_call_row_keeps_the_tier_the_decision_used(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(approver=lambda request: ApprovalDecision.deny("not today"))
    gateway.execute_sync("builtin:shell:run", {"argv": ["sudo", "true"]})  # sudo raises the tier
    gateway.execute_sync("builtin:shell:run", {"argv": ["true"]})
    raised, plain = gateway.audit.calls()[-2:]
    assert raised["policy_decision"]["tier"] == "EXEC_PRIVILEGED"
    assert raised["tier"] == "EXEC_PRIVILEGED"  # was the tool's fixed EXEC_USERSPACE
    assert plain["tier"] == plain["policy_decision"]["tier"]


# -- real read-only and full file systems ----------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from services.audit.log import AuditStore
    from services.audit.db import AuditStoreError
    mode, mount = sys.argv[1], Path(sys.argv[2])
    path = mount / "audit.db"
    def record(store, n, pad):
        store.record_call(call_id=f"c-{n}", run_id="r", step_index=n, tool_name="t", args={"pad": pad},
                          created_at="now", source=None, tier=None)
    try:
        if mode == "prepare":
            with AuditStore(path) as store:
                store.start_run("r")
                record(store, 0, "")
            print(json.dumps({"ok": True}))
            sys.exit(0)
        store = AuditStore(path)
        if mode == "full":
            store.start_run("r")
            for n in range(100000):
                record(store, n, "x" * 4000)
        else:
            record(store, 1, "")
        print(json.dumps({"ok": True}))
    except AuditStoreError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": exc.message}))
    """
)


def _namespaced(script: str) -> dict[str, object]:
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not available")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("private mount namespaces are not allowed here")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(["unshare", "-rm", "sh", "-ec", script], capture_output=True, text=True, env=env)
    if "mount:" in done.stderr and done.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_read_only_file_system_is_one_clear_line(tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    mount.mkdir()
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    py = sys.executable
    result = _namespaced(
        f"mount -t tmpfs -o size=4m tmpfs {mount}\n"
        f"{py} {child} prepare {mount} >/dev/null\n"
        f"mount -o remount,ro {mount}\n"
        f"{py} {child} write {mount}\n"
    )
    assert result.get("error") == "AuditStoreError", result
    message = str(result["message"])
    assert "\n" not in message and "audit database" in message
    assert "read-only" in message or "cannot be opened" in message


def test_a_full_disk_is_one_clear_line(tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    mount.mkdir()
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    result = _namespaced(f"mount -t tmpfs -o size=256k tmpfs {mount}\n{sys.executable} {child} full {mount}\n")
    assert result.get("error") == "AuditStoreError", result
    message = str(result["message"])
    assert "\n" not in message and "the disk is full" in message
