"""Import a bundle: checked while it streams into a staging folder, renamed into place only when whole.

Staging happens in ``<workspaces>/.import-<token>/`` beside the workspaces (the same filesystem, so
the final step is one ``rename``), guarded by ``.import-<token>.lock`` that the importer holds (see
:mod:`services.files.staging`). A refusal or a crash at any point leaves no workspace: the importer removes
its staging folder, and a staging folder whose lock nobody holds (its importer was killed) is removed
by the next start (:func:`services.workspace.manager.clean_stale_imports`), which also puts back a workspace
that ``--force`` had moved aside when the crash came. Every member is checked by the shared reader of
:mod:`services.archive.reader` (the same one context packages use).
"""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.archive.reader import ArchiveReader, open_archive
from services.bundles.manifest import KIND, SIGNATURE_NAME, BundleError, BundleLimits, Manifest
from services.clock import utc_now
from services.errors import AlreadyExists, NotFound
from services.files.staging import StagingArea
from services.hashing import sha256_hex
from services.text.names import validate_name
from services.workspace.manager import STAGING_PREFIX, clean_stale_imports
from services.workspace.paths import QUARANTINE_DIR, WorkspacePaths

if TYPE_CHECKING:
    from services.workspace.manager import WorkspaceManager

Progress = Callable[[int, int, str], None]
_FREE_MARGIN = 64 << 20


@dataclass
class ImportReport:
    name: str
    path: str
    files: int
    bytes: int
    signed: bool
    replaced: bool
    source: dict[str, Any]
    quarantined: list[str] = field(default_factory=list)
    """The authority settings set aside until the operator trusts the workspace (short names)."""
    rebuild: dict[str, str] = field(default_factory=dict)
    """Index → why its keyword and vector stores will be rebuilt from its manifest."""
    unreadable: list[str] = field(default_factory=list)
    """One line per transcript written by a newer Aries: what this one cannot read of it."""


