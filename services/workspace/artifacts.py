"""The artifact registry: content-addressed files plus a JSON manifest of their metadata.

Layout inside a workspace::

    artifacts/
      registry.json          the manifest (atomic replace under a file lock)
      .registry.lock         filelock for writers in several processes
      objects/<aa>/<sha256>  content, stored once per hash, read-only

An artifact is added in two steps, each atomic: the object file (temp + fsync + rename),
then the manifest.  A crash between them leaves an unreferenced object, never a manifest
entry without its content.  Identical content is stored and listed once; adding it again
returns the existing entry.
"""

from __future__ import annotations

import builtins
import json
import mimetypes
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.clock import utc_now
from services.errors import CorruptFile, InvalidInput, NotFound, TooLarge
from services.files.atomic import atomic_write_text, fsync_dir
from services.hashing import BLOCK, HashingReader, file_sha256
from services.workspace.paths import WorkspacePaths

MANIFEST = "registry.json"
MANIFEST_VERSION = 1
MAX_ARTIFACT_BYTES = 512 * 1024 * 1024
LOCK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Artifact:
    id: str  # first 12 hex digits of the hash: short, stable handle
    name: str  # the file name it was added under
    path: str  # stored location, relative to the workspace root
    created_at: str
    mime_type: str
    size_bytes: int
    hash: str  # "sha256:<hex>"
    description: str | None
    provenance: dict[str, Any]  # {"kind": "cli"|"tool"|"tui", "command"/"tool": ...}
    aliases: list[str] = field(default_factory=list)  # other names the same content was added under

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _guess_mime(name: str, head: bytes) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed:
        return guessed
    if b"\x00" in head:
        return "application/octet-stream"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is still text.
        if exc.start < len(head) - 4:
            return "application/octet-stream"
    return "text/plain"


def is_text_mime(mime: str) -> bool:
    return mime.startswith("text/") or mime in {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-sh",
        "application/javascript",
    }


