"""What a tool call keeps in the artifact registry, and the links to it.

Every output the spec names is stored as an artifact (content-addressed, so identical content is
kept once): a fetched body (role ``body``), a search's results (``results``), text extracted from
a page (``text``, linked to its ``source``), and for every file a write or patch changes, its
content before the call (``snapshot``), after it (``after``) and the diff between them
(``diff``).  A tool returns the links in ``meta["artifacts"]``; the gateway copies them to the
audit row (``tool_results.artifacts_json``) and to the transcript event, so the Artifacts pane,
``/policy explain-last`` and ``/undo`` find them from the call.

A link is ``{"role", "id", "name", "hash", "size_bytes"}``; the links of a changed file also
carry ``path`` (the file, absolute), ``existed`` (False when the call created it) and
``after_sha256`` (the SHA-256 of what the call left there, None when it deleted the file):
what ``builtin:fs:restore`` checks before it puts the snapshot back.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.errors import InvalidInput
from services.hashing import sha256_hex

if TYPE_CHECKING:
    from services.policy import ResolvedPath
    from services.tools.registry import ToolContext
    from services.workspace.artifacts import Artifact

__all__ = ["before_write", "link", "store", "store_change", "unified_diff"]


def link(artifact: Artifact, role: str, **extra: Any) -> dict[str, Any]:
    """The reference to ``artifact`` a tool result, audit row and transcript event carry."""
    return {
        "role": role,
        "id": artifact.id,
        "name": artifact.name,
        "hash": artifact.hash,
        "size_bytes": artifact.size_bytes,
        **extra,
    }


def store(
    ctx: ToolContext,
    data: bytes,
    name: str,
    role: str,
    *,
    description: str,
    provenance: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Store ``data`` for this call and return its link."""
    if ctx.workspace is None:
        raise InvalidInput(f"{ctx.tool_id} keeps its output as an artifact, and this call has no workspace")
    artifact, _ = ctx.workspace.artifacts.add_bytes(
        data,
        name,
        description=description,
        provenance={"kind": "tool", "tool": ctx.tool_id, "call_id": ctx.call_id, "role": role, **(provenance or {})},
    )
    return link(artifact, role, **extra)


def unified_diff(old: bytes | None, new: bytes | None, rel: str) -> str:
    """The unified diff from ``old`` to ``new`` (None: the file does not exist); undecodable bytes
    are shown as U+FFFD, and a missing final newline is marked as diff(1) does."""
    before = (old or b"").decode("utf-8", errors="replace")
    after = (new or b"").decode("utf-8", errors="replace")
    diff = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        "/dev/null" if old is None else f"a/{rel}",
        "/dev/null" if new is None else f"b/{rel}",
        n=3,
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)


def store_change(
    ctx: ToolContext, path: Path, rel: str, before: bytes | None, after: bytes | None
) -> list[dict[str, Any]]:
    """Keep the snapshot of ``path`` before the call, its content after it and the diff; return
    their links (``before``/``after`` None: the file did not exist before / does not after)."""
    name = Path(rel).name or "file"
    change: dict[str, Any] = {
        "path": str(path),
        "existed": before is not None,
        "after_sha256": None if after is None else sha256_hex(after),
    }
    what = f"{rel} before {ctx.tool_id} call {ctx.call_id}"
    links = [store(ctx, before or b"", f"{name}.before", "snapshot", description=what, **change)]
    if after is not None:
        links.append(
            store(ctx, after, f"{name}.after", "after", description=f"{rel} as {ctx.tool_id} left it", path=str(path))
        )
    diff = unified_diff(before, after, rel).encode("utf-8")
    links.append(
        store(ctx, diff, f"{name}.diff", "diff", description=f"diff of {rel} by call {ctx.call_id}", path=str(path))
    )
    return links


def before_write(ctx: ToolContext, target: ResolvedPath) -> tuple[bytes | None, str | None]:
    """The content of ``target`` before a write (None: no file), or why no snapshot is kept."""
    from services.tools.fsio import read_checked

    if target.kind != "file":
        return None, None
    data = read_checked(ctx, target, ctx.limits.fs_write_max_bytes + 1)
    if len(data) > ctx.limits.fs_write_max_bytes:
        return None, f"not kept: the old content exceeds the {ctx.limits.fs_write_max_bytes}-byte write limit"
    return data, None
