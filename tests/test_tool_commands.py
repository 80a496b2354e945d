from pathlib import Path

import pytest

from app.commands.tool_parse import fs_call, generic_call, shell_call, web_call
from widgets.commands import CommandError


def test_fs_commands_map_to_tools(tmp_path: Path) -> None:
    assert fs_call(["ls"]) == ("builtin:fs:list_dir", {"path": "."})
    assert fs_call(["ls", "docs", "-r"]) == ("builtin:fs:list_dir", {"path": "docs", "recursive": True})
    assert fs_call(["read", "a.txt"]) == ("builtin:fs:read_text", {"path": "a.txt"})
    assert fs_call(["write", "a.txt", "hello", "world"]) == (
        "builtin:fs:write_text",
        {"path": "a.txt", "text": "hello world\n"},
    )
    assert fs_call(["search", "needle", "src"]) == ("builtin:fs:search_text", {"query": "needle", "path": "src"})
    # the diff file is the tool's to resolve (workspace-relative) and read (policy-checked)
    assert fs_call(["patch", "change.diff"]) == ("builtin:fs:apply_patch", {"patch_file": "change.diff"})


@pytest.mark.parametrize(
    "args", [[], ["frob"], ["read"], ["read", "a", "b"], ["write", "a"], ["ls", "a", "b"], ["patch", "a", "b"]]
)
def test_bad_fs_commands_say_so(args: list[str]) -> None:
    with pytest.raises(CommandError):
        fs_call(args)


def test_shell_and_web_commands() -> None:
    assert shell_call(["run", "echo", "hi"]) == ("builtin:shell:run", {"argv": ["echo", "hi"]})
    assert shell_call(["poll", "p-1"]) == ("builtin:shell:poll", {"process_id": "p-1"})
    assert web_call(["search", "tantivy", "stemming"]) == ("builtin:web:search", {"query": "tantivy stemming"})
    assert web_call(["fetch", "http://127.0.0.1:8080/"]) == ("builtin:web:fetch", {"url": "http://127.0.0.1:8080/"})
    for bad in ([], ["run"], ["kill"], ["poll", "a", "b"]):
        with pytest.raises(CommandError):
            shell_call(bad)
    with pytest.raises(CommandError):
        web_call(["fetch", "a", "b"])


def test_generic_tool_call_takes_json_from_the_raw_line() -> None:
    line = '/tool builtin:fs:read_text {"path": "my file.txt"}'
    assert generic_call(["builtin:fs:read_text", "{path:", "my file.txt}"], line) == (
        "builtin:fs:read_text",
        {"path": "my file.txt"},
    )
    with pytest.raises(CommandError):
        generic_call(["x"], "/tool x [1, 2]")
    with pytest.raises(CommandError):
        generic_call(["x"], "/tool x {nope")


def test_a_desktop_request_with_an_apostrophe_reaches_its_parser() -> None:
    """/desktop reads its request as typed: a lone apostrophe is a word, not an open quote (the
    desktop parser itself says what it makes of it); other commands still refuse one."""
    from widgets.commands import parse

    command, args = parse("/desktop create notes/todo.md with don't forget")
    assert command.name == "desktop" and args[-2:] == ["don't", "forget"]
    with pytest.raises(CommandError, match="cannot parse the command"):
        parse("/fs write notes/todo.md don't")
