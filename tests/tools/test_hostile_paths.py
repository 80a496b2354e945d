"""Hostile paths: every fs tool refuses each of them with a typed error, and nothing outside the
allowed root is read, listed or changed (sentinel files outside are checked byte for byte)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest

from services.tools.gateway import ToolGateway
from tests.tools.conftest import SENTINEL, Sandbox

pytestmark = pytest.mark.timeout(120)


def _prepare(sandbox: Sandbox) -> None:
    root, outside = sandbox.root, sandbox.outside
    (root / ".env").write_text("API_KEY=hunter2\n")
    (root / "sub" / ".env").write_text("API_KEY=hunter2\n")
    (root / "keys").mkdir()
    (root / "keys" / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    (root / ".ssh").mkdir()
    (root / ".ssh" / "id_rsa").write_text("private\n")
    os.symlink(outside, root / "link_out")
    os.symlink(outside / "secret.txt", root / "link_secret")
    os.symlink(outside / "does-not-exist.txt", root / "dangling_out")
    os.symlink(root / ".env", root / "link_to_env")
    os.symlink("../..", root / "sub" / "link_up")
    os.symlink("/dev/zero", root / "dev_link")
    os.link(outside / "secret.txt", root / "hardlink_secret")
    os.mkfifo(root / "fifo")


def hostile_paths(sandbox: Sandbox) -> list[str]:
    root, outside = sandbox.root, sandbox.outside
    return [
        "../outside/secret.txt",
        "../../etc/passwd",
        "sub/../../outside/secret.txt",
        "./../outside",
        "sub/./../../outside/sub",
        f"{root}/../outside/secret.txt",
        "%2e%2e/outside/secret.txt",
        "%2e%2e%2foutside%2fsecret.txt",
        "..%2foutside/secret.txt",
        "%252e%252e/outside/secret.txt",
        "..%252foutside%252fsecret.txt",
        "%c0%ae%c0%ae/outside/secret.txt",
        "%u002e%u002e/outside",
        str(outside / "secret.txt"),
        str(outside),
        "/etc/passwd",
        "//etc/passwd",
        "/proc/self/environ",
        "/dev/zero",
        "/",
        "~/.bashrc",
        "~root/.ssh/id_rsa",
        "$HOME/.bashrc",
        "${HOME}/.profile",
        "%HOME%/x",
        "secret.txt\x00.png",
        "\x00",
        "",
        "\u2025/outside/secret.txt",
        "\uff0e\uff0e/outside/secret.txt",
        "..\uff0foutside\uff0fsecret.txt",
        "..\u2215outside\u2215secret.txt",
        "..\\outside\\secret.txt",
        "\\\\server\\share\\x",
        "C:\\Windows\\win.ini",
        "file:///etc/passwd",
        "hello\u202etxt.exe",
        "hel\u200blo.txt",
        "link_out/secret.txt",
        "link_out",
        "link_secret",
        "dangling_out",
        "hardlink_secret",
        "fifo",
        "dev_link",
        "sub/link_up/outside/secret.txt",
        "link_to_env",
        ".env",
        "sub/.env",
        "keys/server.pem",
        ".ssh/id_rsa",
        "a" * 300,
        "a/" * 2100 + "x",
    ]


def _call_args(tool: str, path: str) -> dict[str, Any]:
    if tool == "list_dir":
        return {"path": path}
    if tool == "read_text":
        return {"path": path}
    if tool == "write_text":
        return {"path": path, "text": "pwned\n", "create_dirs": True}
    if tool == "search_text":
        return {"path": path, "query": SENTINEL}
    patch = f"--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n"
    return {"patch": patch}


TOOLS = ("list_dir", "read_text", "write_text", "search_text", "apply_patch")


def test_there_are_at_least_forty_hostile_paths(sandbox: Sandbox) -> None:
    assert len(set(hostile_paths(sandbox))) >= 40


@pytest.mark.parametrize("tool", TOOLS)
def test_every_fs_tool_refuses_every_hostile_path(
    tool: str, sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    _prepare(sandbox)
    before = sandbox.snapshot_outside()
    root_before = sorted(str(p) for p in sandbox.root.rglob("*"))
    gateway = gateway_factory()
    failures = []
    for path in hostile_paths(sandbox):
        result = gateway.execute_sync(f"builtin:fs:{tool}", _call_args(tool, path))
        text = json.dumps(result.to_dict())
        if result.ok or result.error is None or result.error.type not in {"PolicyDenied", "InvalidInput"}:
            failures.append((path[:60], result.status, result.error.type if result.error else None))
        assert SENTINEL not in text, f"{tool} leaked sentinel content for {path[:60]!r}"
        assert "root:x:0" not in text
        assert "hunter2" not in text
    assert not failures, failures
    assert sandbox.snapshot_outside() == before, "something outside the allowed root changed"
    assert sorted(str(p) for p in sandbox.root.rglob("*")) == root_before, "a refused write created a file"
    # Every refusal is in the audit store with its decision and rule.
    calls = gateway.audit.calls(limit=1000)
    assert len(calls) == len(hostile_paths(sandbox))
    assert all(c["status"] in {"denied", "error"} and c["rule_id"] for c in calls)
    denied = [c for c in calls if c["status"] == "denied"]
    assert len(denied) >= len(calls) - 5  # the rest: e.g. list_dir of a (read-denied) file is "not a directory"


def test_refusals_name_the_rule(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _prepare(sandbox)
    expected = {
        "../outside/secret.txt": "fs.traversal",
        "%2e%2e/outside/secret.txt": "fs.encoded_path",
        "\u2025/outside/secret.txt": "fs.unicode_lookalike",
        "~/.bashrc": "fs.home_expansion",
        "$HOME/.bashrc": "fs.variable_expansion",
        "secret.txt\x00.png": "fs.path_syntax",
        "/etc/passwd": "fs.allowed_roots",
        "link_secret": "fs.symlink_escape",
        "dangling_out": "fs.symlink_escape",
        "hardlink_secret": "fs.hardlink",
        "fifo": "fs.special_file",
        "link_to_env": "fs.deny.dotenv",
        "keys/server.pem": "fs.deny_extensions.keys",
    }
    for path, rule in expected.items():
        result = gateway.execute_sync("builtin:fs:read_text", {"path": path})
        assert result.error is not None and result.error.details["rule"] == rule, (path, result.to_dict())


def test_legitimate_paths_still_work(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _prepare(sandbox)
    assert gateway.execute_sync("builtin:fs:read_text", {"path": "sub/ok.txt"}).ok
    assert gateway.execute_sync("builtin:fs:read_text", {"path": str(sandbox.root / "hello.txt")}).ok
    assert gateway.execute_sync("builtin:fs:read_text", {"path": "sub/../hello.txt"}).ok
    assert gateway.execute_sync("builtin:fs:list_dir", {"path": "sub"}).ok
    assert gateway.execute_sync("builtin:fs:write_text", {"path": "100%.txt", "text": "fine"}).ok
    assert gateway.execute_sync("builtin:fs:write_text", {"path": "caf\u00e9.txt", "text": "fine"}).ok


def test_listing_never_follows_links_out(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _prepare(sandbox)
    result = gateway.execute_sync("builtin:fs:list_dir", {"path": ".", "recursive": True})
    assert result.ok and result.data is not None
    names = [e["path"] for e in result.data["entries"]]
    assert "link_out" in names and not any(n.startswith("link_out/") for n in names)
    assert not any("secret.txt" in n and n.startswith("link_out") for n in names)
    assert ".ssh" not in names  # listing denied by the ssh rule
    assert result.data["hidden_by_policy"] >= 1
    types = {e["path"]: e["type"] for e in result.data["entries"]}
    assert types["link_secret"] == "symlink" and types["fifo"] == "other"


def test_search_skips_links_fifos_and_denied_files(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _prepare(sandbox)
    (sandbox.root / "sub" / "match.txt").write_text("needle here\n")
    (sandbox.root / "sub" / ".env").write_text("needle=secret\n")
    result = gateway.execute_sync("builtin:fs:search_text", {"path": ".", "query": "needle"})
    assert result.ok and result.data is not None
    assert [m["path"] for m in result.data["matches"]] == ["sub/match.txt"]
    result = gateway.execute_sync("builtin:fs:search_text", {"path": ".", "query": SENTINEL})
    assert result.ok and result.data is not None and result.data["matches"] == []


SHELL_REFUSALS = [
    ["cat", "../outside/secret.txt"],
    ["cat", ".env"],
    ["cat", "sub/.env"],
    ["cat", "/etc/passwd"],
    ["cat", "link_secret"],
    ["cat", "hardlink_secret"],
    ["cat", "link_out/secret.txt"],
    ["cat", "keys/server.pem"],
    ["cat", "~/.bashrc"],
    ["cat", "%2e%2e/outside/secret.txt"],
    ["head", "-n1", "/proc/self/environ"],
    ["grep", "-r", "x", "/"],
    ["grep", "--file=/etc/passwd", "x", "hello.txt"],
    ["cat", "-/etc/passwd"],
    ["sh", "-c", "cat /etc/passwd"],
    ["/bin/cat", "hello.txt"],
    ["./cat", "hello.txt"],
    ["bash"],
]


@pytest.mark.parametrize("argv", SHELL_REFUSALS, ids=lambda a: " ".join(a)[:40])
def test_shell_refuses_commands_naming_denied_paths(argv: list[str], sandbox: Sandbox, gateway: ToolGateway) -> None:
    _prepare(sandbox)
    before = sandbox.snapshot_outside()
    result = gateway.execute_sync("builtin:shell:run", {"argv": argv, "cwd": str(sandbox.root)})
    assert not result.ok and result.error is not None
    assert result.error.type in {"PolicyDenied", "InvalidInput"}, result.to_dict()
    assert SENTINEL not in json.dumps(result.to_dict())
    assert sandbox.snapshot_outside() == before


def test_shell_cwd_outside_the_roots_is_refused(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _prepare(sandbox)
    for cwd in (str(sandbox.outside), "..", "link_out", "/"):
        result = gateway.execute_sync("builtin:shell:run", {"argv": ["ls"], "cwd": cwd})
        assert result.error is not None and result.error.type == "PolicyDenied", cwd


def test_shell_cat_of_an_allowed_file_works(sandbox: Sandbox, gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["cat", "hello.txt"], "cwd": str(sandbox.root)})
    assert result.ok and result.data is not None and result.data["stdout"] == "hello world\nsecond line\n"


def test_toctou_swap_to_symlink_is_caught(sandbox: Sandbox, gateway: ToolGateway) -> None:
    """A file checked by the policy and then swapped for a link to outside is not read."""
    from services.tools import fsio
    from services.tools.registry import ToolContext, issue_capability, revoke_capability

    target = sandbox.root / "swap.txt"
    target.write_text("harmless\n")
    ctx = ToolContext("c1", "builtin:fs:read_text", gateway.bound, sandbox.workspace, None)
    resolved = gateway.bound.guard.resolve("swap.txt", "read")
    target.unlink()
    os.symlink(sandbox.outside / "secret.txt", target)
    cap = issue_capability("builtin:fs:read_text", "c1")
    try:
        with pytest.raises(OSError):  # O_NOFOLLOW refuses the swapped-in link (ELOOP)
            fsio.open_for_read(ctx, resolved)
    finally:
        revoke_capability(cap)
    target.unlink()
    target.write_text("harmless\n")
    resolved = gateway.bound.guard.resolve("swap.txt", "read")
    target.rename(sandbox.root / "aside.txt")  # keeps the checked inode alive, so it is not reused
    target.write_text("replaced\n")
    from services.policy.model import ToolPermissionDenied

    with pytest.raises(ToolPermissionDenied):
        fsio.open_for_read(ctx, resolved)
