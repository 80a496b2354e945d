"""Filesystem tools: sorted listings, capped reads, atomic writes, capped searches, all-or-nothing
patches, and the workspace's own records out of reach."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable
from typing import Any

import pytest

from services.tools.gateway import ToolGateway
from services.tools.patching import parse_patch
from tests.tools.conftest import Sandbox, make_policy, policy_data

pytestmark = pytest.mark.timeout(60)


def _ok(result: Any) -> dict[str, Any]:
    assert result.ok, result.to_dict()
    return dict(result.data)


# -- list_dir -------------------------------------------------------------------------------------
def test_listing_is_sorted_by_normalized_path(sandbox: Sandbox, gateway: ToolGateway) -> None:
    base = sandbox.root / "tree"
    for rel in ("b.txt", "a-b", "a/z.txt", "a/b/c.txt", "A.txt", "a0"):
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel in {"a-b", "a0"}:
            path.mkdir()
        else:
            path.write_text(rel)
    flat = _ok(gateway.execute_sync("builtin:fs:list_dir", {"path": "tree"}))
    assert [e["path"] for e in flat["entries"]] == ["A.txt", "a", "a-b", "a0", "b.txt"]
    deep = _ok(gateway.execute_sync("builtin:fs:list_dir", {"path": "tree", "recursive": True}))
    paths = [e["path"] for e in deep["entries"]]
    assert paths == sorted(paths) == ["A.txt", "a", "a-b", "a/b", "a/b/c.txt", "a/z.txt", "a0", "b.txt"]
    sizes = {e["path"]: e["size"] for e in deep["entries"]}
    assert sizes["a/b/c.txt"] == len("a/b/c.txt") and sizes["a"] == 0


def test_listing_caps_and_hides(sandbox: Sandbox, gateway: ToolGateway) -> None:
    for i in range(30):
        (sandbox.root / "sub" / f"f{i:02d}.txt").write_text("x")
    (sandbox.root / "sub" / ".hidden").write_text("x")
    capped = gateway.execute_sync("builtin:fs:list_dir", {"path": "sub", "max_entries": 10})
    data = _ok(capped)
    assert data["count"] == 10 and capped.meta["truncated"] is True
    assert [e["name"] for e in data["entries"]][:2] == [".hidden", "f00.txt"]
    visible = _ok(gateway.execute_sync("builtin:fs:list_dir", {"path": "sub", "include_hidden": False}))
    assert ".hidden" not in [e["name"] for e in visible["entries"]]


def test_listing_errors(sandbox: Sandbox, gateway: ToolGateway) -> None:
    missing = gateway.execute_sync("builtin:fs:list_dir", {"path": "nope"})
    assert missing.error is not None and missing.error.type == "NotFound"
    a_file = gateway.execute_sync("builtin:fs:list_dir", {"path": "hello.txt"})
    assert a_file.error is not None and a_file.error.type == "InvalidInput"
    under_a_file = gateway.execute_sync("builtin:fs:read_text", {"path": "hello.txt/x"})
    assert under_a_file.error is not None and under_a_file.error.type == "InvalidInput"


def test_listing_limit_from_policy_wins(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    for i in range(8):
        (sandbox.root / "sub" / f"g{i}").write_text("x")
    gateway = gateway_factory(make_policy(sandbox.root, limits={"fs_list_max_entries": 3}))
    result = gateway.execute_sync("builtin:fs:list_dir", {"path": "sub", "max_entries": 1000})
    assert _ok(result)["count"] == 3 and result.meta["limit"] == 3


# -- read_text ------------------------------------------------------------------------------------
def test_read_caps_with_truncation_metadata(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "big.txt").write_text("0123456789" * 100)
    result = gateway.execute_sync("builtin:fs:read_text", {"path": "big.txt", "max_bytes": 25})
    data = _ok(result)
    assert data["text"] == "0123456789012345678901234" and data["size"] == 1000
    assert result.meta["truncated"] is True and result.meta["bytes_read"] == 25
    whole = gateway.execute_sync("builtin:fs:read_text", {"path": "big.txt"})
    assert whole.meta["truncated"] is False and whole.meta["bytes_read"] == 1000
    offset = _ok(gateway.execute_sync("builtin:fs:read_text", {"path": "big.txt", "offset": 995}))
    assert offset["text"] == "56789"


def test_read_never_splits_a_character(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "u.txt").write_text("ab\u00e9\u20ac", encoding="utf-8")  # a b é(2) €(3)
    result = gateway.execute_sync("builtin:fs:read_text", {"path": "u.txt", "max_bytes": 5})
    assert _ok(result)["text"] == "ab\u00e9" and result.meta["decode_errors"] is False


def test_read_refuses_binary_directories_and_missing(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "bin.dat").write_bytes(b"\x00\x01\x02binary")
    for path, kind in (("bin.dat", "InvalidInput"), ("sub", "InvalidInput"), ("missing.txt", "NotFound")):
        result = gateway.execute_sync("builtin:fs:read_text", {"path": path})
        assert result.error is not None and result.error.type == kind, path


def test_read_of_unreadable_file_is_permission_denied(sandbox: Sandbox, gateway: ToolGateway) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files regardless of their mode")
    locked = sandbox.root / "locked.txt"
    locked.write_text("x")
    locked.chmod(0)
    result = gateway.execute_sync("builtin:fs:read_text", {"path": "locked.txt"})
    assert result.error is not None and result.error.type == "PermissionDenied"


# -- write_text -----------------------------------------------------------------------------------
def test_write_is_atomic_and_keeps_the_mode(sandbox: Sandbox, gateway: ToolGateway) -> None:
    target = sandbox.root / "script.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    data = _ok(gateway.execute_sync("builtin:fs:write_text", {"path": "script.sh", "text": "new\n"}))
    assert target.read_text() == "new\n" and data["created"] is False and data["bytes_written"] == 4
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert not [p for p in sandbox.root.iterdir() if p.name.endswith(".tmp")]


def test_write_create_only_is_write_safe(sandbox: Sandbox, gateway: ToolGateway) -> None:
    created = gateway.execute_sync("builtin:fs:write_text", {"path": "n.txt", "text": "1", "if_exists": "error"})
    assert _ok(created)["created"] is True and created.meta["decision"]["tier"] == "WRITE_SAFE"
    again = gateway.execute_sync("builtin:fs:write_text", {"path": "n.txt", "text": "2", "if_exists": "error"})
    assert again.error is not None and again.error.type == "InvalidInput"
    assert (sandbox.root / "n.txt").read_text() == "1"


def test_write_directories_and_limits(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    gateway = gateway_factory(make_policy(sandbox.root, limits={"fs_write_max_bytes": 10}))
    no_dir = gateway.execute_sync("builtin:fs:write_text", {"path": "x/y/z.txt", "text": "1"})
    assert no_dir.error is not None and no_dir.error.type == "NotFound"
    made = gateway.execute_sync("builtin:fs:write_text", {"path": "x/y/z.txt", "text": "1", "create_dirs": True})
    assert made.ok and (sandbox.root / "x" / "y" / "z.txt").read_text() == "1"
    big = gateway.execute_sync("builtin:fs:write_text", {"path": "big.txt", "text": "x" * 11})
    assert big.error is not None and big.error.type == "TooLarge"
    onto_dir = gateway.execute_sync("builtin:fs:write_text", {"path": "sub", "text": "x"})
    assert onto_dir.error is not None and onto_dir.error.type == "InvalidInput"


def test_write_through_an_inside_symlink_replaces_the_target(sandbox: Sandbox, gateway: ToolGateway) -> None:
    os.symlink("sub/ok.txt", sandbox.root / "alias.txt")
    assert gateway.execute_sync("builtin:fs:write_text", {"path": "alias.txt", "text": "via alias\n"}).ok
    assert (sandbox.root / "sub" / "ok.txt").read_text() == "via alias\n"
    assert (sandbox.root / "alias.txt").is_symlink()


def test_write_to_a_hard_link_inside_is_refused(sandbox: Sandbox, gateway: ToolGateway) -> None:
    os.link(sandbox.root / "hello.txt", sandbox.root / "twin.txt")
    result = gateway.execute_sync("builtin:fs:write_text", {"path": "twin.txt", "text": "x"})
    assert result.error is not None and result.error.details["rule"] == "fs.hardlink"
    assert (sandbox.root / "hello.txt").read_text().startswith("hello")


def test_git_internals_are_read_only(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / ".git").mkdir()
    (sandbox.root / ".git" / "config").write_text("[core]\n")
    assert gateway.execute_sync("builtin:fs:read_text", {"path": ".git/config"}).ok
    write = gateway.execute_sync("builtin:fs:write_text", {"path": ".git/config", "text": "x"})
    assert write.error is not None and write.error.details["rule"] == "fs.deny.git-internals"


def test_write_extension_allowlist(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    data = policy_data(sandbox.root)
    data["filesystem"]["write_extensions"] = [".md", "txt"]
    from services.policy import parse_policy

    gateway = gateway_factory(parse_policy(json.dumps(data)))
    assert gateway.execute_sync("builtin:fs:write_text", {"path": "notes.md", "text": "x"}).ok
    result = gateway.execute_sync("builtin:fs:write_text", {"path": "run.sh", "text": "x"})
    assert result.error is not None and result.error.details["rule"] == "fs.write_extensions"


def test_workspace_records_cannot_be_written(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    gateway = gateway_factory(make_policy("${workspace}"))
    for path in (
        "audit.db",
        "audit.db-wal",
        "transcripts/x.ndjson",
        "artifacts/registry.json",
        "workspace.yaml",
        "policy.yaml",
    ):
        result = gateway.execute_sync("builtin:fs:write_text", {"path": path, "text": "tamper"})
        assert result.error is not None and result.error.details["rule"] == "fs.workspace_internal", path
    assert gateway.execute_sync("builtin:fs:write_text", {"path": "notes.txt", "text": "fine"}).ok
    assert gateway.execute_sync("builtin:fs:read_text", {"path": "workspace.yaml"}).ok


# -- search_text ----------------------------------------------------------------------------------
def _corpus(sandbox: Sandbox) -> None:
    docs = sandbox.root / "docs"
    docs.mkdir()
    (docs / "b.md").write_text("alpha\nneedle one\nbeta\nNEEDLE two\ngamma\n")
    (docs / "a.txt").write_text("\n".join(f"line {i} needle" for i in range(50)) + "\n")
    (docs / "c.py").write_text("needle = 1\n")
    (docs / "bin.dat").write_bytes(b"\x00needle")


def test_search_is_sorted_capped_and_has_context(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _corpus(sandbox)
    result = gateway.execute_sync(
        "builtin:fs:search_text", {"path": "docs", "query": "needle", "max_matches": 5, "context_lines": 1}
    )
    data = _ok(result)
    assert result.meta["truncated"] is True and len(data["matches"]) == 5
    assert [(m["path"], m["line"]) for m in data["matches"]] == [("a.txt", n) for n in range(1, 6)]
    assert data["matches"][1]["before"] == ["line 0 needle"] and data["matches"][1]["after"] == ["line 2 needle"]
    full = _ok(gateway.execute_sync("builtin:fs:search_text", {"path": "docs", "query": "needle", "glob": "*.md"}))
    assert [(m["path"], m["line"], m["column"]) for m in full["matches"]] == [("b.md", 2, 1)]
    assert full["files_skipped"] == 0 and full["files_scanned"] == 1


def test_search_file_cap(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    for i in range(12):
        (sandbox.root / "sub" / f"n{i:02d}.txt").write_text("needle\n")
    gateway = gateway_factory(make_policy(sandbox.root, limits={"fs_search_max_files": 2}))
    result = gateway.execute_sync("builtin:fs:search_text", {"path": "sub", "query": "needle"})
    data = _ok(result)
    assert result.meta["truncated"] is True and data["files_scanned"] == 2
    assert [m["path"] for m in data["matches"]] == ["n00.txt", "n01.txt"]


def test_search_options(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    _corpus(sandbox)
    gateway = gateway_factory(make_policy(sandbox.root, limits={"fs_search_max_context_lines": 1}))
    insensitive = _ok(
        gateway.execute_sync(
            "builtin:fs:search_text",
            {"path": "docs/b.md", "query": "needle", "case_sensitive": False, "context_lines": 9},
        )
    )
    assert [m["line"] for m in insensitive["matches"]] == [2, 4]
    assert insensitive["matches"][0]["before"] == ["alpha"]  # context capped at 1 by the policy
    regex = _ok(gateway.execute_sync("builtin:fs:search_text", {"path": "docs", "query": r"^needle\s=", "regex": True}))
    assert [m["path"] for m in regex["matches"]] == ["c.py"]
    binary = _ok(gateway.execute_sync("builtin:fs:search_text", {"path": "docs", "query": "needle"}))
    assert binary["files_skipped"] == 1
    bad = gateway.execute_sync("builtin:fs:search_text", {"path": "docs", "query": "(", "regex": True})
    assert bad.error is not None and bad.error.type == "InvalidInput"
    missing = gateway.execute_sync("builtin:fs:search_text", {"path": "nope", "query": "x"})
    assert missing.error is not None and missing.error.type == "NotFound"


# -- apply_patch ----------------------------------------------------------------------------------
MULTI = """diff --git a/one.txt b/one.txt
--- a/one.txt
+++ b/one.txt
@@ -1,3 +1,3 @@
 first
