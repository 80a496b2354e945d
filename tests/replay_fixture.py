"""A plan run recorded by the code *before* issue 29's typed tool outputs, kept as a fixture.

``python -m tests.replay_fixture`` (run once, from the commit before the change) records the run in
a fresh ``ARIES_HOME`` and writes ``tests/fixtures/replay_issue29/``: the workspace's audit store as
SQL text (``audit.sql``) and the run's transcript (``transcript.ndjson``), with the two values that
differ from machine to machine replaced by placeholders (``${ROOT}``: the workspace folder; ``${HOST}``:
the loopback server's ``127.0.0.1:port``). ``tests/test_replay_outputs.py`` loads it into a new
workspace laid out by :func:`lay_out` and replays it with today's code.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "replay_issue29"
PAGE = "<html><head><title>Steady</title></head><body><p>a stable page</p></body></html>"


def page_routes() -> dict[str, Any]:
    from aiohttp import web

    async def page(request: Any) -> Any:
        return web.Response(text=PAGE, content_type="text/html")

    return {"GET /page": page}


def lay_out(root: Path) -> None:
    """The workspace files the recorded plan reads, lists, searches and overwrites."""
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("# A\nsteady alpha\n")
    (root / "docs" / "b.txt").write_text("beta\nsteady\nlast line\n")
    (root / "notes.txt").write_text("first line\nsteady state\n")
    (root / "out.txt").write_text("old\n")


def plan_and_policy(directory: Path, host: str) -> tuple[Path, Path]:
    plan = directory / "plan.yaml"
    plan.write_text(
        "version: '1.0'\nname: issue29-outputs\nsteps:\n"
        "  - tool: fs.read\n    args: {path: notes.txt}\n"
        "  - tool: fs.list\n    args: {path: docs}\n"
        "  - tool: fs.search\n    args: {path: docs, query: steady, context_lines: 1}\n"
        '  - tool: fs.write\n    args: {path: out.txt, content: "written\\n"}\n'
        "  - tool: shell.run\n    args: {cmd: [echo, steady]}\n"
        "  - tool: shell.run\n    args: {cmd: [wc, -c, notes.txt]}\n"
        f"  - tool: http.get\n    args: {{url: 'http://{host}/page'}}\n"
        "  - tool: fs.read\n    args: {path: missing.txt}\n"
    )
    policy = directory / "capsule.yaml"
    policy.write_text(
        "boundary: deny_by_default\ntools:\n"
        "  fs.read: {allow_paths: ['./**']}\n"
        "  fs.list: {allow_paths: ['./**']}\n"
        "  fs.search: {allow_paths: ['./**']}\n"
        "  fs.write: {allow_paths: ['./**']}\n"
        "  shell.run: {allow_executables: [echo, wc]}\n"
        f"  http.get: {{allow_domains: ['{host}']}}\n"
    )
    return plan, policy


def load(root: Path, host: str) -> None:
    """Write the recorded audit store into the workspace at ``root`` (placeholders filled in)."""
    text = (FIXTURE / "audit.sql").read_text(encoding="utf-8")
    conn = sqlite3.connect(root / "audit.db")
    try:
        conn.executescript(text.replace("${ROOT}", str(root)).replace("${HOST}", host))
    finally:
        conn.close()


def recorded_transcript(root: Path, host: str) -> list[str]:
    text = (FIXTURE / "transcript.ndjson").read_text(encoding="utf-8")
    return text.replace("${ROOT}", str(root)).replace("${HOST}", host).splitlines()


def _record() -> None:
    from tests.loopback import LoopbackServer

    server = LoopbackServer(page_routes())
    try:
        with tempfile.TemporaryDirectory(prefix="aries-record-") as tmp:
            home = Path(tmp) / "home"
            env = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash"}
            aries = [sys.executable, "-m", "app"]
            subprocess.run([*aries, "workspace", "new", "demo"], env=env, check=True, capture_output=True)
            root = home / "workspaces" / "demo"
            lay_out(root)
            host = f"127.0.0.1:{server.port}"
            plan, policy = plan_and_policy(Path(tmp), host)
            ran = subprocess.run(
                [*aries, "-w", "demo", "run", str(plan), "--policy", str(policy), "--json"],
                env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if ran.returncode not in (0, 1) or '"status": "denied"' in ran.stdout:  # the last step fails by design
                raise SystemExit(ran.stdout + ran.stderr)
            conn = sqlite3.connect(root / "audit.db")
            dump = "\n".join(conn.iterdump()) + "\n"
            conn.close()
            (transcript,) = (root / "transcripts").glob("*.ndjson")
            FIXTURE.mkdir(parents=True, exist_ok=True)
            for name, body in (("audit.sql", dump), ("transcript.ndjson", transcript.read_text(encoding="utf-8"))):
                (FIXTURE / name).write_text(body.replace(str(root), "${ROOT}").replace(host, "${HOST}"))
            print(ran.stdout)
    finally:
        server.stop()


if __name__ == "__main__":
    _record()
