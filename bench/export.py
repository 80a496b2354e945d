"""Export a conversation as a document (issue 32 item 2): how long ``aries history export`` takes for
a conversation of N turns, and whether two exports are the same bytes.

    .venv/bin/python bench/export.py [--turns 200] [--small] [--json]

One conversation of N turns is written through the real writer (``services.conversation``) in a
temporary workspace: each turn an operator message (≈ 300 characters), a retrieval entry with 4
recorded passages (≈ 600 characters each), one tool call (arguments, a ≈ 3 KB result and the
gateway's decision) and an answer (≈ 1.5 KB) citing two passages, from a seeded vocabulary with a
secret-shaped token in every tenth turn. Then each format is exported three times through
``services.export.export_conversation`` (the first pays for loading the secret detectors): the
warm time, per turn and per KB of transcript, and whether the exports are byte-identical.
``--small`` (20 turns) is the CI-sized variant (``tests/export/test_bench.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = (
    "kestrel meadow falcon hover wind grass survey index chunk passage answer policy gateway audit rule "
    "operator approve deny write read file path model turn context window retrieval citation handle"
).split()


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
        if len(words) % 14 == 0:
            words[-1] += ".\n"
    return " ".join(words)


def _passage(rng: random.Random, source: str) -> dict[str, Any]:
    handle = f"docs:{rng.getrandbits(64):016x}"
    return {"handle": handle, "source_path": source, "page": None, "section": "Survey", "text": _text(rng, 600)}


def _tool_call(rng: random.Random, n: int, turn: str) -> Any:
    from services.conversation import ToolCallRecord

    decision = {"action": "allow", "rule": "mode.guide.read_only", "approved_by": "mode"}
    output = {"status": "ok", "data": {"text": _text(rng, 3000)}, "error": None, "meta": {"decision": decision}}
    return ToolCallRecord(
        tool_id="builtin:fs:read_text",
        input={"path": f"notes{n}.txt"},
        output=output,
        ok=True,
        duration_ms=1.0,
        call_id=f"call-{n}",
        summary="builtin:fs:read_text: ok",
        turn_id=turn,
        step=2,
    )


def write(root: Path, turns: int) -> tuple[Any, str]:
    from services.conversation import AssistantAnswer, Conversation, RetrievalSet, UserMessage
    from services.workspace.manager import WorkspaceManager

    os.environ["ARIES_HOME"] = str(root)
    workspace = WorkspaceManager().create("bench")[0]
    conversation = Conversation(workspace.new_transcript())
    rng = random.Random(32)
    for n in range(1, turns + 1):
        turn = conversation.new_turn()
        secret = " token ghp_R8x2Kq9Lm4Nz7Vb3Tc6Yh1Jd5Fg0Ws2Pe8Ua" if n % 10 == 0 else ""
        conversation.record(UserMessage(text=_text(rng, 300) + secret, turn_id=turn, step=0))
        passages = [_passage(rng, f"doc{n}-{i}.md") for i in range(4)]
        handles = [p["handle"] for p in passages]
        conversation.record(
            RetrievalSet(query="q", index="docs", handles=handles, passages=passages, turn_id=turn, step=1)
        )
        conversation.record(_tool_call(rng, n, turn))
        answer = _text(rng, 1500) + f" [{handles[0]}] [{handles[1]}]" + secret
        conversation.record(
            AssistantAnswer(text=answer, provider="ollama", model="ollama:bench", citations=handles[:2], turn_id=turn)
        )
    return workspace, conversation.conversation_id


def run(turns: int) -> dict[str, Any]:
    from services.export import FORMATS, export_conversation

    with tempfile.TemporaryDirectory(prefix="aries-export-bench-") as folder:
        started = time.perf_counter()
        workspace, conversation_id = write(Path(folder), turns)
        written = time.perf_counter() - started
        size = (workspace.transcripts_dir / f"{conversation_id}.ndjson").stat().st_size
        result: dict[str, Any] = {"turns": turns, "transcript_bytes": size, "write_s": round(written, 2)}
        for fmt in FORMATS:
            times, outputs = [], []
            for _ in range(3):
                start = time.perf_counter()
                outputs.append(export_conversation(workspace, conversation_id, fmt).data)
                times.append(time.perf_counter() - start)
            warm = min(times[1:])
            result[fmt] = {
                "first_s": round(times[0], 2),
                "warm_s": round(warm, 2),
                "ms_per_turn": round(warm * 1000 / turns, 1),
                "kb_per_s": round(size / 1024 / warm, 1),
                "bytes": len(outputs[0]),
                "identical": len(set(outputs)) == 1,
                "secrets_left": outputs[0].count(b"ghp_"),  # every tenth turn holds one: all redacted
            }
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--small", action="store_true", help="20 turns (CI)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(20 if args.small else args.turns)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    megabytes = result["transcript_bytes"] / 1e6
    print(f"{result['turns']} turns, transcript {megabytes:.2f} MB, written in {result['write_s']} s")
    for fmt in ("md", "html"):
        r = result[fmt]
        speed = f"{r['ms_per_turn']} ms/turn, {r['kb_per_s']} KB/s"
        print(f"  {fmt:4}  first {r['first_s']} s  warm {r['warm_s']} s  ({speed})", end="")
        print(f"  {r['bytes'] / 1e6:.2f} MB  identical: {r['identical']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
