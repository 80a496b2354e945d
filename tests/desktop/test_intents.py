"""The Desktop Ops intent parser on a table of phrasings, and near-misses that get one clear line."""

from __future__ import annotations

from typing import Any

import pytest

from services.desktop import DesktopError, DesktopPlan, PlanStep, StepRef, parse_request
from services.errors import AriesError
from services.tools.builtin import default_registry

REF_PID = StepRef(1, ("process_id",))

PHRASINGS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    (
        'create notes/todo.md with "buy milk"',
        [
            (
                "builtin:fs:write_text",
                {"path": "notes/todo.md", "text": "buy milk\n", "create_dirs": True, "if_exists": "error"},
            )
        ],
    ),
    (
        "Please create a new file called notes/a.md containing hello there",
        [
            (
                "builtin:fs:write_text",
                {"path": "notes/a.md", "text": "hello there\n", "create_dirs": True, "if_exists": "error"},
            )
        ],
    ),
    (
        "create notes/dir.md with dir",
        [
            (
                "builtin:fs:write_text",
                {"path": "notes/dir.md", "text": "dir\n", "create_dirs": True, "if_exists": "error"},
            )
        ],
    ),
    (
        "touch empty.txt",
        [("builtin:fs:write_text", {"path": "empty.txt", "text": "", "create_dirs": True, "if_exists": "error"})],
    ),
    (
        'write "buy bread" to notes/todo.md',
        [
            (
                "builtin:fs:write_text",
                {"path": "notes/todo.md", "text": "buy bread\n", "create_dirs": True, "if_exists": "overwrite"},
            )
        ],
    ),
    (
        "save notes/todo.md with 'two\nlines'",
        [
            (
                "builtin:fs:write_text",
                {"path": "notes/todo.md", "text": "two\nlines\n", "create_dirs": True, "if_exists": "overwrite"},
            )
        ],
    ),
    ("read notes/todo.md", [("builtin:fs:read_text", {"path": "notes/todo.md"})]),
    ("show the contents of notes/todo.md", [("builtin:fs:read_text", {"path": "notes/todo.md"})]),
    ("cat README.md", [("builtin:fs:read_text", {"path": "README.md"})]),
    ("list notes", [("builtin:fs:list_dir", {"path": "notes"})]),
    ("list", [("builtin:fs:list_dir", {})]),
    ("ls -r src", [("builtin:fs:list_dir", {"path": "src", "recursive": True})]),
    ("list the files in notes recursively", [("builtin:fs:list_dir", {"path": "notes", "recursive": True})]),
    ("show files in docs", [("builtin:fs:list_dir", {"path": "docs"})]),
    ('search for "TODO" in src', [("builtin:fs:search_text", {"query": "TODO", "path": "src"})]),
    ("find milk", [("builtin:fs:search_text", {"query": "milk"})]),
    ("grep import services", [("builtin:fs:search_text", {"query": "import", "path": "services"})]),
    ("run pytest", [("builtin:shell:run", {"argv": ["pytest"]})]),
    ("run pytest -q tests/unit", [("builtin:shell:run", {"argv": ["pytest", "-q", "tests/unit"]})]),
    ('execute "echo hi there"', [("builtin:shell:run", {"argv": ["echo", "hi", "there"]})]),
    ('run echo "a b"', [("builtin:shell:run", {"argv": ["echo", "a b"]})]),
    (
        "start python3 -m http.server and poll it",
        [
            ("builtin:shell:start", {"argv": ["python3", "-m", "http.server"]}),
            ("builtin:shell:poll", {"process_id": REF_PID, "wait_s": 10.0}),
        ],
    ),
    (
        "launch sleep 5",
        [
            ("builtin:shell:start", {"argv": ["sleep", "5"]}),
            ("builtin:shell:poll", {"process_id": REF_PID, "wait_s": 10.0}),
        ],
    ),
    ("poll p3-0a1b2c", [("builtin:shell:poll", {"process_id": "p3-0a1b2c"})]),
    ("kill p3-0a1b2c", [("builtin:shell:kill", {"process_id": "p3-0a1b2c"})]),
    ("search the web for aries workbench", [("builtin:web:search", {"query": "aries workbench"})]),
    ("web search textual tui", [("builtin:web:search", {"query": "textual tui"})]),
    ("look up searxng", [("builtin:web:search", {"query": "searxng"})]),
    (
        "search the web for aries and fetch the first result",
        [
            ("builtin:web:search", {"query": "aries"}),
            ("builtin:web:fetch", {"url": StepRef(1, ("results", 0, "url"))}),
        ],
    ),
    (
        "search online for aries then open result 2",
        [
            ("builtin:web:search", {"query": "aries"}),
            ("builtin:web:fetch", {"url": StepRef(1, ("results", 1, "url"))}),
        ],
    ),
    ("fetch https://example.org/a?b=1", [("builtin:web:fetch", {"url": "https://example.org/a?b=1"})]),
    ("open http://127.0.0.1:8080/page.html", [("builtin:web:fetch", {"url": "http://127.0.0.1:8080/page.html"})]),
]