class ArtifactRegistry:
    def __init__(self, workspace_root: Path) -> None:
        self.root = Path(workspace_root)
        self.directory = WorkspacePaths(self.root).artifacts
        self.objects = self.directory / "objects"
        self.manifest_path = self.directory / MANIFEST
        self._lock_path = self.directory / ".registry.lock"

    # -- reading -----------------------------------------------------------------
    def list(self) -> list[Artifact]:
        """Every artifact, oldest first."""
        return [Artifact(**item) for item in self._load()["artifacts"]]

    def get(self, ref: str) -> Artifact:
        """Find an artifact by id, full hash (with or without ``sha256:``) or name."""
        ref = ref.removeprefix("sha256:")
        matches = [a for a in self.list() if ref in (a.id, a.hash.removeprefix("sha256:"), a.name, *a.aliases)]
        if not matches:
            raise NotFound(f"no artifact {ref!r} in this workspace")
        return matches[-1]

    def object_path(self, artifact: Artifact) -> Path:
        return self.root / artifact.path

    def read_bytes(self, artifact: Artifact, limit: int | None = None) -> bytes:
        with self.object_path(artifact).open("rb") as handle:
            return handle.read() if limit is None else handle.read(limit)

    def _load(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {"version": MANIFEST_VERSION, "artifacts": []}
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptFile(f"{self.manifest_path}: not a valid registry manifest ({exc})") from exc
        if not isinstance(data, dict) or not isinstance(data.get("artifacts"), list):
            raise CorruptFile(f"{self.manifest_path}: manifest has no 'artifacts' list")
        return data

    # -- writing -----------------------------------------------------------------
    def add_file(
        self, source: Path, *, description: str | None = None, provenance: dict[str, Any] | None = None
    ) -> tuple[Artifact, bool]:
        """Add a file; return ``(artifact, created)``; ``created`` is False for known content."""
        source = Path(source)
        if not source.exists():
            raise NotFound(f"{source}: no such file")
        if not source.is_file():
            raise InvalidInput(f"{source}: not a regular file")
        size = source.stat().st_size
        if size > MAX_ARTIFACT_BYTES:
            raise TooLarge(f"{source}: {size} bytes exceeds the {MAX_ARTIFACT_BYTES}-byte artifact limit")
        with source.open("rb") as handle:
            return self._add_stream(handle, source.name, description, provenance)

    def add_bytes(
        self,
        data: bytes,
        name: str,
        *,
        description: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> tuple[Artifact, bool]:
        if len(data) > MAX_ARTIFACT_BYTES:
            raise TooLarge(f"{len(data)} bytes exceeds the {MAX_ARTIFACT_BYTES}-byte artifact limit")
        import io

        return self._add_stream(io.BytesIO(data), name, description, provenance)

    def add_stream(
        self, stream: Any, name: str, *, description: str | None = None, provenance: dict[str, Any] | None = None
    ) -> tuple[Artifact, bool]:
        """Add what a binary stream yields (read in 1 MiB chunks, capped at MAX_ARTIFACT_BYTES)."""
        return self._add_stream(stream, name, description, provenance)

    def _add_stream(
        self, stream: Any, name: str, description: str | None, provenance: dict[str, Any] | None
    ) -> tuple[Artifact, bool]:
        name = Path(name).name or "artifact"
        if any(ord(c) < 32 for c in name) or len(name) > 255:
            raise InvalidInput(f"artifact name {name[:80]!r} is not usable")
        self.objects.mkdir(parents=True, exist_ok=True)
        source = HashingReader(stream)
        head = b""
        fd, tmp_name = tempfile.mkstemp(prefix=".incoming.", suffix=".tmp", dir=self.objects)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := source.read(BLOCK):
                    if len(head) < 8192:
                        head += chunk[: 8192 - len(head)]
                    if source.count > MAX_ARTIFACT_BYTES:
                        raise TooLarge(f"artifact exceeds the {MAX_ARTIFACT_BYTES}-byte limit")
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            hexdigest = source.hexdigest()
            shard = self.objects / hexdigest[:2]
            shard.mkdir(exist_ok=True)
            final = shard / hexdigest
            if final.exists() and file_sha256(final)[1] == hexdigest:
                tmp.unlink()
            else:
                os.chmod(tmp, 0o444)
                os.replace(tmp, final)
                fsync_dir(shard)
        except BaseException:
            if tmp.exists():
                tmp.unlink()
            raise
        from filelock import FileLock

        with FileLock(str(self._lock_path), timeout=LOCK_TIMEOUT_S):
            data = self._load()
            for item in data["artifacts"]:
                if item["hash"] == f"sha256:{hexdigest}":
                    known = [item["name"], *item.get("aliases", [])]
                    if name not in known:  # the same content under a second name keeps both names
                        item["aliases"] = [*item.get("aliases", []), name]
                        atomic_write_text(self.manifest_path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
                    return Artifact(**item), False
            artifact = Artifact(
                id=hexdigest[:12],
                name=name,
                path=str(final.relative_to(self.root).as_posix()),
                created_at=utc_now(),
                mime_type=_guess_mime(name, head),
                size_bytes=source.count,
                hash=f"sha256:{hexdigest}",
                description=description,
                provenance=dict(provenance or {"kind": "unknown"}),
            )
            data["artifacts"].append(artifact.to_dict())
            data["version"] = MANIFEST_VERSION
            atomic_write_text(self.manifest_path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            return artifact, True

    def verify(self) -> builtins.list[str]:
        """Problems found: manifest entries whose object is missing or does not match its hash."""
        problems = []
        for artifact in self.list():
            path = self.object_path(artifact)
            if not path.is_file():
                problems.append(f"{artifact.id}: object {artifact.path} is missing")
            elif "sha256:" + file_sha256(path)[1] != artifact.hash:
                problems.append(f"{artifact.id}: object {artifact.path} does not match its hash")
        return problems
