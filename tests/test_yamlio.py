"""Configuration is untrusted input: YAML alias bombs are refused quickly in bounded memory,
and wrong value types in a policy file are file:line errors, never tracebacks."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from services.errors import ConfigError
from services.files.yamlio import MAX_YAML_NODES, load_yaml, parse_yaml_text
from services.policy import load_policy

pytestmark = pytest.mark.timeout(30)

BILLION_LAUGHS = """\
version: 1
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_alias_bomb_in_a_workspace_policy_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(BILLION_LAUGHS, encoding="utf-8")
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as exc:
            load_policy(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = exc.value.message
    assert message.startswith(f"{path}:") and "alias expansion" in message, message
    line = int(message.split(":")[1])
    assert 2 <= line <= 10  # the line of the node whose expansion went over the limit
    assert "\n" not in message
    assert peak < 32 << 20, peak  # a few MiB, not the gigabytes an expansion would take


def test_alias_bomb_is_refused_by_load_yaml_too(tmp_path: Path) -> None:
    path = tmp_path / "workspace.yaml"
    path.write_text(BILLION_LAUGHS.replace("version: 1\n", "name: w\n"), encoding="utf-8")
    with pytest.raises(ConfigError, match="alias expansion"):
        load_yaml(path)


def test_ordinary_aliases_and_merge_keys_still_work() -> None:
    text = "base: &base {a: 1, b: [1, 2]}\nuse: *base\nmerged:\n  <<: *base\n  c: 3\n"
    data = parse_yaml_text(text, source="x.yaml")
    assert data["use"]["b"] == [1, 2] and data["merged"]["c"] == 3 and data["merged"]["a"] == 1


def test_the_limit_counts_expanded_nodes() -> None:
    items = ", ".join(["*x"] * 50)
    text = f"x: &x [{', '.join(['1'] * 20)}]\ny: [{items}]\n"
    assert parse_yaml_text(text, source="ok.yaml", max_nodes=MAX_YAML_NODES)
    with pytest.raises(ConfigError, match=r"^small\.yaml:2: .*more than 500 nodes"):
        parse_yaml_text(text, source="small.yaml", max_nodes=500)


def test_syntax_errors_name_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"^p\.yaml:3: "):
        parse_yaml_text("version: 1\nmode: guide\nshell: {a: 1 b: }}\nx: 1\n", source="p.yaml")
    with pytest.raises(ConfigError, match=r"^p\.yaml:2: .*undefined alias|^p\.yaml:2: .*found undefined"):
        parse_yaml_text("a: 1\nb: *nope\n", source="p.yaml")


@pytest.mark.parametrize(
    ("body", "line", "fragment"),
    [
        ("mode: 3\n", 2, "mode"),
        ("limits:\n  shell_timeout_s: soon\n", 3, "limits.shell_timeout_s"),
        ("limits:\n  child_memory_bytes: -1\n", 3, "child_memory_bytes"),
        ("limits:\n  child_no_new_privs: maybe\n", 3, "child_no_new_privs"),
        ("shell:\n  executables: {id: x}\n", 3, "shell.executables"),
        ("shell:\n  env_allow: [1, 2]\n", 3, "shell.env_allow"),
        ("web:\n  allow_private: 127.0.0.1\n", 3, "web.allow_private"),
        ("filesystem:\n  allowed_roots: [true]\n", 3, "filesystem.allowed_roots"),
        ("tool_classes:\n  fs: maybe\n", 3, "tool_classes.fs"),
        ("auto_approve:\n  - {id: a, tools: builtin}\n", 3, "auto_approve"),
    ],
)
def test_wrong_value_types_are_file_line_errors(tmp_path: Path, body: str, line: int, fragment: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\n" + body, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_policy(path)
    assert exc.value.message.startswith(f"{path}:{line}: "), exc.value.message
    assert fragment in exc.value.message and "\n" not in exc.value.message