@pytest.mark.parametrize(("request_text", "expected"), PHRASINGS, ids=[p[0] for p in PHRASINGS])
def test_phrasing_gives_its_steps(request_text: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    plan = parse_request(request_text)
    assert [(s.tool_id, s.args) for s in plan.steps] == expected
    assert plan.steps and all(s.why for s in plan.steps)
    assert parse_request(request_text) == plan  # deterministic


@pytest.mark.parametrize(("request_text", "expected"), PHRASINGS, ids=[p[0] for p in PHRASINGS])
def test_every_planned_step_fits_its_tool_schema(request_text: str, expected: Any) -> None:
    """The parser's arguments are what the gateway will accept (a placeholder stands for a reference)."""
    registry = default_registry()
    for step in parse_request(request_text).steps:
        args = {
            k: ("p1-0a1b2c" if k == "process_id" else "http://x.test/") if isinstance(v, StepRef) else v
            for k, v in step.args.items()
        }
        registry.validate(step.tool_id, args)


NEAR_MISSES = [
    ("", "say what to do"),
    ("   please   ", "say what to do"),
    ("create", "create needs a file path"),
    ("create notes/x.md with", "say what to write after 'with'"),
    ("create notes/x.md buy milk", "cannot read 'buy milk' after 'notes/x.md'"),
    ("make a directory notes", "creates files, not empty directories"),
    ('create "unclosed', "unbalanced quote"),
    ("write hello to", "needs a file after 'to'"),
    ("read", "read needs one file path"),
    ("read a.txt b.txt", "read needs one file path"),
    ("list a b", "list takes one directory"),
    ("search for", "search needs the text to find"),
    ("run", "run needs a command"),
    ("start and poll it", "start needs a command"),
    ("kill the server", "kill needs the process id"),
    ("poll", "poll needs the process id"),
    ("search the web for", "web search needs the search terms"),
    ("search the web for x and fetch result 99", "result 99 is out of range"),
    ("fetch notes/todo.md", "fetch needs one http(s) URL"),
    ("delete notes/todo.md", "no tool to delete files; run a command for it instead: run rm PATH"),
    ("mv a b", "no tool to move files"),
    ("dance wildly", "cannot tell what to do with 'dance'. Desktop Ops understands:"),
]


@pytest.mark.parametrize(("request_text", "message"), NEAR_MISSES, ids=[n[0] or "<empty>" for n in NEAR_MISSES])
def test_near_miss_is_one_clear_typed_line(request_text: str, message: str) -> None:
    with pytest.raises(DesktopError) as caught:
        parse_request(request_text)
    assert isinstance(caught.value, AriesError)
    assert message in caught.value.message and "\n" not in caught.value.message


def test_an_empty_plan_cannot_be_made() -> None:
    with pytest.raises(DesktopError, match="no tool step"):
        DesktopPlan("list", "list", ())


def test_render_shows_each_step_and_references() -> None:
    plan = parse_request("start python3 -c 'print(1)' and poll it")
    text = plan.render()
    assert text.splitlines()[0] == "Plan for: start python3 -c 'print(1)' and poll it"
    assert "1. builtin:shell:start" in text and "2. builtin:shell:poll" in text
    assert '"process_id": "<process_id of step 1>"' in text


def test_render_neutralises_control_characters() -> None:
    plan = DesktopPlan("x", "read", (PlanStep("builtin:fs:read_text", {"path": "a\x1b[31mred"}, "read \x1b]0;t\x07"),))
    assert "\x1b" not in plan.render() and "\x07" not in plan.render()


def test_step_ref_missing_value_is_a_clear_error() -> None:
    with pytest.raises(DesktopError, match="step 1 returned no results.0.url"):
        StepRef(1, ("results", 0, "url")).resolve({"results": []})
