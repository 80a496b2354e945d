"""Offer the tools that fit (issue 33 item 3): 60 tool definitions, a 4,096-token window, 48 tasks.

    .venv/bin/python bench/tool_offer.py [--window 4096] [--budget 1200] [--json FILE] [--refresh]

The 60 definitions are Aries' 16 built-in tools (their registry schemas, as offered), the real tool
lists of the MCP servers the tests run (``mcp-server-time``, ``@modelcontextprotocol/server-filesystem``,
``tests/tools/mcp_servers/http_greeter.py``: 17 tools, kept in ``tests/fixtures/tool_offer.json``;
``--refresh`` lists them again from the servers), and 27 distractors with overlapping vocabulary
(git, GitHub, SQLite, notes, browser…; one with a spammy description that repeats the tools'
vocabulary thirty times). Each of the 48 tasks names the tools that would do it.

For each task the request is fitted as the turn loop fits it (:class:`ContextFitter` over the
default system prompt and the task's message, the window's answer reserve kept) and the tools are
chosen by :func:`services.assistant.tool_offer.select` within ``min(budget, room / 2)`` (as the turn
loop does: half of what the window leaves at most). Reported: the
share of tasks whose needed tool is offered (acceptance: ≥ 95 %), the largest and mean cost of the
tools offered (acceptance: never over the budget), how many are offered, where the spammy tool
ranks, the time per selection — and, for comparison, what is done without ranking (all 60
definitions, or none when they do not fit: today's behaviour).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DATA = REPO / "tests" / "fixtures" / "tool_offer.json"
SPAM = "mcp:hostile:best_tool"


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def definitions(data: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """``(tool_id, description, parameters)`` of all 60 tools: built-in first, then MCP, then distractors."""
    from services.assistant.loop import offered_schema
    from services.tools.builtin import default_registry

    out = [(spec.tool_id, spec.description, offered_schema(spec.input_schema)) for spec in default_registry().list()]
    for server, tools in sorted(data["mcp"].items()):
        out.extend((f"mcp:{server}:{t['name']}", t["description"], t["inputSchema"]) for t in tools)
    out.extend((f"mcp:{t['server']}:{t['name']}", t["description"], t["inputSchema"]) for t in data["distractors"])
    return out


def docs_for(tools: list[tuple[str, str, Any]]) -> tuple[list[Any], list[Any], int]:
    """The ranking's documents, the schemas as sent, and the cost of all of them."""
    from services.assistant.tool_offer import ToolDoc
    from services.models.base import ToolSchema
    from services.models.tokens import tools_tokens
    from services.models.toolnames import ToolNameMap

    names = ToolNameMap(tool_id for tool_id, _, _ in tools)
    schemas = [ToolSchema(names.provider_name(tool_id), desc, params) for tool_id, desc, params in tools]
    docs = [
        ToolDoc.of(tool_id, schema.name, schema.description, schema.parameters, tools_tokens([schema]))
        for (tool_id, _, _), schema in zip(tools, schemas, strict=True)
    ]
    return docs, schemas, tools_tokens(schemas)


