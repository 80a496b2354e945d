"""The policy: the safe default, file errors with file and line, inline examples, the approval
modes exactly as the spec defines them, and rule ids on every decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.errors import ConfigError
from services.policy import (
    BoundPolicy,
    default_policy,
    glob_to_regex,
    load_policy,
    parse_policy,
)
from services.tools.builtin import default_registry
from tests.tools.conftest import Sandbox, make_policy, policy_data

pytestmark = pytest.mark.timeout(30)


def _bound(sandbox: Sandbox, **overrides: object) -> BoundPolicy:
    return BoundPolicy(make_policy(sandbox.root, **overrides), sandbox.workspace.root)


def _decide(bound: BoundPolicy, tool_id: str, args: dict[str, Any]) -> tuple[str, str, str | None]:
    decision = bound.evaluate(default_registry().get(tool_id), args)
    return decision.action, decision.rule, decision.approved_by


# -- the shipped default --------------------------------------------------------------------------
def test_default_policy_is_safe(sandbox: Sandbox) -> None:
    policy = default_policy()
    assert policy.mode == "guide" and policy.providers == {"builtin": True, "mcp": False}
    bound = BoundPolicy(policy, sandbox.workspace.root)
    (sandbox.workspace.root / "notes.txt").write_text("x")
    assert _decide(bound, "builtin:fs:read_text", {"path": "notes.txt"}) == ("allow", "mode.guide.read_only", "mode")
    assert _decide(bound, "builtin:shell:run", {"argv": ["ls"]})[:2] == ("confirm", "mode.guide.requires_approval")
    assert _decide(bound, "builtin:web:fetch", {"url": "https://example.org/"})[:2] == ("deny", "tool_classes.web")
    assert _decide(bound, "builtin:fs:write_text", {"path": "a", "text": ""})[0] == "confirm"
    assert _decide(bound, "builtin:shell:run", {"argv": ["bash"]})[:2] == ("deny", "shell.executables")
    assert _decide(bound, "builtin:fs:read_text", {"path": ".env"})[:2] == ("deny", "fs.deny.dotenv")
    assert bound.roots == [sandbox.workspace.root.resolve()]


def test_default_policy_file_ships_as_package_data() -> None:
    from importlib.resources import files

    text = (files("profiles") / "policy-default.yaml").read_text(encoding="utf-8")
    assert parse_policy(text).hash == default_policy().hash
    assert load_policy(None) is default_policy()


def test_deny_by_default_for_unlisted_classes_and_providers(sandbox: Sandbox) -> None:
    bound = _bound(sandbox, tool_classes={"fs": "enabled"})
    assert _decide(bound, "builtin:shell:poll", {"process_id": "x"})[:2] == ("deny", "default.deny")
    bound = _bound(sandbox, providers={})
    assert _decide(bound, "builtin:fs:list_dir", {})[:2] == ("deny", "providers.builtin")
    bound = _bound(sandbox, tool_classes={"fs": False, "shell": "disabled"})
    assert _decide(bound, "builtin:fs:list_dir", {})[:2] == ("deny", "tool_classes.fs")


def test_per_tool_overrides(sandbox: Sandbox) -> None:
    bound = _bound(
        sandbox, tools={"builtin:shell:start": {"enabled": False}, "builtin:fs:read_text": {"require_approval": True}}
    )
    assert _decide(bound, "builtin:shell:start", {"argv": ["ls"]})[:2] == ("deny", "tools.builtin:shell:start")
    assert _decide(bound, "builtin:fs:read_text", {"path": "hello.txt"})[:2] == (
        "confirm",
        "tools.builtin:fs:read_text.require_approval",
    )


# -- the modes ------------------------------------------------------------------------------------
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "READ_ONLY": ("builtin:fs:read_text", {"path": "hello.txt"}),
    "WRITE_SAFE": ("builtin:fs:write_text", {"path": "n.txt", "text": "", "if_exists": "error"}),
    "WRITE_DESTRUCTIVE": ("builtin:fs:write_text", {"path": "n.txt", "text": ""}),
    "EXEC_USERSPACE": ("builtin:shell:run", {"argv": ["echo", "x"]}),
    "EXEC_USERSPACE_KILL": ("builtin:shell:kill", {"process_id": "p1"}),
    "EXEC_PRIVILEGED": ("builtin:shell:run", {"argv": ["sudo", "ls"]}),
    "NETWORK": ("builtin:web:fetch", {"url": "https://docs.python.org/3/"}),
}

EXPECTED = {
    "guide": {
        "READ_ONLY": "allow",
        "WRITE_SAFE": "confirm",
        "WRITE_DESTRUCTIVE": "confirm",
        "EXEC_USERSPACE": "confirm",
        "EXEC_USERSPACE_KILL": "confirm",
        "EXEC_PRIVILEGED": "confirm",
        "NETWORK": "confirm",
    },
    "commander": {
        "READ_ONLY": "allow",
        "WRITE_SAFE": "allow",
        "WRITE_DESTRUCTIVE": "confirm",
        "EXEC_USERSPACE": "allow",
        "EXEC_USERSPACE_KILL": "allow",
        "EXEC_PRIVILEGED": "confirm",
        "NETWORK": "confirm",
    },
    "strict": {
        "READ_ONLY": "allow",
        "WRITE_SAFE": "confirm",
        "WRITE_DESTRUCTIVE": "confirm",
        "EXEC_USERSPACE": "confirm",
        "EXEC_USERSPACE_KILL": "confirm",
        "EXEC_PRIVILEGED": "confirm",
        "NETWORK": "confirm",
    },
}


@pytest.mark.parametrize("mode", ["guide", "commander", "strict"])
def test_approval_modes(mode: str, sandbox: Sandbox) -> None:
    bound = _bound(sandbox, mode=mode, web__schemes=["https"])
    for tier, (tool_id, args) in CALLS.items():
        decision = bound.evaluate(default_registry().get(tool_id), args)
        assert decision.action == EXPECTED[mode][tier], (mode, tier, decision.to_dict())
        assert decision.rule and decision.mode == mode
        assert str(decision.tier) == tier.removesuffix("_KILL")


def test_commander_auto_approve_rules(sandbox: Sandbox) -> None:
    rules = [
        {"id": "python-docs", "tools": ["builtin:web:fetch"], "domains": ["docs.python.org", "*.python.org"]},
        {"id": "notes", "tools": ["builtin:fs:*"], "paths": ["notes/**"]},
    ]
    bound = _bound(sandbox, mode="commander", web__schemes=["https"], auto_approve=rules)
    assert _decide(bound, "builtin:web:fetch", {"url": "https://docs.python.org/3/"}) == (
        "allow",
        "auto_approve.python-docs",
        "rule",
    )
    assert _decide(bound, "builtin:web:fetch", {"url": "https://wiki.python.org/"})[0] == "allow"
    assert _decide(bound, "builtin:web:fetch", {"url": "https://pypi.org/"})[0] == "confirm"
    assert _decide(bound, "builtin:fs:write_text", {"path": "notes/a.md", "text": ""})[1] == "auto_approve.notes"
    assert _decide(bound, "builtin:fs:write_text", {"path": "other.md", "text": ""})[0] == "confirm"
    strict = _bound(sandbox, mode="strict", web__schemes=["https"], auto_approve=rules)
    assert _decide(strict, "builtin:web:fetch", {"url": "https://docs.python.org/3/"})[0] == "confirm"


def test_mode_override_and_bad_mode(sandbox: Sandbox) -> None:
    policy = make_policy(sandbox.root)
    assert BoundPolicy(policy, None, mode="strict").mode == "strict"
    with pytest.raises(ConfigError):
        BoundPolicy(policy, None, mode="yolo")


def test_roots_variables_and_missing_roots(sandbox: Sandbox) -> None:
    policy = make_policy("${workspace}")
    bound = BoundPolicy(policy, sandbox.workspace.root)
    assert bound.roots == [sandbox.workspace.root.resolve()]
    unbound = BoundPolicy(policy, None)
    assert unbound.roots == [] and unbound.warnings
    decision = unbound.evaluate(default_registry().get("builtin:fs:list_dir"), {"path": "."})
    assert decision.action == "deny" and decision.rule == "fs.allowed_roots"
    gone = BoundPolicy(make_policy(sandbox.base / "does-not-exist"), None)
    assert gone.roots == [] and "not an existing directory" in gone.warnings[0]


# -- loading errors -------------------------------------------------------------------------------
BAD_POLICIES = [
    ("version: 1\nmode: guide\n  oops: [\n", 3, "mapping values"),
    ("version: 1\nmode: yolo\n", 2, "mode"),
    ("version: 1\nmode: guide\ntool_classes:\n  fs: maybe\n", 4, "tool_classes.fs"),
    (
        "version: 1\nfilesystem:\n  allowed_roots: [x]\n  deny:\n    - id: a\n      glob: '*.x'\n      color: red\n",
        7,
        "color",
    ),
    ("version: 1\nlimits:\n  fs_read_max_bytes: -5\n", 3, "fs_read_max_bytes"),
    ("version: 1\nlimits:\n  fs_read_max_bytes: 1.5\n", 3, "fs_read_max_bytes"),
    ("mode: guide\n", 1, "version"),
    ("version: 1\nunknown_section: {}\n", 2, "unknown_section"),
    ("- just\n- a list\n", 1, "mapping"),
    (
        "version: 1\nfilesystem:\n  deny:\n    - id: env\n      glob: '**/.env'\n      match: ['.env']\n"
        "      not_match: ['a/.env']\n",
        7,
        "should not match but does",
    ),
    (
        "version: 1\nshell:\n  executables:\n    - id: tools\n      names: [ls]\n      match: [rm]\n",
        6,
        "should match but does not",
    ),
    ("version: 1\nfilesystem:\n  deny:\n    - {id: a, glob: x}\n    - {id: a, glob: y}\n", None, "unique"),
    ("version: 1\nweb:\n  allow_private: ['not a host!']\n", 3, "neither a host nor a network"),
]


@pytest.mark.parametrize(("text", "line", "reason"), BAD_POLICIES)
def test_bad_policies_fail_with_file_line_and_reason(text: str, line: int | None, reason: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    message = caught.value.message
    assert message.startswith(str(path)), message
    if line is not None:
        assert message.startswith(f"{path}:{line}:"), message
        assert caught.value.details["line"] == line
    assert reason in message, message


def test_missing_policy_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_policy(tmp_path / "nope.yaml")


def test_examples_that_hold_load_fine() -> None:
    policy = parse_policy(
        "version: 1\nfilesystem:\n  deny:\n    - id: env\n      glob: '**/.env'\n      match: ['.env', 'x/y/.env']\n"
        "      not_match: ['.envrc']\n  deny_extensions:\n    - id: k\n      extensions: [pem, .KEY]\n"
        "      match: [a/b.pem, c.key]\n      not_match: [pem.txt]\n"
    )
    assert [r.id for r in policy.deny_rules] == ["env", "k"]


def test_policy_hash_changes_with_content(sandbox: Sandbox) -> None:
    a = make_policy(sandbox.root)
    data = policy_data(sandbox.root)
    data["limits"]["fs_read_max_bytes"] = 10
    b = parse_policy(json.dumps(data))
    assert a.hash != b.hash and a.hash == make_policy(sandbox.root).hash


# -- glob semantics -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/.env", ".env", True),
        ("**/.env", "a/b/.env", True),
        ("**/.env", "a/.envrc", False),
        ("**/.git/**", ".git", True),
        ("**/.git/**", "x/.git/config", True),
        ("**/.git/**", ".github/x", False),
        ("*.pem", "a.pem", True),
        ("*.pem", "dir/a.pem", False),
        ("secrets/*", "secrets/a", True),
        ("secrets/*", "secrets/a/b", False),
        ("data/**", "data/a/b/c", True),
        ("file?.txt", "file1.txt", True),
        ("file[!0-9].txt", "file1.txt", False),
        ("file[!0-9].txt", "fileA.txt", True),
        ("**/.ENV", "x/.env", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_to_regex(pattern).match(path)) is matches


# -- the document (pydantic) ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: 1\nfilesystem:\n  deny:\n    - id: a\n      glob: '*.x'\n      color: red\n",
            "p.yaml:6: filesystem.deny.0.color: is not a setting Aries knows here",
        ),
        ("version: 1\nweb:\n  allow_private:\n    - {host: x}\n", "p.yaml:4: web.allow_private.0.ports: is required"),
        ("version: 1\nmode: yolo\n", "p.yaml:2: mode: Input should be 'guide', 'commander' or 'strict' (not 'yolo')"),
        (
            "version: 1\ntool_classes:\n  fs: maybe\n",
            "p.yaml:3: tool_classes.fs: must be enabled, disabled, true or false",
        ),
        (
            "version: 1\nproviders:\n  mcp:\n    servers:\n      t:\n        command: x\n        url: http://127.0.0.1:1/mcp\n",
            "p.yaml:5: providers.mcp.servers.t: give exactly one of command",
        ),
        (
            "version: 1\nproviders:\n  mcp:\n    servers:\n      t:\n        url: http://example.com/mcp\n",
            "p.yaml:6: providers.mcp.servers.t.url: only loopback hosts",
        ),
    ],
)
def test_policy_problems_name_the_setting_and_its_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, source="p.yaml")
    assert caught.value.message.startswith(expected), caught.value.message


def test_the_document_holds_the_defaults_the_rules_use() -> None:
    from services.policy.document import PolicyDocument
    from services.policy.exec_table import DEFAULT_ENV_ALLOW
    from services.policy.model import DEFAULT_VISIBLE, Limits

    doc = PolicyDocument.model_validate({"version": 1})
    policy = parse_policy("version: 1\n")
    assert tuple(doc.shell.env_allow) == DEFAULT_ENV_ALLOW == policy.env_allow
    assert tuple(doc.shell.visible_paths) == DEFAULT_VISIBLE == policy.sandbox.visible
    assert doc.limits == Limits() == policy.limits and policy.providers == {}
    assert policy.data == {"version": 1}  # what the hash is taken of: the file as written
