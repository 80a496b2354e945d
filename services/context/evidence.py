"""``aries context evidence``: operability, reliability and security reports, checked live.

Each report is Markdown: a timestamp line (the only line that changes between two runs on the same
workspace), then one table row per check — what was checked, the figure, pass/fail — and the
totals.  The checks run against the workspace's own tree, queue and index:

* operability: scope folders present, files and folders per scope, tier coverage (every folder of
  ``resources``/``user``/``agent`` has its L0 and L1), queue drained, no staging left in ``temp``;
* reliability: a reconcile pass (what it had to repair), the index brought in line with the tree
  and a second pass that changes nothing (idempotence), tier regeneration a no-op;
* security: the hostile-URI suite (each refused with its typed error), the scope write rules
  (user writes to ``session``/``temp``/``queue``/scope folders/dot-names refused, tried live on the
  tree), and a package carrying a ``..`` member refused with nothing written.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.clock import utc_now
from services.context.errors import ContextError, InvalidUri
from services.context.uri import SCOPES, AxiomUri, parse_uri
from services.files.atomic import atomic_write_text
from services.hashing import sha256_hex

if TYPE_CHECKING:
    from services.context.service import ContextService

HOSTILE_URIS: tuple[str, ...] = (
    "axiom://resources/../user/x",
    "axiom://resources/a/../../b",
    "axiom://resources/%2e%2e/x",
    "axiom://resources/%2E%2E/x",
    "axiom://resources/%252e%252e/x",
    "axiom://resources/a%2fb",
    "axiom://resources/a%5cb",
    "axiom://resources/a\\b",
    "axiom://resources/..\\x",
    "axiom://resources/a\u2215b",
    "axiom://resources/\uff0e\uff0e/x",
    "axiom://resources/\u2024\u2024/x",
    "axiom://resources//a",
    "axiom://resources/./a",
    "axiom://resources/a/./b",
    "axiom://resources/a\x00b",
    "axiom://resources/a\x1bb",
    "axiom://resources/a\u202eb",
    "axiom://resources/a\x7fb",
    "axiom://nowhere/a",
    "axiom://resources/%00",
    "axiom://",
    "axiom:resources/a",
    "file:///etc/passwd",
    "http://resources/a",
    "axiom://resources/a?x=1",
    "axiom://resources/a#frag",
    "axiom://user@resources/a",
    "axiom://resources:80/a",
    "axiom://resources/" + "a" * 5000,
    "axiom://resources/" + "/".join(["d"] * 300),
    "/etc/passwd",
    "../resources/a",
)

Row = tuple[str, str, bool]


@dataclass
class _Report:
    title: str
    rows: list[Row]

    def render(self, stamp: str) -> str:
        passed = sum(1 for _c, _f, ok in self.rows if ok)
        lines = [
            f"# Context {self.title} evidence",
            "",
            f"Generated: {stamp}",
            "",
            "| check | figure | result |",
            "| --- | --- | --- |",
        ]
        for check, figure, ok in self.rows:
            lines.append(f"| {check} | {figure.replace('|', '/')} | {'pass' if ok else 'FAIL'} |")
        lines += ["", f"Totals: {passed} passed, {len(self.rows) - passed} failed, {len(self.rows)} checks.", ""]
        return "\n".join(lines)


def _folders(service: ContextService, uri: AxiomUri) -> list[AxiomUri]:
    out = [uri]
    for entry in service.tree.ls(uri):
        if entry.kind == "dir":
            out.extend(_folders(service, entry.uri))
    return out


def _operability(service: ContextService) -> list[Row]:
    from services.context.tiers import ABSTRACT, OVERVIEW

    tree = service.tree
    rows: list[Row] = []
    missing = [s for s in SCOPES if not tree.path_of(AxiomUri(s)).is_dir()]
    rows.append(("scope folders present", f"{len(SCOPES) - len(missing)}/{len(SCOPES)}", not missing))
    for scope in ("resources", "user", "agent", "session"):
        folders = _folders(service, AxiomUri(scope))
        files = sum(1 for f in folders for e in tree.ls(f) if e.kind == "file")
        rows.append((f"axiom://{scope} size", f"{files} files, {len(folders)} folders", True))
    for scope in ("resources", "user", "agent"):
        folders = _folders(service, AxiomUri(scope))
        covered = [f for f in folders if tree.exists(f.join(ABSTRACT)) and tree.exists(f.join(OVERVIEW))]
        rows.append((f"tier coverage axiom://{scope}", f"{len(covered)}/{len(folders)} folders", covered == folders))
    jobs = service.queue.jobs()
    rows.append(("queue drained", f"{len(jobs)} jobs left", not jobs))
    staging = [e.name for e in tree.ls(AxiomUri("temp")) if e.name.startswith(("staging-", "trash-"))]
    rows.append(("no staging left in axiom://temp", f"{len(staging)} staging folders", not staging))
    return rows


def _changes(result: Any) -> int:
    """How many files an indexer result says it added, updated or removed (0 if it does not say)."""
    if hasattr(result, "to_dict"):
        result = result.to_dict()
    if isinstance(result, dict):
        total = 0
        for key, value in result.items():
            if key in ("ingested", "added", "updated", "removed") and isinstance(value, list | int):
                total += value if isinstance(value, int) else len(value)
            elif isinstance(value, dict):
                total += _changes(value)
        return total
    return 0


def _reliability(service: ContextService) -> list[Row]:
    from services.context.tiers import synthesize_tiers

    rows: list[Row] = []
    report = service.reconcile()
    repaired = len(report.staging_removed) + len(report.package_staging_removed) + len(report.commits_recovered)
    rows.append(("reconcile pass", f"{repaired} repairs, {report.jobs_processed} jobs run", report.consistent))
    rows.append(("queue drained after reconcile", f"{report.queue_remaining} jobs left", report.queue_remaining == 0))
    second = service.indexer(service.tree)
    changes = _changes(second)
    rows.append(("index agrees with the tree (a second pass changes nothing)", f"{changes} changes", changes == 0))
    mode, embedder = service._tier_mode()
    again = [
        u
        for s in ("resources", "user", "agent")
        for u in synthesize_tiers(service.tree, AxiomUri(s), mode=mode, embedder=embedder)
    ]
    rows.append(("tier regeneration is a no-op", f"{len(again)} folders rewritten", not again))
    return rows


def _refused(action: Callable[[], object], error: type[Exception]) -> tuple[bool, str]:
    try:
        action()
    except error as exc:
        return True, str(getattr(exc, "code", type(exc).__name__))
    except Exception as exc:
        return False, f"{type(exc).__name__}"
    return False, "accepted"


def _security(service: ContextService) -> list[Row]:
    from services.context.errors import ScopeReadOnly

    tree = service.tree
    rows: list[Row] = []
    codes: dict[str, int] = {}
    accepted: list[str] = []
    for text in HOSTILE_URIS:
        ok, code = _refused(lambda text=text: parse_uri(text), InvalidUri)  # type: ignore[misc]
        codes[code] = codes.get(code, 0) + 1
        if not ok:
            accepted.append(repr(text)[:40])
    figure = (
        f"{len(HOSTILE_URIS) - len(accepted)}/{len(HOSTILE_URIS)} refused ("
        + ", ".join(f"{c}: {n}" for c, n in sorted(codes.items()))
        + ")"
    )
    rows.append(("hostile-URI suite", figure, not accepted))
    attempts = {
        "user write to axiom://queue": AxiomUri("queue", ("evidence.json",)),
        "user write to axiom://session": AxiomUri("session", ("evidence.txt",)),
        "user write to axiom://temp": AxiomUri("temp", ("evidence.txt",)),
        "user write of a tier name": AxiomUri("resources", (".abstract.md",)),
    }
    for label, uri in attempts.items():
        before = tree.read_bytes(uri) if tree.exists(uri) else None
        ok, code = _refused(lambda uri=uri: tree.write_text(uri, "x", actor="user"), ScopeReadOnly)  # type: ignore[misc]
        after = tree.read_bytes(uri) if tree.exists(uri) else None
        rows.append((label, f"refused ({code})" if ok else code, ok and before == after))
    ok, code = _refused(lambda: tree.remove(AxiomUri("resources"), actor="user", recursive=True), ScopeReadOnly)
    rows.append(("user removal of a scope folder", f"refused ({code})" if ok else code, ok))
    rows.append(_package_check())
    return rows


def _package_check() -> Row:
    import zstandard

    from services.context.packages import import_tree

    body = b"# x\n"
    manifest = {
        "format": "aries-context-package",
        "format_version": 1,
        "root": "axiom://resources/evidence",
        "folders": [],
        "files": [
            {
                "path": "../escape.md",
                "size": len(body),
                "sha256": sha256_hex(body),
                "mime": "text/markdown",
            }
        ],
    }
    with tempfile.TemporaryDirectory(prefix="aries-evidence-") as scratch:
        base = Path(scratch)
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in (("aries-context-package.json", json.dumps(manifest).encode()), ("../escape.md", body)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        package = base / "hostile.axpkg"
        package.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
        dest = base / "in" / "dest"
        ok, code = _refused(lambda: import_tree(package, dest), ContextError)
        written = dest.exists() or (base / "in" / "escape.md").exists() or (base / "escape.md").exists()
    return (
        "package with a '..' member refused",
        f"refused ({code}), nothing written" if ok and not written else code,
        ok and not written,
    )


def write_evidence(service: ContextService, out_dir: Path) -> list[Path]:
    """Run the checks and write the three reports into ``out_dir``; return their paths. Logged as
    one ``evidence`` request of the service."""
    from services.context.requests import counts_of

    with service.requests.request("evidence", out_dir) as req:
        paths = _write(service, out_dir)
        req.counts = counts_of(paths)
    return paths


def _write(service: ContextService, out_dir: Path) -> list[Path]:
    stamp = utc_now()
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    reports = {
        "operability.md": _Report("operability", []),
        "reliability.md": _Report("reliability", []),
        "security.md": _Report("security", []),
    }
    reports["reliability.md"].rows = _reliability(service)  # first: it drains the queue
    reports["operability.md"].rows = _operability(service)
    reports["security.md"].rows = _security(service)
    paths = []
    for name, report in reports.items():
        path = out / name
        atomic_write_text(path, report.render(stamp))
        paths.append(path)
    return paths


__all__ = ["HOSTILE_URIS", "write_evidence"]
