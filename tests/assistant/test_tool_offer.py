"""Offer the tools that fit (issue 33 item 3): the ranking (services/assistant/tool_offer.py), the
turn loop's requests against the scripted servers (only the chosen tools are sent, within the
budget; a call to an enabled tool that was not offered is decided by the gateway and noted), and
the CI-sized run of bench/tool_offer.py (60 definitions, a 4,096-token window, 48 tasks)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from services.assistant import TurnLoop
from services.assistant.tool_offer import (
    DEFAULT_TOOL_BUDGET,
    ToolDoc,
    compact,
    named_tools,
    offered_lines,
    query_terms,
    select,
    terms,
)
from services.audit.log import AuditStore
from services.session.session import Session
from tests.assistant.conftest import provider_for
from tests.models.servers import Call, Reply, ScriptedServer

ROOT = Path(__file__).resolve().parents[2]


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tool_offer_bench", ROOT / "bench" / "tool_offer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("tool_offer_bench", module)
    spec.loader.exec_module(module)
    return module


def doc(tool_id: str, description: str, args: tuple[str, ...] = ("path",), tokens: int = 100) -> ToolDoc:
    return ToolDoc(tool_id, tool_id.replace(":", "__"), description, args, tokens)


TOOLS = [
    doc("builtin:fs:read_text", "Read a text file, capped at max_bytes."),
    doc("builtin:fs:write_text", "Write a text file atomically.", ("path", "text")),
    doc("builtin:shell:run", "Run a command to completion with a timeout.", ("argv", "cwd")),
    doc("builtin:web:fetch", "Fetch a URL; the body is stored as an artifact.", ("url",)),
    doc("mcp:time:get_current_time", "Get current time in a specific timezones", ("timezone",)),
    doc("mcp:git:git_log", "Show the commit logs of a git repository.", ("repo_path",)),
]


def test_words_are_split_stemmed_and_mapped() -> None:
    assert terms("list_directory_with_sizes") == ["list", "directory", "size"]
    assert terms("readTextFile in the Folders") == ["read", "text", "file", "directory"]
    assert terms("grep for TODO") == ["search", "text", "todo"]
    assert query_terms("read it", ["the file notes.md"]) == {"file": 0.4, "note": 0.4, "md": 0.4, "read": 1.0}
    assert "path" in query_terms("summarise docs/plan.md")  # a path in the message is about files


def test_the_best_tools_are_offered_within_the_budget_and_the_same_input_gives_the_same_offer() -> None:
    chosen = select(TOOLS, "read the file notes.md", budget=250)
    assert chosen.offered[0] == "builtin:fs:read_text"
    assert chosen.tokens <= 250 and len(chosen.offered) == 2
    assert "builtin:shell:run" not in chosen.offered and not chosen.all_offered
    assert select(TOOLS, "read the file notes.md", budget=250) == chosen
    why = {pick.tool_id: pick.why for pick in chosen.picks}
    assert why["builtin:fs:read_text"].startswith("matched: read, file")
    assert why["builtin:shell:run"] == "no match"
    assert select(TOOLS, "what time is it in Lima?", budget=250).offered == ["mcp:time:get_current_time"]


def test_every_tool_is_offered_when_all_fit_and_none_matches_nothing_otherwise() -> None:
    assert select(TOOLS, "hi there", budget=600).all_offered  # as without ranking
    assert select(TOOLS, "hi there", budget=599).offered == []


def test_the_recent_turns_count_too() -> None:
    assert select(TOOLS, "and now the other one", budget=150).offered == []
    later = select(TOOLS, "and now the other one", ["show me the git commit log"], budget=150)
    assert later.offered == ["mcp:git:git_log"]


def test_a_spammy_server_description_buys_no_place() -> None:
    words = "read file text write run command fetch url time"
    once = doc("mcp:hostile:best_tool", f"The best tool. {words}", ("input",))
    spam = doc("mcp:hostile:best_tool", "The best tool. " + f"{words} " * 40, ("input",))
    for message in ("read the file notes.md", "run the command make", "fetch the url https://x.org/a"):
        with_once = select([*TOOLS, once], message, budget=100)
        with_spam = select([*TOOLS, spam], message, budget=100)
        score = {p.tool_id: p.score for p in with_spam.picks}
        assert score["mcp:hostile:best_tool"] <= {p.tool_id: p.score for p in with_once.picks}["mcp:hostile:best_tool"]
        assert with_spam.offered != ["mcp:hostile:best_tool"], message  # the tool the task needs comes first
        assert score["mcp:hostile:best_tool"] < max(score.values()) / 4


def test_the_tools_the_profile_names_are_always_offered_and_said_when_over_budget() -> None:
    assert named_tools(["fs", "builtin:fs:read_*", "builtin:shell:run"]) == {"builtin:shell:run"}
    chosen = select(TOOLS, "read the file notes.md", budget=200, pinned={"builtin:shell:run"})
    assert chosen.offered[:1] == ["builtin:fs:read_text"] and "builtin:shell:run" in chosen.offered
    assert chosen.tokens <= 200 and not chosen.pinned_over
    over = select(TOOLS, "read the file", budget=150, pinned={"builtin:shell:run", "builtin:web:fetch"})
    assert over.pinned_over and set(over.offered) == {"builtin:shell:run", "builtin:web:fetch"}
    note = over.note()
    assert note is not None and "alone exceed the budget" in note
    kept = compact({**over.to_dict(), "sent": True})
    assert kept["left_out"] == 4 and "alone exceed the budget" in offered_lines(kept)[0]


def test_bench_sixty_definitions_a_4096_window_the_needed_tool_offered_in_95_percent() -> None:
    """Issue 33's acceptance: 60 definitions (the real tool lists of the test MCP servers and
    distractors), a 4,096-token window; every request within the budget, the tool the task needs
    offered in at least 95 % of at least 40 tasks; without ranking, none would be."""
    result = bench().run(window=4096, budget=DEFAULT_TOOL_BUDGET)
    assert result["tools"] == 60 and result["tasks"] >= 40
    assert result["max_tokens_offered"] <= DEFAULT_TOOL_BUDGET
    assert all(row["sent"] for row in result["rows"])  # the fitter sent what was chosen
    assert result["hit_rate"] >= 0.95, result["misses"]
    assert result["today_hit_rate"] == 0.0  # all 60 (11k tokens) or none: none
    assert result["spam_offered"] == 0


def offered(server: ScriptedServer, n: int) -> list[str]:
    return [tool["function"]["name"] for tool in server.chat_requests()[n].get("tools") or []]


async def test_a_request_carries_only_the_tools_chosen_and_says_why(session: Session, server: ScriptedServer) -> None:
    server.add(Reply(text="It says hello."))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt and summarise it")
    await loop.provider.aclose()
    names = offered(server, 0)
    assert "builtin__fs__read_text" in names and not any("web" in name for name in names)
    said = outcome.context["tools_offered"]
    assert said["sent"] and said["tokens"] <= DEFAULT_TOOL_BUDGET and said["offered"][0] == "builtin:fs:read_text"
    assert len(said["offered"]) == len(names) < len(said["tools"])
    assert outcome.context["breakdown"]["tool_definitions"] > 0  # the meter counts them
    answer = [e for e in session.conversation.read().entries if e.get("role") == "assistant"][-1]
    assert answer["usage"]["tools_offered"]["tools"][0]["tool"] == "builtin:fs:read_text"


async def test_a_call_to_an_enabled_tool_not_offered_goes_to_the_gateway_and_is_noted(
    session: Session, server: ScriptedServer
) -> None:
    _, names = TurnLoop(session, provider_for(server)).offered_tools()  # type: ignore[arg-type]
    listing = names.provider_name("builtin:fs:list_dir")
    server.add(Reply(tool_calls=[Call(listing, {"path": "."}, id="c1")]), Reply(text="done"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt")
    await loop.provider.aclose()
    assert listing not in offered(server, 0)
    entries = session.conversation.read().entries
    notes = [e["content"] for e in entries if e.get("role") == "notice" and "was not offered" in e["content"]]
    assert notes and "builtin:fs:list_dir" in notes[0]
    with AuditStore.for_workspace(session.workspace.root) as audit:
        rows: list[dict[str, Any]] = [row for row in audit.calls(limit=10) if row["call_id"] in outcome.tool_calls]
    assert [row["tool_name"] for row in rows] == ["builtin:fs:list_dir"] and rows[0]["status"] == "success"


async def test_the_tools_a_profile_names_are_offered_and_said_when_they_exceed_the_budget(
    session: Session, server: ScriptedServer
) -> None:
    folder = session.workspace.root / "profiles"
    folder.mkdir(exist_ok=True)
    named = "name: shell-first\ntools:\n  enable: [fs, builtin:shell:run, builtin:shell:start]\n"
    (folder / "shell-first.yaml").write_text(named, encoding="utf-8")
    session.use_profile("shell-first")
    session.workspace.update(models={"qwen2.5": {"tool_budget": 300}, "llama3.2:3b": {"tool_budget": 300}})
    server.add(Reply(text="ok"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read the file notes.txt")
    await loop.provider.aclose()
    said = outcome.context["tools_offered"]
    assert said["pinned_over_budget"] and said["budget"] == 300
    assert said["offered"] == ["builtin:shell:run", "builtin:shell:start"]  # the profile's, nothing else fits
    assert set(offered(server, 0)) == {"builtin__shell__run", "builtin__shell__start"}
    notes = [e["content"] for e in session.conversation.read().entries if e.get("title") == "tools"]
    assert len(notes) == 1 and "alone exceed the budget" in notes[0]
