"""Import a bundle: checked while it streams into a staging folder, renamed into place only when whole.

Staging happens in ``<workspaces>/.import-<token>/`` beside the workspaces (the same filesystem, so
the final step is one ``rename``), guarded by ``.import-<token>.lock`` that the importer holds. A
refusal or a crash at any point leaves no workspace: the importer removes its staging folder, and a
staging folder whose lock nobody holds (its importer was killed) is removed by the next start
(:func:`clean_stale_imports`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from services.atomic import fsync_dir
from services.bundles.manifest import (
    CHUNK,
    MANIFEST_NAME,
    SIGNATURE_NAME,
    BundleError,
    BundleLimits,
    FileEntry,
    Manifest,
    check_member_path,
)
from services.errors import AlreadyExists, NotFound
from services.names import validate_name
from services.workspaces import STAGING_PREFIX, clean_stale_imports

if TYPE_CHECKING:
    from services.workspaces import WorkspaceManager

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


class _CountingReader:
    """The compressed file, counting the bytes read (for the ratio cap)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        block = self.handle.read(size)
        self.count += len(block)
        return block


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


def _read_small(tar: tarfile.TarFile, member: tarfile.TarInfo, limit: int) -> bytes:
    if member.size > limit:
        raise BundleError(f"member {member.name}: {member.size} bytes is over its {limit}-byte cap")
    handle = tar.extractfile(member)
    if handle is None:
        raise BundleError(f"member {member.name} is not a regular file")
    data = handle.read(limit + 1)
    if len(data) != member.size:
        raise BundleError("the bundle is truncated")
    return data


def _kind(member: tarfile.TarInfo) -> str | None:
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.isdir():
        return "a directory"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    if not member.isfile():
        return "not a regular file"
    return None


def peek_manifest(bundle: Path, limits: BundleLimits | None = None) -> Manifest:
    """The manifest of ``bundle`` (its first member), read without unpacking anything."""
    import zstandard

    limits = limits or BundleLimits()
    bundle = Path(bundle).expanduser()
    if not bundle.is_file():
        raise NotFound(f"{bundle}: no such bundle")
    try:
        with bundle.open("rb") as handle:
            decompressor = zstandard.ZstdDecompressor(max_window_size=limits.max_window_bytes)
            with decompressor.stream_reader(handle, read_size=CHUNK, closefd=False) as stream:
                tar = tarfile.open(fileobj=stream, mode="r|", encoding="utf-8")
                first = next(iter(tar), None)
                if first is None or first.name != MANIFEST_NAME or not first.isfile():
                    raise BundleError("not an Aries bundle: its first member is not aries-bundle.json")
                return Manifest.from_bytes(_read_small(tar, first, limits.max_manifest_bytes), limits)
    except (zstandard.ZstdError, tarfile.TarError, EOFError) as exc:
        raise BundleError(f"the bundle is truncated or corrupt ({exc})") from None


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
    import zstandard

    limits = limits or BundleLimits()
    bundle = Path(bundle).expanduser()
    if not bundle.is_file():
        raise NotFound(f"{bundle}: no such bundle")
    if name is not None:
        validate_name(name)
    root = manager.root
    root.mkdir(parents=True, exist_ok=True)
    clean_stale_imports(root)
    token = secrets.token_hex(6)
    staging = root / f"{STAGING_PREFIX}{token}"
    from filelock import FileLock

    lock = FileLock(str(root / f"{staging.name}.lock"), timeout=0)
    lock.acquire()
    try:
        with bundle.open("rb") as raw_handle:
            counted = _CountingReader(raw_handle)
            decompressor = zstandard.ZstdDecompressor(max_window_size=limits.max_window_bytes)
            try:
                with decompressor.stream_reader(cast("IO[bytes]", counted), read_size=CHUNK, closefd=False) as stream:
                    report = _unpack(
                        stream,
                        counted,
                        staging,
                        manager,
                        _Options(name, force, verify_key, require_signature, limits, progress),
                    )
            except (zstandard.ZstdError, tarfile.TarError, EOFError) as exc:
                raise BundleError(f"the bundle is truncated or corrupt ({exc})") from None
        return report
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        lock.release()
        with contextlib.suppress(FileNotFoundError):
            (root / f"{staging.name}.lock").unlink()


@dataclass(frozen=True)
class _Options:
    name: str | None
    force: bool
    verify_key: Path | None
    require_signature: bool
    limits: BundleLimits
    progress: Progress | None