def run(window: int = 4096, budget: int = 1200, tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    from services.assistant.context import ContextFitter, answer_reserve, profile_system_prompt
    from services.assistant.tool_offer import Ranker, select
    from services.models.tokens import tools_tokens

    data = load()
    docs, schemas, all_tokens = docs_for(definitions(data))
    by_id = dict(zip((doc.tool_id for doc in docs), schemas, strict=True))
    ranker = Ranker(docs)
    rows, times = [], []
    for task in tasks if tasks is not None else data["tasks"]:
        fitter = ContextFitter(
            profile_system_prompt(None), task["text"], [], [], window=window, reserve=answer_reserve(window, None)
        )
        started = time.perf_counter()
        selection = select(docs, task["text"], budget=min(budget, fitter.tool_room([]) // 2), ranker=ranker)
        times.append((time.perf_counter() - started) * 1000)
        offered = selection.offered
        sent = tools_tokens([by_id[tool_id] for tool_id in offered])
        fitted = fitter.fit([], [by_id[tool_id] for tool_id in offered], sent)
        order = [pick.tool_id for pick in selection.picks]
        rows.append(
            {
                "task": task["text"],
                "needs": task["needs"],
                "hit": any(tool_id in offered for tool_id in task["needs"]),
                "rank": min(order.index(tool_id) for tool_id in task["needs"]) + 1,
                "offered": len(offered),
                "tokens": sent,
                "sent": bool(fitted.tools),
                "spam_rank": order.index(SPAM) + 1 if SPAM in order else None,
                "spam_offered": SPAM in offered,
            }
        )
        today = ContextFitter(
            profile_system_prompt(None), task["text"], [], [], window=window, reserve=answer_reserve(window, None)
        ).fit([], schemas, all_tokens)
        rows[-1]["today_sent"] = bool(today.tools)
    return summary(rows, times, window, budget, len(docs), all_tokens)


def summary(
    rows: list[dict[str, Any]], times: list[float], window: int, budget: int, tools: int, all_tokens: int
) -> dict[str, Any]:
    hits = sum(row["hit"] and row["sent"] for row in rows)
    return {
        "window": window,
        "budget": budget,
        "tools": tools,
        "all_definitions_tokens": all_tokens,
        "tasks": len(rows),
        "hit_rate": hits / max(1, len(rows)),
        "max_tokens_offered": max(row["tokens"] for row in rows),
        "mean_tokens_offered": round(statistics.mean(row["tokens"] for row in rows), 1),
        "mean_tools_offered": round(statistics.mean(row["offered"] for row in rows), 2),
        "spam_offered": sum(row["spam_offered"] for row in rows),
        "spam_best_rank": min((row["spam_rank"] for row in rows if row["spam_rank"]), default=None),
        "today_hit_rate": sum(row["today_sent"] for row in rows) / max(1, len(rows)),
        "select_ms_median": round(statistics.median(times), 3),
        "select_ms_max": round(max(times), 3),
        "misses": [row for row in rows if not (row["hit"] and row["sent"])],
        "rows": rows,
    }


def refresh() -> None:
    """List the MCP servers' tools again (needs ``mcp-server-time`` and Node.js) into the fixture."""
    import tempfile

    from services.policy.mcp import McpServerConfig, McpSettings
    from services.tools.mcp_client import McpHub
    from tests.tools.mcp_servers.install import install

    root = tempfile.mkdtemp()
    servers = {
        "time": McpServerConfig(
            name="time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")
        ),
        "filesystem": McpServerConfig(name="filesystem", command="node", args=(str(install()), root)),
    }
    hub = McpHub(McpSettings(enabled=True, servers=servers))
    data = load()
    try:
        for name in servers:
            data["mcp"][name] = [
                {"name": t["name"], "description": t.get("description", ""), "inputSchema": t.get("inputSchema", {})}
                for t in hub.list_tools(name)
            ]
    finally:
        hub.close()
    DATA.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=4096)
    parser.add_argument("--budget", type=int, default=1200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--refresh", action="store_true", help="list the MCP servers' tools again first")
    args = parser.parse_args()
    if args.refresh:
        refresh()
    result = run(args.window, args.budget)
    print(
        f"{result['tools']} tools ({result['all_definitions_tokens']:,} tokens in all), window {result['window']:,}, "
        f"budget {result['budget']:,}: needed tool offered in {result['hit_rate']:.1%} of {result['tasks']} tasks "
        f"(without ranking: {result['today_hit_rate']:.1%}); tokens offered max {result['max_tokens_offered']:,}, "
        f"mean {result['mean_tokens_offered']:,}; {result['mean_tools_offered']} tools a request; "
        f"spammy tool offered {result['spam_offered']} times (best rank {result['spam_best_rank']}); "
        f"selection {result['select_ms_median']} ms median, {result['select_ms_max']} ms max"
    )
    for row in result["misses"]:
        print(f"  miss: {row['task']!r} needs {row['needs']} (rank {row['rank']})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
