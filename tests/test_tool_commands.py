"""Operator tool commands (``/fs``, ``/shell``, ``/web``, ``/tool``) → the tool and its arguments, by
the grammar of ``widgets.commands`` (tool-backed forms: the fields of the tools' argument models)."""

import pytest

from widgets.commands import CommandError, ToolCall, parse


def call(line: str) -> ToolCall:
    parsed = parse(line)[1]
    assert isinstance(parsed, ToolCall)
    return parsed


def test_fs_commands_map_to_tools() -> None:
    assert call("/fs ls") == ToolCall("builtin:fs:list_dir", {"path": "."})
    assert call("/fs ls docs -r") == ToolCall("builtin:fs:list_dir", {"path": "docs", "recursive": True})
    assert call("/fs read a.txt") == ToolCall("builtin:fs:read_text", {"path": "a.txt"})
    assert call("/fs write a.txt hello world") == ToolCall(
        "builtin:fs:write_text", {"path": "a.txt", "text": "hello world\n"}
    )
    assert call("/fs search needle src") == ToolCall("builtin:fs:search_text", {"query": "needle", "path": "src"})
    # the diff file is the tool's to resolve (workspace-relative) and read (policy-checked)
    assert call("/fs patch change.diff") == ToolCall("builtin:fs:apply_patch", {"patch_file": "change.diff"})


@pytest.mark.parametrize(
    "line", ["/fs", "/fs frob", "/fs read", "/fs read a b", "/fs write a", "/fs ls a b", "/fs patch a b"]
)
def test_bad_fs_commands_say_so(line: str) -> None:
    with pytest.raises(CommandError):
        parse(line)


def test_shell_and_web_commands() -> None:
    assert call("/shell run echo hi") == ToolCall("builtin:shell:run", {"argv": ["echo", "hi"]})
    assert call("/shell poll p-1") == ToolCall("builtin:shell:poll", {"process_id": "p-1"})
    assert call("/web search tantivy stemming") == ToolCall("builtin:web:search", {"query": "tantivy stemming"})
    assert call("/web fetch http://127.0.0.1:8080/") == ToolCall("builtin:web:fetch", {"url": "http://127.0.0.1:8080/"})
    for bad in ("/shell", "/shell run", "/shell kill", "/shell poll a b", "/web fetch a b"):
        with pytest.raises(CommandError):
            parse(bad)


def test_generic_tool_call_takes_json_as_typed() -> None:
    assert call('/tool builtin:fs:read_text {"path": "my file.txt"}') == ToolCall(
        "builtin:fs:read_text", {"path": "my file.txt"}
    )
    assert call("/tool builtin:fs:list_dir") == ToolCall("builtin:fs:list_dir", {})
    with pytest.raises(CommandError, match="must be a JSON object"):
        parse("/tool x [1, 2]")
    with pytest.raises(CommandError, match="not JSON"):
        parse("/tool x {nope")


def test_a_raw_argument_keeps_an_apostrophe_and_other_commands_refuse_one() -> None:
    """/desktop reads its request as typed, and /fs write its text (the spec says so for that argument):
    a lone apostrophe is a word, not an open quote. A word that is not raw still refuses one."""
    _, parsed = parse("/desktop create notes/todo.md with don't forget")
    assert parsed.request == "create notes/todo.md with don't forget"
    assert call("/fs write notes/todo.md don't  forget") == ToolCall(
        "builtin:fs:write_text", {"path": "notes/todo.md", "text": "don't  forget\n"}
    )
    with pytest.raises(CommandError, match="cannot parse the command"):
        parse("/fs read don't")
    with pytest.raises(CommandError, match="cannot parse the command"):
        parse("/rag query don't")
