"""Context packages: round trip, determinism, a hostile-package suite, force, SIGKILL mid-import.

Real files, real zstd streams (the hostile ones built by hand with ``tarfile``), a real subprocess
killed with SIGKILL. Every refusal is checked for its typed error, its one-line message, and for
leaving the destination and its parent exactly as they were.
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

from services.archive.reader import ArchiveLimits
from services.bundles.importer import import_bundle
from services.bundles.manifest import BundleError
from services.context.packages import (
    PACKAGE_STAGING_PREFIX,
    DestinationNotEmpty,
    PackageError,
    clean_stale_package_staging,
    export_tree,
    import_tree,
)
from services.files.staging import StagingArea
from services.workspace.manager import WorkspaceManager

REPO = Path(__file__).resolve().parents[2]


# -- helpers -----------------------------------------------------------------------------------
def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: folders as None, files as their bytes, links as their target."""
    found: dict[str, object] = {}
    if not root.exists():
        return found
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(directory)
        for name in dirnames + filenames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = None
            elif path.is_file():
                found[rel] = path.read_bytes()
            else:
                found[rel] = "special"
    return found


def make_tree(root: Path) -> None:
    (root / "docs" / "guide").mkdir(parents=True)
    (root / "docs" / "empty").mkdir()
    (root / ".abstract.md").write_text("# root abstract\n")
    (root / ".overview.md").write_text("# root overview\n")
    (root / "readme.md").write_text("# Readme\n\nThe gateway checks every call.\n")
    (root / "docs" / ".abstract.md").write_text("docs abstract\n")
    (root / "docs" / ".overview.md").write_text("docs overview\n")
    (root / "docs" / "guide" / "café ü.md").write_text("Ünïcode name and body: naïve café\n")
    (root / "docs" / "guide" / "blob.bin").write_bytes(bytes(range(256)) * 64)
    (root / "docs" / "guide" / "empty.txt").write_bytes(b"")