def _unpack(
    stream: Any, counted: _CountingReader, staging: Path, manager: WorkspaceManager, options: _Options
) -> ImportReport:
    name, force, limits, progress = options.name, options.force, options.limits, options.progress
    tar = tarfile.open(fileobj=stream, mode="r|", encoding="utf-8")
    members = iter(tar)
    first = next(members, None)
    if first is None or first.name != MANIFEST_NAME or not first.isfile():
        raise BundleError("not an Aries bundle: its first member is not aries-bundle.json")
    raw = _read_small(tar, first, limits.max_manifest_bytes)
    manifest = Manifest.from_bytes(raw, limits)
    target = name or manifest.workspace.get("name")
    if not isinstance(target, str):
        raise BundleError("the manifest names no workspace; pass --name")
    target = validate_name(target)
    destination = manager.path_for(target)
    if destination.exists() and not force:
        raise AlreadyExists(f"workspace {target} exists; import under another --name, or --force to replace it")
    free = shutil.disk_usage(manager.root).free
    if manifest.total_bytes + _FREE_MARGIN > free:
        raise BundleError(f"the bundle needs {manifest.total_bytes} bytes; {free} are free on {manager.root}")
    expected = {entry.path: entry for entry in manifest.files}
    signature: bytes | None = None
    done, seen = 0, set()
    staging.mkdir()
    for count, member in enumerate(members, start=2):
        if count > limits.max_members + 2:
            raise BundleError(f"the bundle has more than {limits.max_members} members")
        if member.name == SIGNATURE_NAME and count == 2 and member.isfile():
            signature = _read_small(tar, member, 4096)
            continue
        path = member.name
        kind = _kind(member)
        if kind is not None:
            raise BundleError(f"member {path}: {kind}; a bundle holds regular files only")
        check_member_path(path)
        if path in seen:
            raise BundleError(f"member {path} appears twice")
        entry = expected.get(path)
        if entry is None:
            raise BundleError(f"member {path} is not in the manifest")
        if member.size != entry.size:
            raise BundleError(f"member {path}: {member.size} bytes, the manifest says {entry.size}")
        seen.add(path)
        if progress is not None:
            progress(done, manifest.total_bytes, path)
        _write_member(tar, member, entry, staging, counted, done, limits)
        done += entry.size
    missing = sorted(set(expected) - seen)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise BundleError(f"the manifest lists {missing[0]}{more}, missing from the bundle")
    signed = _verify_signature(raw, signature, options.verify_key, options.require_signature)
    _rename_workspace(staging, target)
    fsync_dir(staging)
    replaced = _move_into_place(staging, destination, manager, target)
    if progress is not None:
        progress(manifest.total_bytes, manifest.total_bytes, "")
    return ImportReport(
        target, destination.as_posix(), len(manifest.files), manifest.total_bytes, signed, replaced, manifest.workspace
    )


def _write_member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    entry: FileEntry,
    staging: Path,
    counted: _CountingReader,
    done: int,
    limits: BundleLimits,
) -> None:
    source = tar.extractfile(member)
    if source is None:
        raise BundleError(f"member {entry.path} is not a regular file")
    target = staging / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    with target.open("xb") as out:
        while block := source.read(CHUNK):
            written += len(block)
            if written > entry.size:
                raise BundleError(f"member {entry.path} is longer than the manifest says")
            total = done + written
            if total > limits.ratio_floor and total > limits.max_ratio * max(counted.count, 1):
                raise BundleError(
                    f"the bundle expands more than {limits.max_ratio}:1 (a decompression bomb?); stopped at "
                    f"{total} bytes"
                )
            digest.update(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    if written != entry.size:
        raise BundleError("the bundle is truncated")
    if digest.hexdigest() != entry.sha256:
        raise BundleError(f"member {entry.path}: its SHA-256 does not match the manifest")


def _rename_workspace(staging: Path, name: str) -> None:
    """The imported ``workspace.yaml`` names the workspace it now is (comments kept)."""
    from services.atomic import atomic_write_text
    from services.yamlio import dump_yaml, load_yaml

    meta_file = staging / "workspace.yaml"
    if not meta_file.is_file():
        return
    data = load_yaml(meta_file)
    if isinstance(data, dict) and data.get("name") != name:
        data["name"] = name
        atomic_write_text(meta_file, dump_yaml(data))


def _move_into_place(staging: Path, destination: Path, manager: WorkspaceManager, name: str) -> bool:
    """One rename makes the workspace appear; an existing one (``--force``) is swapped out first."""
    if not destination.exists():
        os.rename(staging, destination)
        fsync_dir(destination.parent)
        return False
    from services.leases import acquire_lease
    from services.workspaces import Workspace

    lease = acquire_lease(Workspace(destination, name), purpose="import --force")  # never under a live Aries
    trash = destination.parent / f"{STAGING_PREFIX}{secrets.token_hex(6)}-replaced"
    try:
        os.rename(destination, trash)
        os.rename(staging, destination)
        fsync_dir(destination.parent)
    finally:
        lease.release()
    shutil.rmtree(trash, ignore_errors=True)
    return True
