"""A long conversation: are the facts of its first turns still reachable at turn 200? (issue 30, item 1)

    .venv/bin/python bench/long_conversation.py --scripted [--turns 200] [--keyword-only] [--json]
    .venv/bin/python bench/long_conversation.py [--turns 200] [--max-tokens 32] [--configure] [--n-ctx 2048]

Turns 1–20 each state one distinct fact ("My sister moved to Bergen last spring."); turns 21..N-1 are
ordinary questions on other subjects; then, as turns N, N+1, …, each fact is asked for in other
words, sharing at most one content word with the turn that stated it ("Which city is she living in
now?" — checked before the run, :func:`check_questions`). A fact counts as *brought back* when the
request for its question contains the stating turn: in the history, or brought back beside the
passages (``turn:<conversation>:<n>``). The target is at least 18 of 20 (before issue 30: 0, since
the stating turns are long out of the window).

One in-process session (``Session.open(surface=ask)``) and one ``TurnLoop`` per turn, as ``aries ask
--continue`` would run them, against:

- ``--scripted``: the scripted OpenAI-compatible server of ``tests/models/servers.py`` (answers
  "Understood."), the window set to 2048 tokens; the count is checked against the request bodies
  the server received. Fast: this is what decides recall, since finding the turns is deterministic
  and calls no model. ``tests/assistant/test_long_conversation_bench.py`` runs it with 40 turns.
- otherwise the real-model lane: ``python -m llama_cpp.server`` with Gemma 3 270M (alias ``gemma``,
  ``n_ctx`` 2048), answers capped at ``--max-tokens``; with ``--configure`` the window is set in
  ``settings.models``, else Aries learns it from the server's first overflow error (the one refit
  that is allowed). Needs ``python tests/real_model/install.py``.

It reports the facts brought back, the time spent finding earlier turns per turn (median, p95, max:
``usage.context.recall_ms`` of each turn, which includes catching the conversation index up), the
whole turn's time, and whether any error reached the user. ``--keyword-only`` sets
``ARIES_RECALL=keyword`` (BM25 alone, no embedder) to compare. The embedder is the workspace's
default (all-MiniLM-L6-v2, ONNX) unless ``AXIOMME_EMBEDDER`` says otherwise; it is loaded before the
first turn (as the TUI does at start-up), and its ONNX export kept in ``~/.cache/aries-bench/onnx``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FACTS = (
    ("My sister moved to Bergen last spring.", "Which city is she living in now?"),
    ("I parked the car on level four of the north garage.", "Where did I leave my vehicle?"),
    ("My dentist appointment is on Thursday at nine in the morning.", "When do I see the doctor about my teeth?"),
    ("Our wifi password is written on the fridge door.", "Where can I find the code for the wireless network?"),
    ("My grandmother's recipe uses cardamom instead of cinnamon.", "Which spice goes into granny's baking?"),
    ("I lent my ladder to the neighbour across the street.", "Who is holding the thing I climb to reach the roof?"),
    ("The team offsite will be held in Lisbon in October.", "Where are colleagues gathering for the company retreat?"),
    ("My passport expires in March next year.", "When does my travel document run out?"),
    ("I am allergic to peanuts and shellfish.", "What foods must I avoid eating?"),
    ("Our cat Miso only eats salmon flavoured food.", "What does the pet like for dinner?"),
    ("I keep the spare house key under the blue flowerpot.", "Where is the extra key hidden?"),
    ("My brother's birthday falls on the twelfth of August.", "When should I send a card to my sibling?"),
    ("The boiler was serviced by a plumber called Anders.", "Who repaired the heating system?"),
    ("I ran my first marathon in three hours and fifty minutes.", "How long did that big race take me?"),
    ("My favourite author is Ursula Le Guin.", "Which writer do I like most?"),
    ("We are painting the bedroom a pale sage green.", "What colour will the sleeping room be?"),
    ("My laptop's serial number ends in 4471.", "What are the last digits identifying the notebook computer?"),
    ("The landlord raised the rent by six percent.", "How much more will I pay for the flat?"),
    ("My daughter's school play is about pirates.", "What is the theme of the kid's theatre show?"),
    ("I switched my phone plan to a provider called Telia.", "Which mobile operator am I with now?"),
)

SUBJECTS = (
    "photosynthesis",
    "compound interest",
    "the water cycle",
    "plate tectonics",
    "how vaccines work",
    "the French revolution",
    "black holes",
    "sourdough fermentation",
    "the stock exchange",
    "jazz harmony",
    "glaciers",
    "the Roman aqueducts",
    "public key cryptography",
    "bird migration",
    "tides",
    "the printing press",
    "volcanoes",
    "coral reefs",
    "the immune system",
    "solar panels",
    "chess openings",
    "the Silk Road",
    "rainbows",
    "beekeeping",
    "the metric system",
    "lighthouses",
    "origami",
    "hydroelectric dams",
    "the Olympic games",
    "weather fronts",
)
ASKS = (
    "Can you explain {s} in simple terms?",
    "What is the most surprising thing about {s}?",
    "Give me a short history of {s}.",
    "What are common misconceptions about {s}?",
    "How would you teach {s} to a twelve year old?",
    "Which books would you recommend on {s}?",
)

ANSWER = (
    "That is a broad subject. In short, it comes down to a few principles that build on each other, and "
    "the details depend on what you care about most. Ask about any part and I will go deeper into it."
)
"""The scripted server's answer to an ordinary question (to a fact: "Understood.")."""