-second
+SECOND
 third
--- /dev/null
+++ b/new/created.txt
@@ -0,0 +1,2 @@
+brand
+new
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""


def _patch_files(sandbox: Sandbox) -> None:
    (sandbox.root / "one.txt").write_text("first\nsecond\nthird\n")
    (sandbox.root / "gone.txt").write_text("bye\n")
    (sandbox.root / "new").mkdir()


def test_patch_applies_modify_create_delete(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _patch_files(sandbox)
    result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": MULTI})
    data = _ok(result)
    assert data["applied"] is True
    assert [(f["action"], f["added"], f["removed"]) for f in data["files"]] == [
        ("modify", 1, 1),
        ("create", 2, 0),
        ("delete", 0, 1),
    ]
    assert (sandbox.root / "one.txt").read_text() == "first\nSECOND\nthird\n"
    assert (sandbox.root / "new" / "created.txt").read_text() == "brand\nnew\n"
    assert not (sandbox.root / "gone.txt").exists()


def test_patch_is_all_or_nothing(sandbox: Sandbox, gateway: ToolGateway) -> None:
    _patch_files(sandbox)
    (sandbox.root / "gone.txt").write_text("changed meanwhile\n")
    result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": MULTI})
    assert result.error is not None and result.error.type == "InvalidInput"
    assert (sandbox.root / "one.txt").read_text() == "first\nsecond\nthird\n"
    assert not (sandbox.root / "new" / "created.txt").exists()
    bad_hunk = MULTI.replace(" third\n--- /dev/null", " THIRD?\n--- /dev/null")
    (sandbox.root / "gone.txt").write_text("bye\n")
    result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": bad_hunk})
    assert result.error is not None and result.error.details.get("rule") == "fs.patch_apply"
    assert (sandbox.root / "gone.txt").exists() and not (sandbox.root / "new" / "created.txt").exists()


def test_patch_rolls_back_when_a_write_fails_midway(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    """The plan passes, but writing the second file is refused (its directory may not be listed,
    which the write checks when it opens the directory): the first file is put back."""
    data = policy_data(sandbox.root)
    data["filesystem"]["deny"].append({"id": "no-list", "glob": "locked", "ops": ["list"]})
    from services.policy import parse_policy

    gateway = gateway_factory(parse_policy(json.dumps(data)))
    _patch_files(sandbox)
    (sandbox.root / "locked").mkdir()
    (sandbox.root / "locked" / "f.txt").write_text("old\n")
    patch = MULTI.split("--- /dev/null")[0] + "--- a/locked/f.txt\n+++ b/locked/f.txt\n@@ -1 +1 @@\n-old\n+new\n"
    assert gateway.explain("builtin:fs:apply_patch", {"patch": patch}).action == "confirm"
    with (sandbox.root / "one.txt").open("rb") as original:  # held open: its inode cannot be reused
        result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch})
        assert result.error is not None and result.error.details["rule"] == "fs.deny.no-list"
        assert (sandbox.root / "one.txt").read_text() == "first\nsecond\nthird\n"
        # it was written, then put back (a new inode with the old content)
        assert (sandbox.root / "one.txt").stat().st_ino != os.fstat(original.fileno()).st_ino
    assert (sandbox.root / "locked" / "f.txt").read_text() == "old\n"
    assert not [p for p in sandbox.root.rglob("*.tmp")]


