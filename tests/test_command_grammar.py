"""One grammar per slash command: the spec of each command gives its usage line, Tab completion, the
palette rows and the typed object its handler receives; a misuse is one line with the usage."""

from __future__ import annotations

import dataclasses

import pytest

from app.commands import HANDLERS
from widgets.command_spec import Arg, CommandRegistry, CommandSpec, Form
from widgets.commands import (
    COMMANDS,
    Action,
    CommandError,
    ContextAt,
    Fork,
    GrantsRevoke,
    IndexAdd,
    Named,
    PolicyMode,
    Query,
    ToolCall,
    complete,
    palette_entries,
    parse,
)


def test_every_usage_is_generated_from_its_forms() -> None:
    """The usage line is made from the forms, so a form's words and metavars are in it, in order."""
    rag = next(spec for spec in COMMANDS if spec.name == "rag")
    assert rag.usage == (
        "/rag index add PATH [--name ID] | index list | index use ID | index drop ID | index repair ID | "
        "index watch ID [off] | query TEXT [-k N] | show HANDLE | last | cancel"
    )
    for spec in COMMANDS:
        assert spec.usage.startswith(f"/{spec.name}")
        for form in spec.resolved:
            if not form.hidden:
                assert form.usage() in spec.usage, (spec.name, form.usage())
    assert next(s for s in COMMANDS if s.name == "serve").usage == "/serve [start | stop | status]"
    assert next(s for s in COMMANDS if s.name == "grants").usage == "/grants [list] | revoke ID | revoke all"


