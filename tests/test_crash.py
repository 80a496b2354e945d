"""SIGKILL a writer at random moments; every acknowledged write must survive intact."""

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript

WORKER = Path(__file__).with_name("crash_worker.py")
KILLS = 50


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
@pytest.mark.timeout(600)
def test_sigkill_fifty_times_loses_no_acknowledged_write(aries_home: Path) -> None:
    manager = WorkspaceManager()
    manager.create("crash")
    rng = random.Random(20261122)
    acked_messages: dict[str, str] = {}
    acked_artifacts: set[str] = set()
    env = {**os.environ, "PYTHONPATH": str(WORKER.parent.parent)}
    torn_seen = 0
    for round_id in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "crash", str(round_id)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        buffer = b""
        # wait for the child to be writing, then let it run a random while
        deadline = time.monotonic() + 30
        while b"\n" not in buffer and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                buffer += os.read(proc.stdout.fileno(), 65536)
        assert b"\n" in buffer, proc.stderr.read().decode() if proc.poll() is not None else "child never wrote"
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(proc.pid, signal.SIGKILL)
        rest, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err.decode()
        buffer += rest
        for line in buffer.decode().splitlines():
            kind, ident, value = line.split(" ", 2)
            if kind == "T":
                acked_messages[ident] = value
            else:
                acked_artifacts.add(ident)

        # re-open as Aries does after a crash, then check everything
        workspace, report = manager.open("crash")
        torn_seen += sum(1 for p in report.transcript_problems if p.torn)
        assert all(p.torn for p in report.transcript_problems), report.transcript_problems
        assert report.artifact_problems == []
        found: dict[str, str] = {}
        for path in workspace.conversations():
            result = read_transcript(path)
            assert result.problems == [], result.problems  # every file parses after recovery
            found.update({e["message_id"]: e["content"] for e in result.entries})
        missing = {k: v for k, v in acked_messages.items() if found.get(k) != v}
        assert not missing, f"round {round_id}: lost acknowledged entries {list(missing)[:3]}"
        registry = workspace.artifacts_dir / "registry.json"
        # no registry yet: the child was killed before its first artifact was written
        manifest = json.loads(registry.read_text()) if registry.exists() else {"artifacts": []}
        hashes = {item["hash"] for item in manifest["artifacts"]}
        assert acked_artifacts <= hashes, f"round {round_id}: lost artifacts"
    assert len(acked_messages) > KILLS
    # message ids stay unique and ordered across every restart
    workspace, _ = manager.open("crash")
    entries = read_transcript(workspace.conversations()[-1]).entries
    ids = [e["message_id"] for e in entries]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    print(f"{KILLS} kills, {len(acked_messages)} acknowledged entries, {torn_seen} torn tails quarantined")