def test_patch_dry_run_offsets_crlf_and_eof(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "crlf.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    (sandbox.root / "noeol.txt").write_bytes(b"x\ny")
    (sandbox.root / "shifted.txt").write_text("pre1\npre2\nfirst\nsecond\nthird\n")
    patch = (
        "--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        "--- a/noeol.txt\n+++ b/noeol.txt\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+Y\n"
        "\\ No newline at end of file\n"
        "--- a/shifted.txt\n+++ b/shifted.txt\n@@ -1,3 +1,3 @@\n first\n-second\n+2nd\n third\n"
    )
    dry = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch, "dry_run": True})
    assert _ok(dry)["applied"] is False and dry.meta["decision"]["tier"] == "READ_ONLY"
    assert (sandbox.root / "crlf.txt").read_bytes() == b"a\r\nb\r\nc\r\n"
    assert _ok(gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch}))["applied"] is True
    assert (sandbox.root / "crlf.txt").read_bytes() == b"a\r\nB\r\nc\r\n"
    assert (sandbox.root / "noeol.txt").read_bytes() == b"x\nY"
    assert (sandbox.root / "shifted.txt").read_text() == "pre1\npre2\nfirst\n2nd\nthird\n"


def test_patch_paths_are_policy_checked(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / ".env").write_text("A=1\n")
    for target, rule in (("../outside/secret.txt", "fs.traversal"), (".env", "fs.deny.dotenv")):
        patch = f"--- a/{target}\n+++ b/{target}\n@@ -1 +1 @@\n-A=1\n+A=2\n"
        result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch})
        assert result.error is not None and result.error.details["rule"] == rule
    with_base = "--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-inside\n+INSIDE\n"
    assert gateway.execute_sync("builtin:fs:apply_patch", {"patch": with_base, "base": "sub"}).ok
    assert (sandbox.root / "sub" / "ok.txt").read_text() == "INSIDE\n"
    outside_base = gateway.execute_sync("builtin:fs:apply_patch", {"patch": with_base, "base": ".."})
    assert outside_base.error is not None and outside_base.error.type == "PolicyDenied"