STOPWORDS = frozenset(
    "a an the and or but of to in on at by for with from as is are was were be been am do does did done "
    "i me my mine we our us you your he she her his it its they them their this that these those there "
    "what which who whom whose when where why how can could should would will shall may might must "
    "have has had not no yes so too very just now then than into over under about up down out off "
    "only also last next".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words less stop words, crudely stemmed (``moved`` and ``move`` count as one)."""
    words = set()
    for word in re.findall(r"[a-z0-9]+", text.lower().replace("'s", "")):
        if word in STOPWORDS:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) > len(suffix) + 2:
                word = word[: -len(suffix)]
                break
        words.add(word)
    return words


def check_questions() -> list[str]:
    """Each question shares at most one content word with its fact (else the bench would be easy)."""
    return [
        f"{question!r} shares {sorted(shared)} with {fact!r}"
        for fact, question in FACTS
        if len(shared := content_words(fact) & content_words(question)) > 1
    ]


def filler(n: int) -> str:
    subject = SUBJECTS[n % len(SUBJECTS)]
    return ASKS[(n // len(SUBJECTS)) % len(ASKS)].format(s=subject)


def messages(turns: int) -> list[str]:
    """The operator's messages: the 20 facts, the filler up to turn ``turns - 1``, then the 20 questions."""
    said = [fact for fact, _ in FACTS]
    said += [filler(n) for n in range(len(FACTS) + 1, max(turns, len(FACTS) + 1))]
    return said + [question for _, question in FACTS]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return round(ordered[max(0, int(len(ordered) * share + 0.999) - 1)], 3) if ordered else 0.0


async def converse(
    session: Any,
    provider_for: Callable[[], Any],
    turns: int,
    before: Callable[[int], None],
    after: Callable[[int, Any], Any] | None = None,
) -> list[dict[str, Any]]:
    """Every message as one turn of its own ``TurnLoop``; each turn's outcome, as a dict (``after``:
    called with the turn's number and outcome; ``provider_for`` may give an ``on_event`` to hear it)."""
    from services.assistant import TurnLoop
    from services.retrieval.embedders import preload

    if os.environ.get("ARIES_RECALL") != "keyword":  # loaded once, as the TUI does at start-up: not a turn's cost
        preload(session.engine().spaces.default)
    done = []
    for n, text in enumerate(messages(turns), 1):
        before(n)
        provider = provider_for()
        loop = TurnLoop(session, provider, on_event=getattr(provider, "on_event", None))
        started = time.perf_counter()
        outcome = await loop.run(text)
        await provider.aclose()
        if after is not None:
            await after(n, outcome)
        done.append(
            {
                "turn": n,
                "error": outcome.error,
                "wall_ms": (time.perf_counter() - started) * 1000,
                "context": dict(outcome.context),
                "finish": outcome.finish_reason,
            }
        )
        if n % 25 == 0:
            print(f"  {n} turns", file=sys.stderr, flush=True)
    return done


def score(done: list[dict[str, Any]], conversation: str, bodies: list[str] | None) -> dict[str, Any]:
    """The facts whose question's request contained the stating turn, and what it cost."""
    questions = done[-len(FACTS) :]
    found, in_bodies = [], []
    for fact_turn, outcome in enumerate(questions, 1):
        context = outcome["context"]
        in_history = fact_turn > int(context.get("left_out", {}).get("turns", 0))
        handle = f"turn:{conversation}:{fact_turn}"
        if in_history or handle in context.get("brought_back", []):
            found.append(fact_turn)
        if bodies is not None:
            body = bodies[len(bodies) - len(FACTS) + fact_turn - 1]
            if json.dumps(FACTS[fact_turn - 1][0])[1:-1] in body:
                in_bodies.append(fact_turn)
    recall = [float(o["context"].get("recall_ms", 0.0)) for o in done if "recall_ms" in o["context"]]
    wall = [o["wall_ms"] for o in done]
    result: dict[str, Any] = {
        "turns": len(done),
        "facts brought back": f"{len(found)}/{len(FACTS)}",
        "facts missed (turn)": [n for n in range(1, len(FACTS) + 1) if n not in found],
        "turns that searched earlier turns": len(recall),
        "recall ms per turn median": round(statistics.median(recall), 3) if recall else None,
        "recall ms per turn p95": percentile(recall, 0.95),
        "recall ms per turn max": round(max(recall), 3) if recall else None,
        "turn ms median": round(statistics.median(wall), 1),
        "turn ms p95": percentile(wall, 0.95),
        "failed turns": [o["turn"] for o in done if o["error"]],
        "window": done[-1]["context"].get("window"),
        "window source": done[-1]["context"].get("window_source"),
        "turns left out of the last request": done[-1]["context"].get("left_out", {}).get("turns"),
        "length stops": sum(1 for o in done if o["finish"] == "length"),
    }
    if bodies is not None:
        result["facts in the request bodies"] = f"{len(in_bodies)}/{len(FACTS)}"
    return result


DOCS = {
    "glossary.md": "# Glossary\n\nA workspace holds indexes, transcripts and the audit log. A handle names a "
    "chunk of an indexed document.\n",
    "policy.md": "# Policy\n\nEvery tool call is decided by the policy gateway: allow, confirm or deny.\n",
    "tides.md": "# Tides\n\nTides are the rise and fall of sea levels caused by the moon and the sun.\n",
}
"""A small document index in use, as a workspace has: each turn's retrieval encodes the message, and
finding earlier turns reuses that vector (``--no-index``: no index, the message is encoded for them)."""


def open_bench(with_index: bool) -> Any:
    """The workspace ``bench`` (with its document index in use) and its ``ask`` session."""
    from services.retrieval import RetrievalEngine
    from services.session.opening import Surface
    from services.session.session import Session
    from services.workspace.manager import WorkspaceManager

    workspace = WorkspaceManager().create("bench")[0]
    if with_index:
        docs = workspace.root.parent / "bench-docs"
        docs.mkdir(exist_ok=True)
        for name, text in DOCS.items():
            (docs / name).write_text(text, encoding="utf-8")
        with RetrievalEngine(workspace) as engine:
            engine.index_add(str(docs), "docs")
    workspace.close()
    return Session.open("bench", surface=Surface.ASK)


def run_scripted(turns: int, with_index: bool, n_ctx: int = 2048) -> dict[str, Any]:
    from services.models.config import make_provider, resolve_model
    from tests.models.servers import Reply, ScriptedServer

    server = ScriptedServer("openai").start()
    try:
        session = open_bench(with_index)
        try:
            session.workspace.update(models={"openai:qwen2.5": {"context_window": n_ctx, "max_tokens": 32}})
            config = resolve_model(None, {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url})
            done = asyncio.run(
                converse(
                    session,
                    lambda: make_provider(config),
                    turns,
                    lambda n: server.add(Reply(text="Understood." if n <= len(FACTS) else ANSWER, prompt_tokens=0)),
                )
            )
            conversation = session.conversation.conversation_id
        finally:
            session.close()
    finally:
        server.stop()
    bodies = [json.dumps(body, ensure_ascii=False) for body in server.chat_requests()]
    return score(done, conversation, bodies)


def run_real(
    turns: int, max_tokens: int, configure: bool, with_index: bool, n_ctx: int = 2048, meter: bool = False
) -> dict[str, Any]:
    from services.models.config import make_provider, resolve_model
    from tests.real_model.llama_server import LlamaServer, missing

    reason = missing()
    if reason is not None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="aries-longconv-server-") as tmp:
        server = LlamaServer(Path(tmp), aliases={"gemma": {"n_ctx": n_ctx}}).start()
        try:
            session = open_bench(with_index)
            try:
                settings: dict[str, Any] = {"max_tokens": max_tokens}
                if configure:
                    settings["context_window"] = n_ctx
                session.workspace.update(models={"openai:gemma": settings})
                config = resolve_model(None, server.env("gemma"))
                if meter:
                    from bench.meter_accuracy import Metered

                    metered = Metered(server.base_url, lambda: make_provider(config))
                    done = asyncio.run(converse(session, metered.provider, turns, lambda n: None, metered.after))
                else:
                    done = asyncio.run(converse(session, lambda: make_provider(config), turns, lambda n: None))
                conversation = session.conversation.conversation_id
                errors = [
                    e["content"]
                    for e in session.conversation.read().entries
                    if e.get("role") == "notice" and e.get("level") == "error"
                ]
            finally:
                session.close()
        finally:
            server.stop()
    result = score(done, conversation, None)
    result["error notices"] = errors[:3]
    if meter:
        from bench.meter_accuracy import summary

        result["meter"] = summary(metered.rows)
        result["meter rows"] = metered.rows
    return result