def _verify_signature(manifest: bytes, signature: bytes | None, key_path: Path | None, required: bool) -> bool:
    if signature is None:
        if required:
            raise BundleError("the bundle is not signed, and a signature is required")
        return False
    if key_path is None:
        return False  # signed, but nothing to check it against: reported as unchecked
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(Path(key_path).expanduser().read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise BundleError(f"cannot read the verification key {key_path}: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise BundleError(f"{key_path} is not an ed25519 public key")
    try:
        key.verify(signature, manifest)
    except InvalidSignature:
        raise BundleError("the bundle's signature does not match its manifest (bad signature)") from None
    return True


def peek_manifest(bundle: Path, limits: BundleLimits | None = None) -> Manifest:
    """The manifest of ``bundle`` (its first member), read without unpacking anything."""
    limits = limits or BundleLimits()
    bundle = Path(bundle).expanduser()
    if not bundle.is_file():
        raise NotFound(f"{bundle}: no such bundle")
    with open_archive(bundle, KIND, limits) as reader:
        return Manifest.from_bytes(reader.manifest_bytes(), limits)


def import_bundle(
    bundle: Path,
    manager: WorkspaceManager,
    *,
    name: str | None = None,
    force: bool = False,
    verify_key: Path | None = None,
    require_signature: bool = False,
    limits: BundleLimits | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import ``bundle`` as workspace ``name`` (else the name it was exported under)."""
    limits = limits or BundleLimits()
    bundle = Path(bundle).expanduser()
    if not bundle.is_file():
        raise NotFound(f"{bundle}: no such bundle")
    if name is not None:
        validate_name(name)
    root = manager.root
    root.mkdir(parents=True, exist_ok=True)
    clean_stale_imports(root)
    options = _Options(name, force, verify_key, require_signature, progress, bundle)
    with StagingArea(root, STAGING_PREFIX) as staging, open_archive(bundle, KIND, limits) as reader:
        return _unpack(reader, staging, manager, options)


@dataclass(frozen=True)
class _Options:
    name: str | None
    force: bool
    verify_key: Path | None
    require_signature: bool
    progress: Progress | None
    bundle: Path


def _unpack(reader: ArchiveReader, staging: StagingArea, manager: WorkspaceManager, options: _Options) -> ImportReport:
    raw = reader.manifest_bytes()
    manifest = Manifest.from_bytes(raw, reader.limits)
    target = options.name or manifest.workspace.get("name")
    if not isinstance(target, str):
        raise BundleError("the manifest names no workspace; pass --name")
    target = validate_name(target)
    destination = manager.path_for(target)
    if destination.exists() and not options.force:
        raise AlreadyExists(f"workspace {target} exists; import under another --name, or --force to replace it")
    free = shutil.disk_usage(manager.root).free
    if manifest.total_bytes + _FREE_MARGIN > free:
        raise BundleError(f"the bundle needs {manifest.total_bytes} bytes; {free} are free on {manager.root}")
    signature: list[bytes] = []

    def take_signature(member: tarfile.TarInfo, position: int) -> bool:
        if member.name == SIGNATURE_NAME and position == 2 and member.isfile():
            signature.append(reader.read_small(member, 4096))
            return True
        return False

    _refuse_reserved(manifest)
    tree = staging.create()
    reader.extract(manifest.files, tree, progress=options.progress, special=take_signature)
    signed = _verify_signature(raw, signature[0] if signature else None, options.verify_key, options.require_signature)
    # Data from outside: its stores are checked before anything opens them, and every authority
    # setting is set aside (services.trust) before the workspace appears (an unreadable
    # workspace.yaml is set aside whole: the workspace then opens with a new one).
    from services.trust.authority import quarantine
    from services.trust.records import record_import
    from services.trust.stores import check_imported_stores

    rebuild = check_imported_stores(tree)
    from services.workspace.transcripts import newer_notices

    unreadable = newer_notices(WorkspacePaths(tree).transcripts)
    quarantined = quarantine(tree)
    _rename_workspace(tree, target)
    origin = {
        "kind": "bundle",
        "file": str(options.bundle),
        "manifest_sha256": sha256_hex(raw),
        "exported_from": str(manifest.workspace.get("name", "?")),
        "at": utc_now(),
    }
    record_import(destination, tree, origin, quarantined)
    replaced = _move_into_place(staging, destination, target)
    return ImportReport(
        target,
        destination.as_posix(),
        len(manifest.files),
        manifest.total_bytes,
        signed,
        replaced,
        manifest.workspace,
        quarantined.summary(),
        rebuild,
        unreadable,
    )


def _refuse_reserved(manifest: Manifest) -> None:
    """A bundle never carries the names Aries keeps for itself (an export leaves them out)."""
    for entry in manifest.files:
        if entry.path == QUARANTINE_DIR or entry.path.startswith(QUARANTINE_DIR + "/"):
            raise BundleError(f"{entry.path}: {QUARANTINE_DIR}/ is reserved for Aries; the bundle is refused")


def _rename_workspace(staging: Path, name: str) -> None:
    """The imported ``workspace.yaml`` names the workspace it now is (comments kept)."""
    from services.files.atomic import atomic_write_text
    from services.files.yamlio import dump_yaml, load_yaml

    meta_file = WorkspacePaths(staging).settings
    if not meta_file.is_file():
        return
    data = load_yaml(meta_file)
    if isinstance(data, dict) and data.get("name") != name:
        data["name"] = name
        atomic_write_text(meta_file, dump_yaml(data))


def _move_into_place(staging: StagingArea, destination: Path, name: str) -> bool:
    """One rename makes the workspace appear; an existing one (``--force``) is swapped out first."""
    if not destination.exists():
        return staging.install(destination)
    from services.workspace.leases import acquire_lease
    from services.workspace.manager import Workspace

    lease = acquire_lease(Workspace(destination, name), purpose="import --force")  # never under a live Aries
    try:
        return staging.install(destination)
    finally:
        lease.release()


def rebuild_indexes(
    manager: WorkspaceManager, report: ImportReport, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, str]:
    """Rebuild the keyword and vector stores of each imported index from its manifest (an import never
    keeps them: :mod:`services.trust.stores`); returns index → the one-line reason it failed."""
    from services.errors import AriesError
    from services.retrieval import RetrievalEngine

    failed: dict[str, str] = {}
    if not report.rebuild:
        return failed
    workspace, _ = manager.open(report.name)
    engine = RetrievalEngine(workspace)
    try:
        for index in sorted(report.rebuild):

            def step(event: Any, index: str = index) -> None:
                if progress is not None and getattr(event, "total", None):
                    progress(index, int(event.done), int(event.total))

            try:
                engine.index_repair(index, progress=step)
            except AriesError as exc:
                failed[index] = exc.message
    finally:
        engine.close()
    return failed
