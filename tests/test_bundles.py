"""Workspace bundles: a deterministic round trip, a hostile-bundle suite, signatures, SIGKILL mid-import.

Real CLI subprocesses, real Tantivy/Chroma (hash embedder), real zstd streams built by hand for the
hostile cases. Every refusal is checked for its message and for leaving nothing behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import zstandard

from services.bundles.export import export_workspace
from services.bundles.importer import import_bundle
from services.bundles.manifest import BundleError, BundleLimits
from services.workspace.manager import WorkspaceManager


def aries(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, object]]:
    """A workspace with an index, a transcript and an artifact, exported twice; and its query result."""
    base = tmp_path_factory.mktemp("bundle-src")
    home = base / "home"
    docs = base / "docs"
    docs.mkdir()
    (docs / "alpha.md").write_text("# Alpha\n\nThe gateway checks every tool call against the policy.\n")
    (docs / "beta.md").write_text("# Beta\n\nApprovals wait in a queue until the operator decides.\n")
    (docs / "gamma.txt").write_text("Retrieval fuses BM25 and dense scores with reciprocal rank fusion.\n")
    assert aries("workspace", "new", "src", home=home).returncode == 0
    added = aries("-w", "src", "rag", "index", "add", str(docs), "--name", "docs", home=home)
    assert added.returncode == 0, added.stderr
    note = base / "note.txt"
    note.write_text("an artifact\n")
    wide = base / "wide-policy.yaml"  # the operator's own policy lets the add read outside the workspace
    wide.write_text(
        "version: 1\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled}\n"
        f"filesystem: {{allowed_roots: ['${{workspace}}', '{base}']}}\n"
    )
    assert aries("-w", "src", "artifact", "add", str(note), "--policy", str(wide), home=home).returncode == 0
    query = aries("-w", "src", "rag", "query", "how are tool calls approved", "--json", home=home)
    assert query.returncode == 0, query.stderr
    out = base / "out"
    out.mkdir()
    first = aries("workspace", "export", "src", str(out / "one.tar.zst"), home=home)
    assert first.returncode == 0, first.stderr
    second = aries("workspace", "export", "src", str(out / "two.tar.zst"), home=home)
    assert second.returncode == 0, second.stderr
    return out / "one.tar.zst", out / "two.tar.zst", json.loads(query.stdout)


def test_two_exports_are_byte_identical(exported: tuple[Path, Path, dict[str, object]]) -> None:
    one, two, _ = exported
    assert one.read_bytes() == two.read_bytes()


def test_round_trip_into_a_fresh_home_answers_the_same(
    exported: tuple[Path, Path, dict[str, object]], tmp_path: Path
) -> None:
    bundle, _, before = exported
    home = tmp_path / "fresh"
    imported = aries("workspace", "import", str(bundle), "--name", "copy", home=home)
    assert imported.returncode == 0, imported.stderr
    assert "workspace copy created" in imported.stdout
    query = aries("-w", "copy", "rag", "query", "how are tool calls approved", "--json", home=home)
    assert query.returncode == 0, query.stderr
    after = json.loads(query.stdout)
    assert [(h["handle"], h["score"]) for h in after["hits"]] == [  # type: ignore[index]
        (h["handle"], h["score"])
        for h in before["hits"]  # type: ignore[attr-defined]
    ]
    handle = after["hits"][0]["handle"]
    shown = aries("-w", "copy", "rag", "show", handle, "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    listing = json.loads(aries("workspace", "list", "--json", home=home).stdout)
    assert [row["name"] for row in listing] == ["copy"]
    assert listing[0]["artifacts"] == 1 and listing[0]["indexes"] == ["docs"]
    again = aries("workspace", "import", str(bundle), "--name", "copy", home=home)
    assert again.returncode != 0 and "exists" in again.stderr and "--force" in again.stderr
    forced = aries("workspace", "import", str(bundle), "--name", "copy", "--force", home=home)
    assert forced.returncode == 0 and "replaced" in forced.stdout
    # Only the workspace, and the trust records beside it (services.trust): no staging folder left.
    assert sorted(p.name for p in (home / "workspaces").iterdir()) == [".trust", "copy"]


# -- hostile bundles ---------------------------------------------------------------------------
def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _manifest(files: list[tuple[str, bytes]], **overrides: object) -> bytes:
    data = {
        "format": "aries-bundle",
        "format_version": 1,
        "aries_version": "test",
        "workspace": {"name": "hostile"},
        "embedders": {},
        "files": [
            {"path": name, "size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "mime": "text/plain"}
            for name, body in files
        ],
    }
    data.update(overrides)
    return json.dumps(data).encode()


def _bundle(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


def _good(files: list[tuple[str, bytes]]) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    members: list[tuple[tarfile.TarInfo, bytes | None]] = [_member("aries-bundle.json", _manifest(files))]
    members += [_member(name, body) for name, body in files]
    return members


FILES = [("workspace.yaml", b"format_version: 1\nname: hostile\n"), ("transcripts/a.ndjson", b"{}\n")]


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def _hostile_cases(tmp: Path) -> dict[str, tuple[Path, str]]:
    cases: dict[str, tuple[list[tuple[tarfile.TarInfo, bytes | None]], str]] = {
        "absolute path": (
            [_member("aries-bundle.json", _manifest(FILES)), _member("/etc/passwd", b"x")],
            "absolute path",
        ),
        "dot-dot": ([_member("aries-bundle.json", _manifest(FILES)), _member("a/../../x", b"x")], "'..'"),
        "symlink": (
            [_member("aries-bundle.json", _manifest(FILES)), _special("link", tarfile.SYMTYPE, "/etc/passwd")],
            "symbolic link",
        ),
        "hard link": (
            [_member("aries-bundle.json", _manifest(FILES)), _special("hard", tarfile.LNKTYPE, "workspace.yaml")],
            "hard link",
        ),
        "device": ([_member("aries-bundle.json", _manifest(FILES)), _special("dev", tarfile.CHRTYPE)], "a device"),
        "fifo": ([_member("aries-bundle.json", _manifest(FILES)), _special("fifo", tarfile.FIFOTYPE)], "a FIFO"),
        "duplicate member": ([*_good(FILES), _member("workspace.yaml", FILES[0][1])], "appears twice"),
        "member not in manifest": ([*_good(FILES), _member("extra.txt", b"surprise")], "not in the manifest"),
        "manifest entry missing": (_good(FILES)[:-1], "missing from the bundle"),
        "size mismatch": (
            [_member("aries-bundle.json", _manifest(FILES)), _member("workspace.yaml", b"short")],
            "the manifest says",
        ),
        "hash mismatch": (
            [
                _member("aries-bundle.json", _manifest(FILES)),
                _member("workspace.yaml", b"X" * len(FILES[0][1])),
                _member(*FILES[1]),
            ],
            "SHA-256 does not match",
        ),
        "future format": (
            [_member("aries-bundle.json", _manifest(FILES, format_version=99)), *_good(FILES)[1:]],
            "format version 99",
        ),
        "not a bundle": ([_member("README", b"hello")], "first member is not aries-bundle.json"),
        "traversal in the manifest": (
            [_member("aries-bundle.json", _manifest([("../escape", b"x")])), _member("../escape", b"x")],
            "'..'",
        ),
    }
    built = {key: (_bundle(tmp / f"{n}.tar.zst", members), message) for n, (key, (members, message)) in
             enumerate(cases.items())}  # fmt: skip
    good = _bundle(tmp / "good.tar.zst", _good(FILES))
    data = good.read_bytes()
    truncated = tmp / "truncated.tar.zst"
    truncated.write_bytes(data[: len(data) // 2])
    built["truncated stream"] = (truncated, "truncated or corrupt")
    corrupt = tmp / "corrupt.tar.zst"
    corrupt.write_bytes(data[:20] + bytes(b ^ 0x5A for b in data[20:40]) + data[40:])
    built["corrupt stream"] = (corrupt, "truncated or corrupt")
    return built


def _nothing_left(home: Path) -> None:
    root = home / "workspaces"
    assert not root.exists() or sorted(p.name for p in root.iterdir()) == []


def test_every_hostile_bundle_is_refused_with_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    cases = _hostile_cases(tmp_path)
    assert len(cases) >= 16
    for label, (bundle, message) in cases.items():
        home = tmp_path / f"home-{label.replace(' ', '-')}"
        manager = WorkspaceManager(home / "workspaces")
        with pytest.raises(BundleError) as caught:
            import_bundle(bundle, manager)
        assert message in caught.value.message, (label, caught.value.message)
        assert "\n" not in caught.value.message
        _nothing_left(home)


def test_the_good_hand_built_bundle_imports(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "good.tar.zst", _good(FILES))
    report = import_bundle(bundle, WorkspaceManager(tmp_path / "ws"))
    assert report.name == "hostile" and report.files == 2
    assert (tmp_path / "ws" / "hostile" / "transcripts" / "a.ndjson").read_bytes() == b"{}\n"


def test_the_cli_refuses_in_one_line_with_exit_2(tmp_path: Path) -> None:
    bundle, _ = _hostile_cases(tmp_path)["dot-dot"]
    home = tmp_path / "cli-home"
    result = aries("workspace", "import", str(bundle), home=home)
    assert result.returncode == 2
    assert result.stderr.startswith("aries: ") and result.stderr.count("\n") == 1
    _nothing_left(home)


def test_a_decompression_bomb_stops_at_the_caps_long_before_the_disk_fills(tmp_path: Path) -> None:
    zeros = b"\0" * (8 << 20)
    files = [("workspace.yaml", b"name: bomb\n"), ("big.bin", zeros)]
    bundle = _bundle(tmp_path / "bomb.tar.zst", _good(files))
    assert bundle.stat().st_size < 4096  # 8 MiB of zeros in a few hundred bytes
    ratio = BundleLimits(ratio_floor=1 << 20, max_ratio=100)
    with pytest.raises(BundleError, match="decompression bomb"):
        import_bundle(bundle, WorkspaceManager(tmp_path / "a"), limits=ratio)
    _nothing_left(tmp_path / "a")
    small = BundleLimits(max_member_bytes=1 << 20)
    with pytest.raises(BundleError, match="cap per file"):
        import_bundle(bundle, WorkspaceManager(tmp_path / "b"), limits=small)
    _nothing_left(tmp_path / "b")
    total = BundleLimits(max_total_bytes=4 << 20)
    with pytest.raises(BundleError, match="the cap is"):
        import_bundle(bundle, WorkspaceManager(tmp_path / "c"), limits=total)
    _nothing_left(tmp_path / "c")
    # a member that is longer than the manifest says is cut at its first extra byte
    lying = [
        _member("aries-bundle.json", _manifest([("workspace.yaml", b"name: x\n")])),
        (tarfile.TarInfo("workspace.yaml"), None),
    ]
    lying[1][0].size = len(zeros)
    lying[1] = (lying[1][0], zeros)
    with pytest.raises(BundleError, match="manifest says"):
        import_bundle(_bundle(tmp_path / "lying.tar.zst", lying), WorkspaceManager(tmp_path / "d"))
    _nothing_left(tmp_path / "d")


def _keys(tmp: Path) -> tuple[Path, Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    paths = []
    for label in ("good", "other"):
        key = Ed25519PrivateKey.generate()
        private = tmp / f"{label}.pem"
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        public = tmp / f"{label}.pub.pem"
        public.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        paths += [private, public]
    return paths[0], paths[1], paths[3]


def test_signed_bundles_are_checked_and_a_bad_signature_is_refused(tmp_path: Path) -> None:
    private, public, other_public = _keys(tmp_path)
    manager = WorkspaceManager(tmp_path / "src")
    workspace, _ = manager.create("signed")
    signed = export_workspace(workspace, tmp_path / "s.tar.zst", aries_version="t", signing_key=private)
    unsigned = export_workspace(workspace, tmp_path / "u.tar.zst", aries_version="t")
    assert signed.signed and not unsigned.signed
    ok = import_bundle(tmp_path / "s.tar.zst", WorkspaceManager(tmp_path / "a"), verify_key=public)
    assert ok.signed
    with pytest.raises(BundleError, match="bad signature"):
        import_bundle(tmp_path / "s.tar.zst", WorkspaceManager(tmp_path / "b"), verify_key=other_public)
    _nothing_left(tmp_path / "b")
    with pytest.raises(BundleError, match="not signed"):
        import_bundle(tmp_path / "u.tar.zst", WorkspaceManager(tmp_path / "c"), require_signature=True)
    _nothing_left(tmp_path / "c")


def test_export_refuses_to_write_inside_the_workspace_or_over_a_file(tmp_path: Path) -> None:
    manager = WorkspaceManager(tmp_path / "ws")
    workspace, _ = manager.create("w")
    with pytest.raises(BundleError, match="inside the workspace"):
        export_workspace(workspace, workspace.root / "x.tar.zst", aries_version="t")
    (tmp_path / "taken.tar.zst").write_text("mine")
    with pytest.raises(BundleError, match="exists"):
        export_workspace(workspace, tmp_path / "taken.tar.zst", aries_version="t")
    assert (tmp_path / "taken.tar.zst").read_text() == "mine"


@pytest.mark.slow
def test_sigkill_during_import_leaves_no_workspace_after_the_next_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    manager = WorkspaceManager(tmp_path / "src")
    workspace, _ = manager.create("big")
    (workspace.root / "big.bin").write_bytes(os.urandom(48 << 20))  # incompressible: the import takes a while
    bundle = export_workspace(workspace, tmp_path / "big.tar.zst", aries_version="t")
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "workspace", "import", bundle.path],
        env={**os.environ, "ARIES_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    root = home / "workspaces"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        staging = [p for p in root.glob(".import-*") if p.is_dir()] if root.is_dir() else []
        if staging and any(staging[0].rglob("big.bin")):
            break
        time.sleep(0.01)
    else:
        process.kill()
        pytest.fail("the import never started writing")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert any(p.name.startswith(".import-") for p in root.iterdir())  # killed mid-way: staging is there
    listing = aries("workspace", "list", "--json", home=home)  # the next start
    assert listing.returncode == 0 and json.loads(listing.stdout) == []
    assert sorted(p.name for p in root.iterdir()) == []


def test_configured_keys_sign_and_require_signatures_on_the_cli(tmp_path: Path) -> None:
    private, public, _ = _keys(tmp_path)
    home = tmp_path / "home"
    assert aries("workspace", "new", "keyed", home=home).returncode == 0
    env = {"ARIES_BUNDLE_SIGNING_KEY": str(private)}
    signed = _aries_env(env, "workspace", "export", "keyed", str(tmp_path / "s.tar.zst"), home=home)
    assert signed.returncode == 0 and "signed" in signed.stdout, signed.stderr
    plain = aries("workspace", "export", "keyed", str(tmp_path / "u.tar.zst"), home=home)
    assert plain.returncode == 0 and "signed" not in plain.stdout
    strict = {"ARIES_BUNDLE_VERIFY_KEY": str(public), "ARIES_BUNDLE_REQUIRE_SIGNATURE": "1"}
    refused = _aries_env(strict, "workspace", "import", str(tmp_path / "u.tar.zst"), "--name", "a", home=home)
    assert refused.returncode == 2 and "not signed" in refused.stderr
    accepted = _aries_env(strict, "workspace", "import", str(tmp_path / "s.tar.zst"), "--name", "b", home=home)
    assert accepted.returncode == 0 and "signature checked" in accepted.stdout, accepted.stderr


def _aries_env(extra: dict[str, str], *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ARIES_HOME": str(home), **extra},
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
