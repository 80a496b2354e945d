"""A long conversation against the real engine: ``aries ask --continue`` in a loop, n_ctx 2048.

    .venv/bin/python bench/long_conversation.py [--turns 200] [--max-tokens 32] [--configure]

Needs the real-model lane installed (``python tests/real_model/install.py``). Starts
``python -m llama_cpp.server`` with Gemma 3 270M (alias ``gemma``, ``n_ctx`` 2048) on loopback, makes a
workspace in a temporary ``ARIES_HOME`` (answers capped at ``--max-tokens``; with ``--configure``
the window is also set in ``settings.models``, else Aries learns it from the server's first overflow)
and runs ``aries -w bench ask --continue --json QUESTION`` that many times, each a new process as a
user's shell loop would. Then it reads the transcript.

It reports: turns that failed (exit code, an error notice), the per-turn wall time (median, p95,
max), the window and where it came from, the largest request as estimated, the first turn that left
something out, and whether every request that left earlier turns out has its ``context window``
report in the transcript (turn by turn: what was left out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTIONS = (
    "What is a lighthouse for?",
    "Tell me more about the keepers who lived there.",
    "How did the lamps work before electricity?",
    "Which was the tallest one ever built?",
    "Summarise what we said so far.",
    "What about harbours at night?",
    "And the ships that pass them?",
)


def run(turns: int, max_tokens: int, configure: bool) -> dict[str, Any]:
    from tests.real_model.llama_server import LlamaServer, missing

    reason = missing()
    if reason is not None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="aries-longconv-") as tmp:
        home = Path(tmp) / "home"
        server = LlamaServer(Path(tmp) / "server", aliases={"gemma": {"n_ctx": 2048}}).start()
        try:
            env = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", **server.env("gemma")}

            def aries(*args: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, timeout=600
                )

            assert aries("workspace", "new", "bench").returncode == 0
            settings: dict[str, Any] = {"max_tokens": max_tokens}
            if configure:
                settings["context_window"] = 2048
            sys.path.insert(0, str(ROOT))
            os.environ["ARIES_HOME"] = str(home)
            from services.workspace.manager import WorkspaceManager

            workspace = WorkspaceManager().open("bench")[0]
            workspace.update(models={"openai:gemma": settings})
            workspace.close()
            wall: list[float] = []
            failures: list[str] = []
            responses: list[dict[str, Any]] = []
            for n in range(1, turns + 1):
                question = f"Turn {n}. {QUESTIONS[n % len(QUESTIONS)]}"
                args = ["-w", "bench", "ask", "--json", question]
                if n > 1:
                    args.insert(3, "--continue")
                started = time.perf_counter()
                done = aries(*args)
                wall.append(time.perf_counter() - started)
                if done.returncode != 0:
                    failures.append(f"turn {n}: exit {done.returncode}: {done.stderr.strip()[:300]}")
                    continue
                responses.append(json.loads(done.stdout))
                if n % 20 == 0:
                    print(f"  {n} turns, last {wall[-1]:.1f} s", flush=True)
            transcript = Path(responses[-1]["logs_ref"].split("#")[0]) if responses else None
        finally:
            server.stop()
        entries = [json.loads(line) for line in transcript.read_text().splitlines()] if transcript else []
    reports = {e["turn_id"]: e for e in entries if e.get("kind") == "context"}
    errors = [e["content"] for e in entries if e.get("role") == "notice" and e.get("level") == "error"]
    left_out = [r for r in responses if r["context"].get("left_out", {}).get("turns")]
    unreported = [r["turn_id"] for r in left_out if r["turn_id"] not in reports]
    ordered = sorted(wall)
    return {
        "turns": turns,
        "failed turns": len(failures),
        "first failures": failures[:3],
        "error notices": len(errors),
        "wall s total": round(sum(wall), 1),
        "wall s per turn median": round(statistics.median(wall), 2),
        "wall s per turn p95": round(ordered[int(len(ordered) * 0.95) - 1], 2) if ordered else None,
        "wall s per turn max": round(max(wall), 2) if wall else None,
        "window": responses[-1]["context"].get("window") if responses else None,
        "window source": responses[-1]["context"].get("window_source") if responses else None,
        "largest request estimated": max(
            (r["context"].get("prompt_tokens_estimated", 0) for r in responses), default=0
        ),
        "first turn leaving turns out": left_out[0]["turn_id"].rsplit("-", 1)[-1] if left_out else None,
        "requests leaving turns out": len(left_out),
        "  … each with its report in the transcript": not unreported,
        "context reports in the transcript": len(reports),
        "refits after a server overflow": sum(1 for r in reports.values() if r.get("reason")),
        "turns left out of the last request": responses[-1]["context"]["left_out"]["turns"] if responses else None,
        "length stops": sum(1 for r in responses if r.get("finish_reason") == "length"),
    }


def main(argv: list[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the server is stopped on the way out
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--configure", action="store_true", help="set context_window 2048 instead of learning it")
    options = parser.parse_args(argv)
    stats = run(options.turns, options.max_tokens, options.configure)
    for key, value in stats.items():
        print(f"{key:>44}: {value}")
    return 0 if not stats["failed turns"] and not stats["error notices"] else 1


if __name__ == "__main__":
    sys.exit(main())