def main(argv: list[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the server is stopped on the way out
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200, help="the turn at which the facts are asked for")
    parser.add_argument("--scripted", action="store_true", help="the scripted server instead of the real model")
    parser.add_argument("--keyword-only", action="store_true", help="ARIES_RECALL=keyword: BM25 alone")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--configure", action="store_true", help="set context_window instead of learning it")
    parser.add_argument(
        "--n-ctx", type=int, default=2048, help="the window (the real server's n_ctx; a quick run: 512)"
    )
    parser.add_argument("--no-index", action="store_true", help="no document index in use (recall encodes)")
    parser.add_argument("--meter", action="store_true", help="real lane: the meter against llama.cpp's count too")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    problems = check_questions()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    if options.keyword_only:
        os.environ["ARIES_RECALL"] = "keyword"
    # the ONNX export of the embedder is made once per cache folder: keep it between runs
    os.environ.setdefault("AXIOMME_EMBEDDER_CACHE", str(Path.home() / ".cache" / "aries-bench" / "onnx"))
    with tempfile.TemporaryDirectory(prefix="aries-longconv-") as home:
        os.environ["ARIES_HOME"] = home
        started = time.perf_counter()
        if options.scripted:
            stats = run_scripted(options.turns, not options.no_index, options.n_ctx)
        else:
            stats = run_real(
                options.turns, options.max_tokens, options.configure, not options.no_index, options.n_ctx, options.meter
            )
        stats["document index"] = "none" if options.no_index else "docs (3 files, in use)"
        stats["recall"] = "keyword" if options.keyword_only else "hybrid"
        stats["embedder"] = os.environ.get("AXIOMME_EMBEDDER", "sentence-transformers (default)")
        stats["wall s"] = round(time.perf_counter() - started, 1)
    if options.json:
        print(json.dumps(stats))
    else:
        for key, value in stats.items():
            if key != "meter rows":
                print(f"{key:>40}: {value}")
    return 0 if not stats["failed turns"] else 1


if __name__ == "__main__":
    sys.exit(main())
