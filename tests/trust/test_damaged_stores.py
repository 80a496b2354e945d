"""A store damaged in a workspace already in use: one clear line naming the way out, never a traceback."""

from __future__ import annotations

from pathlib import Path

from tests.trust.hostile import aries


def test_a_damaged_manifest_is_one_line_and_rebuild_is_the_way_out(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Notes\n\nThe quokka lives by the fjord.\n")
    assert aries("workspace", "new", "w", home=home).returncode == 0
    assert aries("-w", "w", "rag", "index", "add", str(docs), "--name", "docs", home=home).returncode == 0
    (home / "workspaces/w/indexes/docs/manifest.db").write_bytes(b"\x00garbage" * 400)

    for args in (("rag", "query", "quokka"), ("rag", "index", "list"), ("rag", "index", "rebuild", "docs")):
        done = aries("-w", "w", *args, home=home)
        text = done.stdout + done.stderr
        assert "Traceback" not in text, (args, text)
    query = aries("-w", "w", "rag", "query", "quokka", home=home)
    assert query.returncode != 0
    assert query.stderr.splitlines() == [
        "aries: index 'docs': its manifest (manifest.db) is damaged (file is not a database); rebuild the index "
        "from its folder: aries rag index rebuild docs --from FOLDER"
    ]
    rebuilt = aries("-w", "w", "rag", "index", "rebuild", "docs", "--from", str(docs), home=home)
    assert rebuilt.returncode == 0, rebuilt.stderr
    again = aries("-w", "w", "rag", "query", "quokka", home=home)
    assert again.returncode == 0 and "a.md" in again.stdout
    plain = aries("-w", "w", "rag", "index", "rebuild", "docs", home=home)  # its folders are known again
    assert plain.returncode == 0, plain.stderr
