"""Turn-loop overhead: a whole assistant turn vs the bare provider call it wraps, in one run.

    .venv/bin/python bench/assistant.py [--iterations 200] [--protocol ollama|openai]

A scripted loopback server (tests/models/servers.py, zero delay) answers every chat request. Measured,
interleaved, after a warm-up:

- ``bare``: one ``provider.stream(...)`` consumed to the end (the HTTP round trip and parsing);
- ``turn``: ``TurnLoop.run`` with the same one-step text answer (records the user message and the
  answer in the transcript, builds the prompt, offers the policy's tools; no index in use);
- ``tool turn``: a turn whose model asks for ``builtin:fs:list_dir`` once and then answers;
- ``tool call``: that same call through ``Session.call_tool`` alone (gateway, audit, transcript).

Per-turn overhead = turn − bare; per-tool-step overhead = tool turn − turn − bare − tool call (the second
model call and the tool's own governed cost taken out). Prints medians and the ratio turn / bare.

The context window's counting, side by side in the same run (``services.assistant.context``): fitting
one request — the earlier turns read from the conversation, every message, passage and the offered
tool schemas counted, the oldest turns left out — with the history the bench conversation has
(``count``), and with a 200-turn history, warm (texts counted before: the TUI, a turn's later steps)
and cold (a fresh process: ``aries ask --continue``), the budget being 2 ms a turn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def _measure(iterations: int, protocol: str) -> dict[str, Any]:
    from services.assistant import TurnLoop
    from services.models.base import ChatMessage, ModelRequest
    from services.models.config import make_provider, resolve_model
    from services.session.session import Session
    from services.workspace.manager import WorkspaceManager
    from tests.models.servers import Call, Reply, ScriptedServer

    server = ScriptedServer(protocol).start()
    with tempfile.TemporaryDirectory(prefix="aries-bench-") as tmp:
        os.environ["ARIES_HOME"] = tmp
        workspace, _ = WorkspaceManager().create("bench")
        if protocol == "ollama":
            env = {"ARIES_MODEL": "ollama:llama3.2:3b", "OLLAMA_HOST": server.url}
        else:
            env = {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url}
        provider = make_provider(resolve_model(None, env))
        session = Session(workspace, interactive=False)
        loop = TurnLoop(session, provider)
        answer = "The answer is forty-two, as the passages say."

        async def bare() -> None:
            server.add(Reply(text=answer, chunk_size=8))
            request = ModelRequest(messages=[ChatMessage(role="user", content="question?")])
            async for _ in provider.stream(request):
                pass

        async def turn() -> None:
            server.add(Reply(text=answer, chunk_size=8))
            outcome = await loop.run("question?")
            if outcome.error:
                raise SystemExit(outcome.error)

        async def tool_turn() -> None:
            server.add(Reply(tool_calls=[Call("builtin:fs:list_dir", {"path": "."})]), Reply(text=answer, chunk_size=8))
            outcome = await loop.run("list it")
            if outcome.error or len(outcome.tool_calls) != 1:
                raise SystemExit(f"tool turn failed: {outcome}")

        async def tool_call() -> None:
            result = await session.call_tool("builtin:fs:list_dir", {"path": "."})
            if not result.ok:
                raise SystemExit(result.to_dict())

        from services.assistant.context import ContextFitter, history_from_entries, profile_system_prompt
        from services.models.tokens import estimate_tokens

        offer = loop.tool_offer()
        system = profile_system_prompt(None)
        long_history = [
            {"role": role, "turn_id": f"c-t{n:04d}", "content": f"{role} {n}: " + "words of an ordinary answer " * 12}
            for n in range(1, 201)
            for role in ("user", "assistant")
        ]

        def fit(entries: list[dict[str, Any]], cold: bool) -> None:
            if cold:
                estimate_tokens.cache_clear()
            history = history_from_entries(entries, "current")
            fitter = ContextFitter(system, "question?", [], history, window=2048, reserve=256)
            fitter.fit([], offer.schemas, offer.tokens)

        async def count() -> None:
            fit(session.conversation.dialogue(), False)

        async def count_200_warm() -> None:
            fit(long_history, False)

        async def count_200_cold() -> None:
            fit(long_history, True)

        steps = {
            "bare": bare,
            "turn": turn,
            "tool turn": tool_turn,
            "tool call": tool_call,
            "count": count,
            "count 200 turns warm": count_200_warm,
            "count 200 turns cold": count_200_cold,
        }
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(min(20, iterations)):
            for step in steps.values():
                await step()
        for _ in range(iterations):
            for name, step in steps.items():
                started = time.perf_counter()
                await step()
                times[name].append((time.perf_counter() - started) * 1000)
            if len(session.conversation.read().entries) > 2000:  # keep the history read small and steady
                session.new_conversation()
        await provider.aclose()
        await session.aclose()
        workspace.close()
    server.stop()
    med = {name: statistics.median(values) for name, values in times.items()}
    return {
        "protocol": protocol,
        "iterations": iterations,
        **{f"{name} median ms": round(value, 3) for name, value in med.items()},
        "turn overhead ms": round(med["turn"] - med["bare"], 3),
        "tool step overhead ms": round(med["tool turn"] - med["turn"] - med["bare"] - med["tool call"], 3),
        "ratio turn/bare": round(med["turn"] / med["bare"], 2),
        "counting / turn overhead": round(med["count"] / max(med["turn"] - med["bare"], 1e-9), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--protocol", choices=("ollama", "openai"), default="ollama")
    options = parser.parse_args(argv)
    stats = asyncio.run(_measure(options.iterations, options.protocol))
    for key, value in stats.items():
        print(f"{key:>32}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