@pytest.mark.parametrize(
    "patch",
    [
        "just text, no diff\n",
        "@@ -1 +1 @@\n-a\n+b\n",
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n",
        "--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
        "--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n",
        "--- a/x\n+++ b/x\n@@ bogus @@\n",
        "--- a/x\n+++ b/x\n",
        "diff --git a/x b/y\nrename from x\nrename to y\n",
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-b\n+c\n",
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\x00\n",
    ],
)
def test_malformed_patches_are_invalid_input(patch: str, gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch})
    assert result.error is not None and result.error.type == "InvalidInput", patch


def test_patch_preview_for_the_approval_modal(sandbox: Sandbox, gateway: ToolGateway) -> None:
    import asyncio

    _patch_files(sandbox)
    preview = asyncio.run(gateway.preview("builtin:fs:apply_patch", {"patch": MULTI}))
    assert preview is not None and preview["applies"] is True and preview["diff"] == MULTI
    assert [f["action"] for f in preview["files"]] == ["modify", "create", "delete"]
    (sandbox.root / "one.txt").write_text("different\n")
    broken = asyncio.run(gateway.preview("builtin:fs:apply_patch", {"patch": MULTI}))
    assert broken is not None and broken["applies"] is False and "does not apply" in broken["note"]


def test_parse_patch_strip_levels() -> None:
    assert parse_patch("--- a/x/y\n+++ b/x/y\n@@ -1 +1 @@\n-a\n+b\n")[0].path == "x/y"
    assert parse_patch("--- x/y\n+++ x/y\n@@ -1 +1 @@\n-a\n+b\n")[0].path == "x/y"
    assert parse_patch("--- x/y\n+++ x/y\n@@ -1 +1 @@\n-a\n+b\n", strip=1)[0].path == "y"


