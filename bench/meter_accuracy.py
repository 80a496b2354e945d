"""The context meter against the real server's count (issue 30, item 6).

    .venv/bin/python bench/meter_accuracy.py [--turns 20] [--max-tokens 48] [--n-ctx 2048] [--json]

A conversation of the long-conversation bench (``bench/long_conversation.py``: the 20 facts, ordinary
questions up to turn ``--turns - 1``, then the 20 questions) against ``python -m llama_cpp.server``
serving Gemma 3 270M (alias ``gemma``, ``n_ctx`` as given, the window set in ``settings.models``), one
``TurnLoop`` per turn as ``aries ask --continue`` runs them.

For every request Aries sends, it compares the meter's total (``ContextMeasured``: the breakdown's
``used``, what the header's ``ctx N/W`` shows) with the prompt tokens llama.cpp reports for that
same request. llama-cpp-python's stream carries no usage, so the bench sends each recorded request
body once more without streaming and with ``max_tokens`` 1 (its prompt is in the server's cache: this
costs little) and reads ``usage.prompt_tokens``. Since the stream gives no count, Aries never
calibrates against this server: every number here is the estimate before any calibration.

Reported: the first request's error, and over the run the mean, median, worst and 95th-percentile
absolute errors (signed: + is an over-count), the share of requests within ±5 %, and the answers'
output tokens and tokens per second as the usage line gives them. Needs
``python tests/real_model/install.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.long_conversation import messages, open_bench  # noqa: E402


class Recording:
    """The real provider, its request bodies kept (a bench's observer: every call goes through)."""

    def __init__(self, provider: Any, bodies: list[dict[str, Any]]) -> None:
        self.provider = provider
        self.bodies = bodies
        self.name = provider.name
        self.model = provider.model
        self.base_url = provider.base_url
        self.on_event: Callable[[Any], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)

    async def stream(self, request: Any) -> AsyncGenerator[Any, None]:
        self.bodies.append(self.provider.payload(request))
        async for event in self.provider.stream(request):
            yield event


def server_count(base_url: str, body: dict[str, Any]) -> int:
    """llama.cpp's ``usage.prompt_tokens`` for ``body`` (sent again, not streamed, one token out)."""
    again = {key: value for key, value in body.items() if key not in ("stream", "stream_options")}
    again.update(stream=False, max_tokens=1)
    request = urllib.request.Request(
        f"{base_url}/chat/completions", data=json.dumps(again).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return int(json.loads(response.read())["usage"]["prompt_tokens"])


class Metered:
    """Each turn's requests recorded and counted by the server: one row per request (``provider`` makes
    the turn's provider, whose ``on_event`` the turn loop calls; ``after`` counts when the turn is done)."""

    def __init__(self, base_url: str, make: Callable[[], Any]) -> None:
        self.base_url = base_url
        self.make = make
        self.rows: list[dict[str, Any]] = []
        self.last: list[dict[str, Any]] = []
        self.bodies: list[dict[str, Any]] = []
        self.meters: list[int] = []
        self.usage: list[Any] = []

    def heard(self, event: Any) -> None:
        from services.assistant import ContextMeasured, UsageReport

        if isinstance(event, ContextMeasured):
            self.meters.append(event.breakdown.used)
        elif isinstance(event, UsageReport):
            self.usage.append(event)

    def provider(self) -> Recording:
        self.bodies, self.meters, self.usage = [], [], []
        recording = Recording(self.make(), self.bodies)
        recording.on_event = self.heard
        return recording

    async def after(self, n: int, outcome: Any) -> None:
        self.last = self.bodies[-1:]
        for body, meter in zip(self.bodies, self.meters, strict=False):
            actual = await asyncio.to_thread(server_count, self.base_url, body)
            report = self.usage[-1] if self.usage else None
            out = (report.completion_tokens or report.completion_tokens_estimated) if report else 0
            seconds = report.generating_ms / 1000 if report else 0.0  # as the usage line reckons it
            self.rows.append(
                {
                    "turn": n,
                    "meter": meter,
                    "server": actual,
                    "error_pct": round((meter - actual) / actual * 100, 2),
                    "messages": len(body["messages"]),
                    "tools": len(body.get("tools") or []),
                    "out": out,
                    "answer_chars": len(outcome.text),
                    "out_per_s": round(out / seconds, 1) if seconds else 0.0,
                    "failed": outcome.error,
                }
            )


async def converse(session: Any, metered: Metered, turns: int) -> None:
    from services.assistant import TurnLoop

    for n, text in enumerate(messages(turns), 1):
        provider = metered.provider()
        outcome = await TurnLoop(session, provider, on_event=provider.on_event).run(text)
        await provider.aclose()
        await metered.after(n, outcome)
        if n % 10 == 0:
            print(f"  {n} turns", file=sys.stderr, flush=True)


def split_last(base_url: str, url: str, body: dict[str, Any], actual: int) -> dict[str, Any]:
    """The last request's error split into the messages' text (Aries' estimate against the model's own
    tokenizer, ``/extras/tokenize/count``) and the chat template's markers (the rest)."""
    from services.models.tokens import MESSAGE_OVERHEAD, REQUEST_OVERHEAD, estimate_tokens

    def count(text: str) -> int:
        request = urllib.request.Request(
            f"{url}/extras/tokenize/count",
            data=json.dumps({"input": text, "model": body["model"]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(json.loads(response.read())["count"])

    empty = count("")  # the tokenizer's own start marker
    texts = [str(message.get("content") or "").strip() for message in body["messages"]]  # as the template trims
    estimated = sum(estimate_tokens(text) for text in texts)
    counted = sum(count(text) - empty for text in texts)
    markers = REQUEST_OVERHEAD + MESSAGE_OVERHEAD * len(texts)
    return {
        "last request, text: estimate / tokenizer": f"{estimated} / {counted}",
        "last request, template: estimate / server": f"{markers} / {actual - counted}",
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [row["error_pct"] for row in rows]
    absolute = sorted(abs(e) for e in errors)
    p95 = absolute[max(0, int(len(absolute) * 0.95 + 0.999) - 1)] if absolute else 0.0
    return {
        "requests": len(rows),
        "first request: meter / llama.cpp": f"{rows[0]['meter']} / {rows[0]['server']} ({rows[0]['error_pct']:+.1f} %)",
        "error % mean (signed)": round(statistics.mean(errors), 2),
        "error % median (signed)": round(statistics.median(errors), 2),
        "error % worst": max(errors, key=abs),
        "error % p95 (absolute)": p95,
        "within ±5 %": f"{sum(1 for e in errors if abs(e) <= 5)}/{len(errors)}",
        "last request: meter / llama.cpp": f"{rows[-1]['meter']} / {rows[-1]['server']}",
        "answers: output tokens median": statistics.median(row["out"] for row in rows),
        "answers: output tokens/s median": statistics.median(row["out_per_s"] for row in rows),
        "failed turns": [row["turn"] for row in rows if row["failed"]],
    }


def run(turns: int, max_tokens: int, n_ctx: int) -> dict[str, Any]:
    from services.models.config import make_provider, resolve_model
    from tests.real_model.llama_server import LlamaServer, missing

    reason = missing()
    if reason is not None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="aries-meter-server-") as tmp:
        server = LlamaServer(Path(tmp), aliases={"gemma": {"n_ctx": n_ctx}}).start()
        try:
            session = open_bench(False)
            try:
                session.workspace.update(models={"openai:gemma": {"max_tokens": max_tokens, "context_window": n_ctx}})
                config = resolve_model(None, server.env("gemma"))
                metered = Metered(server.base_url, lambda: make_provider(config))
                asyncio.run(converse(session, metered, turns))
                rows = metered.rows
                split = split_last(server.base_url, server.url, metered.last[0], rows[-1]["server"])
            finally:
                session.close()
        finally:
            server.stop()
    return {"summary": {**summary(rows), **split}, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=20, help="the facts are asked for from this turn on")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    os.environ.setdefault("AXIOMME_EMBEDDER", "hash")  # the meter does not depend on the embedder
    with tempfile.TemporaryDirectory(prefix="aries-meter-") as home:
        os.environ["ARIES_HOME"] = home
        started = time.perf_counter()
        result = run(options.turns, options.max_tokens, options.n_ctx)
        result["summary"]["wall s"] = round(time.perf_counter() - started, 1)
    if options.json:
        print(json.dumps(result))
    else:
        for key, value in result["summary"].items():
            print(f"{key:>40}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
