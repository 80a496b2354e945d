"""What ``context add`` puts into a staging folder: a local file or folder, or a fetched URL.

Only the file types the retrieval loaders read are taken (``services.retrieval.loaders.CONTENT_TYPES``:
Markdown, text, HTML, XHTML, PDF, EPUB); everything else in a folder is listed as skipped with the
reason — other types, names beginning with ``.`` (reserved inside the tree), names that are not valid
``axiom://`` names, symlinks (never followed), special files.  A single file of another type is a
:class:`UnsupportedSource` error.

Copies are plain byte copies (``shutil.copyfile``; no metadata, no links) into the staging path; the
service then moves the whole staged resource into place with one rename.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from services.context.errors import ContextError, InvalidUri
from services.context.uri import AxiomUri

Progress = Callable[[str, int, int], None]


class IngestError(ContextError):
    """A source ``context add`` cannot take."""

    code = "ingest_error"
    exit_code = 2


class SourceNotFound(IngestError):
    code = "source_not_found"


class UnsupportedSource(IngestError):
    code = "unsupported_source"


class NothingToAdd(IngestError):
    code = "nothing_to_add"


class UrlRefused(IngestError):
    """The policy (or the approval step) refused to fetch the URL."""

    code = "url_refused"
    exit_code = 3


class UrlFetchFailed(IngestError):
    code = "url_fetch_failed"
    exit_code = 1


@dataclass
class Collected:
    """What was staged: files (relative POSIX paths), bytes, and what was skipped (path, reason)."""

    kind: str  # "file" | "folder"
    files: list[str] = field(default_factory=list)
    bytes: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class AddReport:
    source: str
    uri: str
    kind: str
    files: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    bytes: int = 0
    replaced: bool = False
    jobs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "uri": self.uri,
            "kind": self.kind,
            "files": list(self.files),
            "skipped": [{"path": path, "reason": reason} for path, reason in self.skipped],
            "bytes": self.bytes,
            "replaced": self.replaced,
            "jobs": list(self.jobs),
        }


def _supported(name: str) -> bool:
    from services.retrieval.loaders import content_type_for

    return content_type_for(name) is not None


def _supported_list() -> str:
    from services.retrieval.loaders import CONTENT_TYPES

    return ", ".join(sorted(CONTENT_TYPES))


def _valid_name(name: str) -> str | None:
    """Why ``name`` cannot be a name in the tree (None when it can)."""
    if name.startswith("."):
        return "names beginning with '.' are reserved inside the context tree"
    try:
        AxiomUri("resources", (name,))
    except InvalidUri as exc:
        return f"not a valid axiom:// name ({exc.message})"
    return None


def default_name(source: Path) -> str:
    name = source.name
    reason = _valid_name(name)
    if reason is not None:
        raise IngestError(f"{name!r}: {reason}; give the destination with --to")
    return name


def collect_local(source: Path, payload: Path, progress: Progress | None = None) -> Collected:
    """Copy ``source`` (a file or folder) into ``payload`` (which must not exist yet)."""
    try:
        info = os.lstat(source)
    except FileNotFoundError:
        raise SourceNotFound(f"{source}: no such file or folder") from None
    if stat.S_ISLNK(info.st_mode):
        source = source.resolve()
        try:
            info = os.stat(source)
        except FileNotFoundError:
            raise SourceNotFound(f"{source}: a link to nothing") from None
    if stat.S_ISREG(info.st_mode):
        if not _supported(source.name):
            raise UnsupportedSource(f"{source.name}: unsupported file type (supported: {_supported_list()})")
        shutil.copyfile(source, payload, follow_symlinks=False)
        if progress:
            progress("copy", 1, 1)
        return Collected("file", [source.name], info.st_size)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsupportedSource(f"{source}: not a regular file or folder")
    found = Collected("folder")
    plan: list[tuple[str, Path]] = []
    for where, dirnames, filenames in os.walk(source, followlinks=False):
        base = Path(where)
        kept = []
        for name in sorted(dirnames):
            rel = (base / name).relative_to(source).as_posix()
            why = "links are not followed" if (base / name).is_symlink() else _valid_name(name)
            if why is None:
                kept.append(name)
            else:
                found.skipped.append((rel + "/", why))
        dirnames[:] = kept
        for name in sorted(filenames):
            path = base / name
            rel = path.relative_to(source).as_posix()
            mode = os.lstat(path).st_mode
            why = _valid_name(name)
            if why is None and stat.S_ISLNK(mode):
                why = "links are not followed"
            elif why is None and not stat.S_ISREG(mode):
                why = "not a regular file"
            elif why is None and not _supported(name):
                why = "unsupported file type"
            if why is not None:
                found.skipped.append((rel, why))
            else:
                plan.append((rel, path))
    if not plan:
        raise NothingToAdd(f"{source}: no file of a supported type ({_supported_list()})")
    payload.mkdir()
    for number, (rel, path) in enumerate(sorted(plan), 1):
        target = payload / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target, follow_symlinks=False)
        found.files.append(rel)
        found.bytes += target.stat().st_size
        if progress:
            progress("copy", number, len(plan))
    found.skipped.sort()
    return found


_EXTENSIONS = {
    "text/html": ".html",
    "application/xhtml+xml": ".xhtml",
    "text/markdown": ".md",
    "text/plain": ".txt",
    "application/pdf": ".pdf",
    "application/epub+zip": ".epub",
}


def url_name(url: str, content_type: str) -> str:
    """A tree name for a fetched URL: its last path segment (or host), with the extension of its type."""
    parts = urlsplit(url)
    last = unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]) if parts.path.strip("/") else ""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", last or (parts.hostname or "page")).lstrip("._-")[:100] or "page"
    mime = content_type.split(";", 1)[0].strip().lower()
    extension = _EXTENSIONS.get(mime)
    if extension is None:
        if _supported(stem):
            return stem
        raise UnsupportedSource(f"{url}: content type {mime or 'unknown'!r} has no loader")
    if _supported(stem) and _EXTENSIONS.get(_type_of(stem) or "") == extension:
        return stem
    return stem + extension


def _type_of(name: str) -> str | None:
    from services.retrieval.loaders import content_type_for

    return content_type_for(name)


def fetch_url(session: Any, workspace: Any, url: str) -> tuple[bytes, str, str]:
    """Fetch ``url`` through ``session``'s ``builtin:web:fetch`` (policy, approval, audit): the body,
    the final URL and the content type.  A refusal is :class:`UrlRefused`; any other failure, an HTTP
    error status or a body cut at the fetch limit (it would be incomplete) is :class:`UrlFetchFailed`."""
    result = session.call_tool_sync("builtin:web:fetch", {"url": url})
    if not result.ok:
        message = result.error.message if result.error is not None else "the fetch failed"
        rule = result.error.details.get("rule") if result.error is not None else None
        if rule == "approval.no_approver":
            raise UrlRefused(f"{url}: refused: the fetch needs approval (aries context add --approve): {message}")
        if result.denied:
            raise UrlRefused(f"{url}: refused: {message}")
        raise UrlFetchFailed(f"{url}: {message}")
    from services.tools.outputs import WebFetchOutput, parse_output

    fetched = parse_output(WebFetchOutput, result.data)
    if fetched is None:
        raise UrlFetchFailed(f"{url}: the fetch returned no page this version can read")
    if fetched.truncated:
        raise UrlFetchFailed(f"{url}: the body is over the fetch limit; not added (it would be incomplete)")
    if fetched.status >= 400:
        raise UrlFetchFailed(f"{url}: the server answered HTTP {fetched.status}")
    registry = workspace.artifacts
    body: bytes = registry.read_bytes(registry.get(fetched.artifact_id))
    return body, fetched.final_url or url, fetched.content_type


def is_url(source: str) -> bool:
    return source.lower().startswith(("http://", "https://"))


__all__ = [
    "AddReport",
    "Collected",
    "IngestError",
    "NothingToAdd",
    "SourceNotFound",
    "UnsupportedSource",
    "UrlFetchFailed",
    "UrlRefused",
    "collect_local",
    "default_name",
    "fetch_url",
    "is_url",
    "url_name",
]