@pytest.mark.parametrize(
    ("patch", "line", "quoted"),
    [
        ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", 5, "+b"),  # the hunk ends early
        ("--- a/x\n+++ b/x\n@@ bogus @@\n", 3, "@@ bogus @@"),
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n*junk\n@@ -3 +3 @@\n!x\n", 7, "@@ -3 +3 @@"),
        ("ok\n@@ -1 +1 @@\n-a\n+b\n", 2, "@@ -1 +1 @@"),
        ("--- a/x\n+++ b/x\n", 2, "+++ b/x"),
        ("diff --git a/x b/y\nrename from x\nrename to y\n", 2, "rename from x"),
    ],
)
def test_malformed_patches_name_the_line(patch: str, line: int, quoted: str, gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch})
    assert result.error is not None and result.error.type == "InvalidInput", result.to_dict()
    assert f"patch line {line}:" in result.error.message and repr(quoted) in result.error.message


def test_git_diffs_with_index_and_mode_lines_apply(sandbox: Sandbox, gateway: ToolGateway) -> None:
    (sandbox.root / "g.txt").write_text("one\ntwo\n")
    patch = (
        "diff --git a/g.txt b/g.txt\nindex 5626abf..f719efd 100644\n--- a/g.txt\n+++ b/g.txt\n"
        "@@ -1,2 +1,2 @@ section header\n one\n-two\n+TWO\n"
        "diff --git a/n.txt b/n.txt\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/n.txt\n"
        "@@ -0,0 +1 @@\n+fresh\n"
    )
    data = _ok(gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch}))
    assert [(f["action"], f["path"].rsplit("/", 1)[-1]) for f in data["files"]] == [
        ("modify", "g.txt"),
        ("create", "n.txt"),
    ]
    assert (sandbox.root / "g.txt").read_text() == "one\nTWO\n" and (sandbox.root / "n.txt").read_text() == "fresh\n"


