"""``workspace.yaml`` read without ruamel.yaml at start-up (``services.workspace.settings.plain_yaml``,
issue 29: ~2 MB resident): what the fast reader accepts, ruamel.yaml reads to the same values; anything
else it leaves to ruamel.yaml (and so to its file:line errors); a write after a fast read keeps the
file's comments."""

from __future__ import annotations

from typing import Any

import pytest

from services.errors import ConfigError
from services.files.yamlio import parse_yaml_text
from services.session.opening import Surface, take
from services.workspace.manager import Workspace, WorkspaceManager
from services.workspace.settings import plain_yaml

AS_WRITTEN = """\
# Aries workspace settings. Safe to edit; comments are kept.
format_version: 1
name: demo
created_at: '2026-11-27T08:49:07.623Z'
profile: default
settings:
  model: offline
  active_index:
"""

SAME = [
    AS_WRITTEN,
    AS_WRITTEN + "  approval_mode: strict\n",
    "settings:\n  model: ollama:llama3.2\n  active_index: notes-2.v1\n",
    "name: 'it''s mine'\nprofile: my_profile\n",
    "   # an indented comment\nname: x   \nsettings:\n  # inside the block\n  model: openai:gpt-4o-mini\n",
    "settings:\nprofile: default\n",
    "settings:\n  active_index: ~\nformat_version: 0\n",
    "format_version: 12\nteam: research\nsettings:\n  future: value\n",
    "settings:\n  model: yes\n  other: no\n  third: on\n  fourth: Off\n",  # YAML 1.2: text
    "name: a/b@c+d-e.f_g\n",
    "name: ''\n",
    "",
]

LEFT_TO_RUAMEL = [
    "settings:\n\tmodel: offline\n",  # a tab
    "settings: {model: offline}\n",
    "profiles: [a, b]\n",
    "name: &a demo\nother: *a\n",
    "name: demo # a trailing comment\n",
    'name: "double"\n',
    "settings:\n  cloud:\n    mode: ask\n",  # deeper than one level
    "name: a\nname: b\n",  # a duplicate key
    "name:demo\n",
    "---\nname: demo\n",
    "\ufeffname: demo\n",
    "- a\n- b\n",
    "name: 'open\n  quote'\n",
    "settings:\n  approval_mode: true\n",
    "format_version: 1.5\n",
    "created_at: 2026-11-27\n",
    "format_version: 010\n",
    "name: null\n",
    "null: x\n",
    "name: with space\n",
    "name: café\n",
    "settings: off\n  model: x\n",
    "name: a\r\nprofile: b\r\n",
]


def _kind(value: Any) -> type:
    """bool, int, str, dict or NoneType (ruamel.yaml's round-trip scalars are subclasses)."""
    return next(t for t in (bool, int, float, str, dict, list, type(None)) if isinstance(value, t))


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


@pytest.mark.parametrize("text", SAME, ids=[f"same{n}" for n in range(len(SAME))])
def test_what_the_fast_reader_accepts_ruamel_reads_alike(text: str) -> None:
    fast = plain_yaml(text)
    assert fast is not None
    slow = _plain(parse_yaml_text(text))
    assert fast == (slow if slow is not None else {})
    assert [_kind(v) for v in fast.values()] == [_kind(v) for v in (slow or {}).values()]


@pytest.mark.parametrize("text", LEFT_TO_RUAMEL, ids=[f"left{n}" for n in range(len(LEFT_TO_RUAMEL))])
def test_anything_else_is_left_to_ruamel(text: str) -> None:
    assert plain_yaml(text) is None


def _written(text: str) -> Workspace:
    workspace, _ = WorkspaceManager().create("demo")
    workspace.meta_path.write_text(text, encoding="utf-8")
    return Workspace(workspace.root, "demo")


def test_a_change_after_a_fast_read_keeps_the_comments() -> None:
    workspace = _written(AS_WRITTEN.replace("  model: offline\n", "  model: offline   # the everyday one\n"))
    assert workspace.setting("model") == "offline"  # a trailing comment: ruamel read this one
    workspace = _written(AS_WRITTEN + "# a note at the end\n")
    assert workspace.setting("model") == "offline" and workspace.profile == "default"
    workspace.update(model="ollama:llama3.2")
    text = workspace.meta_path.read_text(encoding="utf-8")
    assert "# Aries workspace settings." in text and "# a note at the end" in text
    assert Workspace(workspace.root, "demo").setting("model") == "ollama:llama3.2"


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ("  approval_mode: reckless\n", "approval_mode: must be one of"),
        ("  cloud: sometimes\n", "cloud:"),
        ("  models: 3\n", "models: must be a mapping"),
        ("  models: {}\n  retrieval:\n    min_score: 7\n", "retrieval.min_score: must be"),
    ],
)
def test_the_tui_still_refuses_a_bad_file_with_one_line_on_open(settings: str, said: str) -> None:
    """What the fast path reads is checked before it is used: a bad value is refused when the TUI
    takes the workspace, naming the file and line."""
    workspace = _written(AS_WRITTEN + settings)
    line = 11 if "min_score" in settings else 9
    with pytest.raises(ConfigError) as caught:
        take("demo", surface=Surface.TUI)
    message = caught.value.message
    assert message.startswith(f"{workspace.meta_path}:{line}: ") and said in message and "\n" not in message