def test_parsed_objects_have_the_declared_types() -> None:
    assert parse("/rag query tantivy stemming -k 3")[1] == Query("query", "tantivy stemming", 3)
    assert isinstance(parse("/rag query x -k 7")[1].k, int)
    assert parse("/rag index add docs --name notes")[1] == IndexAdd("docs", "notes")
    assert parse("/rag index drop old")[1] == Named("drop", "old")
    assert parse("/rag last")[1] == Action("last")
    assert parse("/grants revoke 2")[1] == GrantsRevoke(2)
    assert parse("/grants revoke g1a2b3c")[1] == GrantsRevoke("g1a2b3c")
    assert parse("/grants revoke all")[1] == GrantsRevoke(None)
    assert parse("/grants")[1] == Action("list")  # the bare form
    assert parse("/fork 3")[1] == Fork(3) and parse("/fork")[1] == Fork(None)
    assert parse("/policy mode")[1] == PolicyMode(None)
    assert parse("/model use offline")[1] == Named("use", "offline")
    assert parse("/context")[1] == ContextAt("ls")
    assert parse("/context add notes.md axiom://resources/notes")[1] == ContextAt(
        "add", "notes.md", "axiom://resources/notes"
    )
    assert parse("/workspace")[1] == Action("switch")
    for spec in COMMANDS:  # every typed object is frozen
        for form in spec.resolved:
            if form.into is not None and dataclasses.is_dataclass(form.into):
                assert form.into.__dataclass_params__.frozen, form.into  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/rag query foo -k x", "-k takes a number."),
        ("/rag query foo -k 0", "-k is between 1 and 100."),
        ("/rag index add --name", "--name takes an index name."),
        ("/rag query", "TEXT is missing"),
        ("/serve bogus", "cannot read '/serve bogus'."),
        ("/pin x", "N is a number, not 'x'."),
        ("/fs ls --bogus", "unknown option --bogus."),
        ("/copy now", "cannot read '/copy now'."),
        ("/nope", "Unknown command /nope."),
        ("/rag qeury x", "cannot read '/rag qeury x'."),
    ],
)
def test_a_misuse_is_one_line(line: str, message: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse(line)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_fs_shell_and_web_options_come_from_the_tool_argument_models() -> None:
    from services.tools.args import ARGS_MODELS

    for name in ("fs", "shell", "web"):
        spec = next(s for s in COMMANDS if s.name == name)
        for form in spec.resolved:
            assert form.tool, (name, form.words)
            fields = ARGS_MODELS[form.tool].model_fields
            assert {arg.name for arg in form.args} <= set(fields)
            assert {option.name for option in form.opts} <= set(fields)
    # a model field the usage does not show is still an option, typed by its annotation
    assert parse("/fs ls docs --max-entries 5 --include-hidden")[1] == ToolCall(
        "builtin:fs:list_dir", {"path": "docs", "max_entries": 5, "include_hidden": True}
    )
    assert parse("/fs search TODO --regex")[1].args == {"query": "TODO", "regex": True}
    # a Literal field takes only its choices
    with pytest.raises(CommandError, match="is one of"):
        parse("/fs read a.txt --encoding klingon")
    # an argv keeps option-like words as words once the command starts
    assert parse("/shell run --cwd sub pytest -k fast")[1] == ToolCall(
        "builtin:shell:run", {"argv": ["pytest", "-k", "fast"], "cwd": "sub"}
    )


def test_completion_of_subcommands_options_and_positionals() -> None:
    assert complete("/ra") == ("/", ["rag"])
    assert complete("/rag in") == ("/rag ", ["index"])
    assert complete("/rag index ") == ("/rag index ", ["add", "drop", "list", "repair", "use", "watch"])
    assert complete("/policy mode g") == ("/policy mode ", ["guide"])
    assert complete("/grants revoke ") == ("/grants revoke ", ["all"])
    assert complete("/resume ") == ("/resume ", ["last"])
    assert "-r" in complete("/fs ls docs -")[1] and "--max-entries" in complete("/fs ls -")[1]
    assert complete("/rag query x -")[1] == ["-k"]
    assert complete("/shell run ls -") == ("/shell run ls -", [])  # the command's own words
    assert complete("/fs read a.txt --encoding ")[1] == ["ascii", "latin-1", "utf-8"]
    kinds: list[str] = []

    def values(kind: str, partial: str) -> list[str]:
        kinds.append(kind)
        return ["alpha", "beta"]

    assert complete("/profile use a", values=values) == ("/profile use ", ["alpha"])
    assert complete("/rag index use ", values=values)[1] == ["alpha", "beta"]
    assert complete("/workspace open b", values=values)[1] == ["beta"]
    assert kinds == ["profile", "index", "workspace"]
    assert complete("hello /rag") == ("hello /rag", [])
    assert complete("/nope x") == ("/nope x", [])


def test_palette_rows_come_from_the_forms() -> None:
    rows = {line: runnable for line, _summary, runnable in palette_entries()}
    assert rows["/rag last"] and not rows["/rag query"] and not rows["/rag index"]
    assert rows["/policy mode"] and rows["/policy mode strict"] and rows["/serve"]
    assert not rows["/resume"] and rows["/resume last"]
    assert "/workspace switch" not in rows  # a hidden form


def test_every_spec_has_a_handler_and_the_registry_keeps_built_ins() -> None:
    assert sorted(spec.handler for spec in COMMANDS) == sorted(HANDLERS)
    registry: CommandRegistry[str] = CommandRegistry()
    for spec in COMMANDS:
        assert registry.register(spec, spec.handler, builtin=True)

    @dataclasses.dataclass(frozen=True)
    class Greet:
        who: str

    greet = CommandSpec("greet", "Say hello.", (Form((), (Arg("who", "NAME"),), into=Greet),))
    assert registry.register(greet, "greet-handler")
    assert registry.parse("/greet Ada") == (greet, "greet-handler", Greet("Ada"))
    shadow = CommandSpec("rag", "Not the real one.", (Form((), into=Action),))
    assert not registry.register(shadow, "impostor")  # built-ins always win
    spec, handler, _ = registry.parse("/rag last")
    assert handler == "rag" and spec.summary.startswith("Build and select")
    assert "greet" in {s.name for s in registry.specs()}
    with pytest.raises(CommandError, match="Did you mean /greet"):
        registry.parse("/greeet x")


def test_the_grammar_loads_no_pydantic_until_a_tool_backed_spec_is_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, widgets.commands as c\n"
        "c.complete('/rag in'); c.parse('/rag last'); c.COMMANDS[0].usage\n"
        "assert 'pydantic' not in sys.modules, 'early'\n"
        "c.parse('/fs ls')\n"
        "assert 'pydantic' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