def make_litter(root: Path) -> None:
    """What never travels: other dot-files, dot-folders, links, a FIFO."""
    (root / ".state.json").write_text("{}")
    (root / "docs" / ".cache").mkdir()
    (root / "docs" / ".cache" / "x.bin").write_bytes(b"x")
    (root / "link.md").symlink_to(root / "readme.md")
    (root / "outside").symlink_to("/etc")
    os.mkfifo(root / "docs" / "pipe")


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def _manifest(files: list[tuple[str, bytes]], **overrides: object) -> bytes:
    data: dict[str, object] = {
        "format": "aries-context-package",
        "format_version": 1,
        "root": "axiom://resources/hostile",
        "folders": [],
        "files": [
            {"path": name, "size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "mime": "text/plain"}
            for name, body in files
        ],
    }
    data.update(overrides)
    return json.dumps(data).encode()


MANIFEST = "aries-context-package.json"


def _package(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


def _good(files: list[tuple[str, bytes]], **overrides: object) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    return [_member(MANIFEST, _manifest(files, **overrides)), *(_member(name, body) for name, body in files)]


FILES = [("a.md", b"# A\n"), ("sub/b.md", b"# B\n")]
Case = tuple[list[tuple[tarfile.TarInfo, bytes | None]], str]


def _with_manifest(*members: tuple[tarfile.TarInfo, bytes | None], files: list[tuple[str, bytes]] = FILES) -> list:
    return [_member(MANIFEST, _manifest(files)), *members]


def hostile_cases() -> dict[str, Case]:
    bad_hash = [_member(MANIFEST, _manifest(FILES)), _member("a.md", b"# X\n"), _member(*FILES[1])]
    return {
        "absolute path": (_with_manifest(_member("/etc/passwd", b"x")), "absolute path"),
        "dot-dot": (_with_manifest(_member("sub/../../x", b"x")), "'..'"),
        "backslash": (_with_manifest(_member("sub\\..\\..\\x", b"x")), "backslashes"),
        "windows drive": (_with_manifest(_member("C:/x", b"x")), "absolute path"),
        "encoded dot-dot": (_with_manifest(_member("%2e%2e/x", b"x")), "percent-encoded"),
        "double-encoded slash": (_with_manifest(_member("a%252f..%252fx", b"x")), "percent-encoded"),
        "fullwidth dot-dot": (_with_manifest(_member("\uff0e\uff0e/x", b"x")), "look-alike"),
        "division-slash": (_with_manifest(_member("a\u2215..\u2215x", b"x")), "look-alike"),
        "NUL in a listed name": (_good([("a\x00b", b"x")]), "control characters"),
        "escape sequence in a name": (_good([("a\x1b[2Jb", b"x")]), "control characters"),
        "NUL in a member name": (_with_manifest(_member("a.md\x00../../x", b"x")), ""),
        "over-long name": (_with_manifest(_member("d/" + "n" * 256, b"x")), "over 255 bytes"),
        "over-long path": (_with_manifest(_member("d/" * 600 + "x", b"x")), "over-long path"),
        "symlink": (_with_manifest(_special("link", tarfile.SYMTYPE, "/etc/passwd")), "symbolic link"),
        "hard link": (_with_manifest(_special("hard", tarfile.LNKTYPE, "a.md")), "hard link"),
        "char device": (_with_manifest(_special("dev", tarfile.CHRTYPE)), "a device"),
        "block device": (_with_manifest(_special("blk", tarfile.BLKTYPE)), "a device"),
        "fifo": (_with_manifest(_special("fifo", tarfile.FIFOTYPE)), "a FIFO"),
        "directory member": (_with_manifest(_special("sub", tarfile.DIRTYPE)), "a directory"),
        "duplicate member": ([*_good(FILES), _member("a.md", FILES[0][1])], "appears twice"),
        "member not in manifest": ([*_good(FILES), _member("extra.md", b"surprise")], "not in the manifest"),
        "listed member missing": (_good(FILES)[:-1], "missing from the package"),
        "size mismatch": (_with_manifest(_member("a.md", b"short but not four")), "the manifest says"),
        "hash mismatch": (bad_hash, "SHA-256 does not match"),
        "manifest lists a file twice": (
            [_member(MANIFEST, _manifest([*FILES, FILES[0]])), *_good(FILES)[1:]],
            "twice",
        ),
        "traversal in the manifest": (
            [_member(MANIFEST, _manifest([("../escape", b"x")])), _member("../escape", b"x")],
            "'..'",
        ),
        "traversal in a folder": (_good(FILES, folders=["sub/../../up"]), "'..'"),
        "file and folder at once": (
            _good([("a.md", b"1"), ("a.md/b.md", b"2")]),
            "both as a file and as a folder",
        ),
        "reserved dot-file": (_good([("sub/.secret", b"x")]), "reserved for Aries"),
        "reserved dot-folder": (_good([(".git/config", b"x")]), "reserved for Aries"),
        "wrong format id": (_good(FILES, format="aries-context-package/2"), "not an Aries package"),
        "future version": (_good(FILES, format_version=99), "format version 99"),
        "root label with a newline": (_good(FILES, root="axiom://x\n\x1b[31m"), "root label"),
        "not a package": ([_member("README", b"hello")], "first member is not aries-context-package.json"),
        "a workspace bundle": (
            [_member("aries-bundle.json", json.dumps({"format": "aries-bundle", "format_version": 1}).encode())],
            "this is a workspace bundle",
        ),
        "a bundle's manifest under the package's name": (
            [_member(MANIFEST, _manifest(FILES, format="aries-bundle")), *_good(FILES)[1:]],
            "this is a workspace bundle",
        ),
    }


# -- round trip and determinism ----------------------------------------------------------------
def test_round_trip_preserves_structure_and_bytes_and_lists_what_stayed_behind(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_tree(source)
    expected = snapshot(source)
    make_litter(source)
    report = export_tree(source, tmp_path / "tree.pkg", root_label="axiom://resources/docs")
    assert report.files == 8 and report.folders == 3
    assert report.skipped == sorted(
        [
            ".state.json (a name beginning with '.' is reserved for Aries; only tier files travel)",
            "docs/.cache (a name beginning with '.' is reserved for Aries; only tier files travel)",
            "docs/pipe (not a regular file)",
            "link.md (a link)",
            "outside (a link)",
        ]
    )
    assert report.sha256 == hashlib.sha256((tmp_path / "tree.pkg").read_bytes()).hexdigest()
    seen: list[tuple[Path, bool, dict[str, object]]] = []
    imported = import_tree(
        tmp_path / "tree.pkg",
        tmp_path / "dst" / "docs",
        vectorize=True,
        on_imported=lambda path, vectorize: seen.append((path, vectorize, snapshot(path))),
    )
    assert snapshot(tmp_path / "dst" / "docs") == expected
    assert snapshot(tmp_path / "dst") == {"docs": None, **{f"docs/{k}": v for k, v in expected.items()}}
    assert imported.root_label == "axiom://resources/docs" and imported.sha256 == report.sha256
    assert imported.files == 8 and imported.folders == 3 and not imported.replaced and imported.vectorize
    assert seen == [(tmp_path / "dst" / "docs", True, expected)]  # called once, with the tree in place


def test_the_same_tree_exports_to_identical_bytes_wherever_and_whenever_it_lies(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "elsewhere" / "two"
    make_tree(one)
    make_tree(two)
    for path in two.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000), follow_symlinks=False)
    os.chmod(two / "readme.md", 0o600)
    a = export_tree(one, tmp_path / "a.pkg", root_label="axiom://resources/x")
    b = export_tree(one, tmp_path / "b.pkg", root_label="axiom://resources/x")
    c = export_tree(two, tmp_path / "c.pkg", root_label="axiom://resources/x")
    assert (tmp_path / "a.pkg").read_bytes() == (tmp_path / "b.pkg").read_bytes() == (tmp_path / "c.pkg").read_bytes()
    assert a.sha256 == b.sha256 == c.sha256
    d = export_tree(one, tmp_path / "d.pkg", root_label="axiom://resources/y")
    assert d.sha256 != a.sha256  # the label is part of the package


def test_export_refuses_bad_targets_and_labels_and_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_tree(source)
    before = snapshot(tmp_path)
    with pytest.raises(PackageError, match="inside the tree"):
        export_tree(source, source / "docs" / "x.pkg", root_label="r")
    with pytest.raises(PackageError, match="one line"):
        export_tree(source, tmp_path / "x.pkg", root_label="two\nlines")
    with pytest.raises(PackageError, match="not a folder"):
        export_tree(tmp_path / "missing", tmp_path / "x.pkg", root_label="r")
    assert snapshot(tmp_path) == before
    (tmp_path / "taken.pkg").write_text("mine")
    with pytest.raises(PackageError, match="exists"):
        export_tree(source, tmp_path / "taken.pkg", root_label="r")
    assert (tmp_path / "taken.pkg").read_text() == "mine"


# -- hostile packages --------------------------------------------------------------------------
def test_every_hostile_package_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    cases = hostile_cases()
    assert len(cases) >= 30
    parent = tmp_path / "ctx" / "resources"
    (parent / "kept").mkdir(parents=True)
    (parent / "kept" / "old.md").write_text("old\n")
    for n, (label, (members, message)) in enumerate(cases.items()):
        package = _package(tmp_path / f"case-{n}.pkg", members)
        before = snapshot(tmp_path / "ctx")
        for dest, force in ((parent / "new", False), (parent / "kept", True), (parent / "a" / "b" / "c", False)):
            with pytest.raises(PackageError) as caught:
                import_tree(package, dest, force=force)
            assert message in caught.value.message, (label, caught.value.message)
            assert "\n" not in caught.value.message, label
            assert snapshot(tmp_path / "ctx") == before, label


def test_truncated_and_corrupt_streams_are_refused(tmp_path: Path) -> None:
    data = _package(tmp_path / "good.pkg", _good(FILES)).read_bytes()
    (tmp_path / "truncated.pkg").write_bytes(data[: len(data) // 2])
    (tmp_path / "corrupt.pkg").write_bytes(data[:20] + bytes(b ^ 0x5A for b in data[20:40]) + data[40:])
    for name in ("truncated.pkg", "corrupt.pkg"):
        with pytest.raises(PackageError, match="truncated or corrupt"):
            import_tree(tmp_path / name, tmp_path / "dst" / "x")
        assert snapshot(tmp_path / "dst") == {}
    assert import_tree(tmp_path / "good.pkg", tmp_path / "dst" / "x").files == 2


def test_caps_stop_oversized_packages_and_bombs_before_the_disk_fills(tmp_path: Path) -> None:
    zeros = b"\0" * (8 << 20)
    package = _package(tmp_path / "bomb.pkg", _good([("a.md", b"a"), ("big.bin", zeros)]))
    assert package.stat().st_size < 4096
    limits = {
        "decompression bomb": ArchiveLimits(ratio_floor=1 << 20, max_ratio=100),
        "cap per file": ArchiveLimits(max_member_bytes=1 << 20),
        "the cap is 4194304 bytes": ArchiveLimits(max_total_bytes=4 << 20),
        "lists 2 files; the cap is 1": ArchiveLimits(max_members=1),
        "over its 64-byte cap": ArchiveLimits(max_manifest_bytes=64),
    }
    for message, cap in limits.items():
        with pytest.raises(PackageError, match=message):
            import_tree(package, tmp_path / "dst" / "x", limits=cap)
        assert snapshot(tmp_path / "dst") == {}
    lying = _with_manifest(_member("a.md", zeros), files=[("a.md", b"# A\n")])
    with pytest.raises(PackageError, match="manifest says"):
        import_tree(_package(tmp_path / "lying.pkg", lying), tmp_path / "dst" / "x")
    assert snapshot(tmp_path / "dst") == {}


def test_a_package_and_a_bundle_are_each_refused_where_the_other_is_expected(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_tree(source)
    export_tree(source, tmp_path / "tree.pkg", root_label="axiom://resources/docs")
    manager = WorkspaceManager(tmp_path / "workspaces")
    with pytest.raises(BundleError, match=r"this is a context package \(import it with `aries context import`\)"):
        import_bundle(tmp_path / "tree.pkg", manager)
    assert list((tmp_path / "workspaces").iterdir()) == []
    from services.bundles.export import export_workspace

    workspace, _ = manager.create("w")
    export_workspace(workspace, tmp_path / "w.tar.zst", aries_version="t")
    with pytest.raises(PackageError, match=r"this is a workspace bundle \(import it with `aries workspace import`\)"):
        import_tree(tmp_path / "w.tar.zst", tmp_path / "dst" / "w")
    assert snapshot(tmp_path / "dst") == {}


def test_a_missing_package_or_a_file_as_destination_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="no such package"):
        import_tree(tmp_path / "nope.pkg", tmp_path / "dst")
    package = _package(tmp_path / "good.pkg", _good(FILES))
    (tmp_path / "file").write_text("x")
    with pytest.raises(PackageError, match="not a folder"):
        import_tree(package, tmp_path / "file", force=True)
    with pytest.raises(PackageError, match="not a folder"):
        import_tree(package, tmp_path / "file" / "below")
    assert (tmp_path / "file").read_text() == "x"


# -- force -------------------------------------------------------------------------------------
def test_a_non_empty_destination_needs_force_and_is_replaced_only_by_a_complete_tree(tmp_path: Path) -> None:
    source = tmp_path / "src"
    make_tree(source)
    export_tree(source, tmp_path / "tree.pkg", root_label="r")
    parent = tmp_path / "ctx"
    dest = parent / "docs"
    dest.mkdir(parents=True)
    (dest / "old.md").write_text("the old tree\n")
    before = snapshot(parent)
    with pytest.raises(DestinationNotEmpty, match="--force"):
        import_tree(tmp_path / "tree.pkg", dest)
    assert snapshot(parent) == before
    broken = _package(tmp_path / "broken.pkg", _good(FILES)[:-1])  # the last member is missing
    with pytest.raises(PackageError, match="missing from the package"):
        import_tree(broken, dest, force=True)
    assert snapshot(parent) == before
    report = import_tree(tmp_path / "tree.pkg", dest, force=True)
    assert report.replaced
    assert snapshot(dest) == snapshot(source)
    assert sorted(p.name for p in parent.iterdir()) == ["docs"]  # no staging, no old tree left
    empty = parent / "empty"
    empty.mkdir()
    assert not import_tree(tmp_path / "tree.pkg", empty).replaced  # an empty folder needs no force
    assert snapshot(empty) == snapshot(source)


# -- crashes -----------------------------------------------------------------------------------
_WORKER = """
import sys
from pathlib import Path
from services.context.packages import import_tree
import_tree(Path(sys.argv[1]), Path(sys.argv[2]), force=True)
print("done")
"""


@pytest.mark.slow
def test_sigkill_during_import_leaves_dest_unchanged_and_staging_is_cleaned(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.md").write_text("first\n")
    (source / "z-big.bin").write_bytes(os.urandom(48 << 20))  # incompressible: the import takes a while
    export_tree(source, tmp_path / "big.pkg", root_label="r")
    parent = tmp_path / "ctx"
    dest = parent / "docs"
    dest.mkdir(parents=True)
    (dest / "old.md").write_text("the old tree\n")
    before = snapshot(parent)
    process = subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(tmp_path / "big.pkg"), str(dest)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        staging = [p for p in parent.glob(f"{PACKAGE_STAGING_PREFIX}*") if p.is_dir()]
        if staging and any(staging[0].rglob("z-big.bin")):
            break
        time.sleep(0.005)
    else:
        process.kill()
        pytest.fail("the import never started writing")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.stdout is not None and process.stdout.read() == b""  # killed before it finished
    assert snapshot(dest) == {"old.md": b"the old tree\n"}
    assert any(p.name.startswith(PACKAGE_STAGING_PREFIX) for p in parent.iterdir())  # killed mid-way
    removed = clean_stale_package_staging(parent)
    assert len(removed) == 1 and removed[0].startswith(PACKAGE_STAGING_PREFIX)
    assert snapshot(parent) == before


def test_a_crash_between_the_two_renames_gives_the_old_tree_back(tmp_path: Path) -> None:
    """The state a SIGKILL leaves after the old tree was moved aside and before the new one moved in."""
    parent = tmp_path / "ctx"
    staging = parent / f"{PACKAGE_STAGING_PREFIX}0123456789ab"
    (staging / "old").mkdir(parents=True)
    (staging / "old" / "old.md").write_text("the old tree\n")
    (staging / "tree").mkdir()
    (staging / "tree" / "new.md").write_text("the new tree\n")
    (staging / "target").write_text("docs")
    clean_stale_package_staging(parent)
    assert snapshot(parent) == {"docs": None, "docs/old.md": b"the old tree\n"}


def test_a_live_import_is_never_cleaned_under_its_feet(tmp_path: Path) -> None:
    parent = tmp_path / "ctx"
    parent.mkdir()
    with StagingArea(parent, PACKAGE_STAGING_PREFIX) as live:
        live.create()
        assert clean_stale_package_staging(parent) == []
        assert live.tree.is_dir()
    assert list(parent.iterdir()) == []