def test_patch_file_resolves_like_every_fs_path(
    sandbox: Sandbox, gateway: ToolGateway, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative diff file and the relative paths inside it resolve against the workspace's first
    allowed root, not the process's working directory; a diff file outside the roots is refused."""
    (sandbox.root / "one.txt").write_text("first\n")
    (sandbox.root / "fix.diff").write_text("--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-first\n+FIRST\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    (elsewhere / "fix.diff").write_text("--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-first\n+WRONG\n")
    monkeypatch.chdir(elsewhere)
    dry = _ok(gateway.execute_sync("builtin:fs:apply_patch", {"patch_file": "fix.diff", "dry_run": True}))
    assert dry["files"][0]["path"] == str(sandbox.root / "one.txt")
    assert _ok(gateway.execute_sync("builtin:fs:apply_patch", {"patch_file": "fix.diff"}))["applied"] is True
    assert (sandbox.root / "one.txt").read_text() == "FIRST\n"
    outside = gateway.execute_sync("builtin:fs:apply_patch", {"patch_file": str(elsewhere / "fix.diff")})
    assert outside.error is not None and outside.error.type == "PolicyDenied"
    assert outside.error.details["rule"] == "fs.allowed_roots"
    both = gateway.execute_sync("builtin:fs:apply_patch", {"patch_file": "fix.diff", "patch": "x"})
    assert both.error is not None and both.error.type == "InvalidInput"
    preview = asyncio.run(gateway.preview("builtin:fs:apply_patch", {"patch_file": "fix.diff"}))
    assert preview is not None and preview["diff"].startswith("--- a/one.txt") and preview["applies"] is False


def test_patch_file_is_never_covered_by_a_session_grant(sandbox: Sandbox, gateway: ToolGateway) -> None:
    """A grant names the diff file, not the files its (changeable) content touches: patches from a file
    are approved call by call, and "approve for session" is refused for them."""
    from services.tools.calls import ApprovalDecision

    (sandbox.root / "one.txt").write_text("a\n")
    (sandbox.root / "fix.diff").write_text("--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-a\n+b\n")
    session = gateway.execute_sync(
        "builtin:fs:apply_patch", {"patch_file": "fix.diff"}, approver=lambda r: ApprovalDecision.session()
    )
    assert session.error is not None and session.error.details["rule"] == "fs.patch_file_session"
    assert (sandbox.root / "one.txt").read_text() == "a\n"
    gateway.revoke_grants()  # the grant was recorded by the gateway; it covers nothing for patch files
    once = gateway.execute_sync(
        "builtin:fs:apply_patch", {"patch_file": "fix.diff"}, approver=lambda r: ApprovalDecision.once()
    )
    assert once.ok and (sandbox.root / "one.txt").read_text() == "b\n"
