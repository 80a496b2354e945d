"""The workspace layout has one owner, and each store owns its SQL.

* ``services/workspace/paths.py`` spells every file and folder name of a workspace; the names are
  what Aries has always written (an upgrade keeps meaning), and no other product module spells them.
* ``services/trust/`` and ``services/bundles/`` hold no SQL at all (each store exports its own import
  check and accessors), no module outside ``services/retrieval/`` runs SQL on an index manifest, and
  nobody imports another module's private ``_SCHEMA``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from services.workspace.paths import IndexPaths, WorkspacePaths

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("services", "app", "widgets", "screens")
OWNER = "services/workspace/paths.py"

LAYOUT_NAMES = (
    "workspace.yaml",
    "policy.yaml",
    "audit.db",
    "manifest.db",
    "prompt_history.json",
    ".quarantine",
    ".aries.lock",
    ".aries-session.json",
)
"""Names that mean one thing only: a file or folder of a workspace."""

PENDING_LITERALS: set[tuple[str, str]] = set()
"""Names still spelled outside the layout owner (none since the merge). The test fails on an entry that
is no longer spelled, so the list can only shrink."""

MANIFEST_TABLES = ("meta", "roots", "files", "chunks", "journal", "failures")
SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|REPLACE|ALTER|DROP|WITH|PRAGMA)\s")
"""A statement as Aries writes them (keywords in capitals): prose that starts with "replace" is none."""
MANIFEST_SQL = re.compile(
    r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE(?:\s+IF\s+NOT\s+EXISTS)?)\s+\"?(" + "|".join(MANIFEST_TABLES) + r")\b",
    re.IGNORECASE,
)


# -- scanning ------------------------------------------------------------------------------------
def _modules() -> list[Path]:
    return sorted(p for top in PRODUCT for p in (REPO / top).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def _strings(source: str) -> list[str]:
    """The string constants of ``source`` but its docstrings; an f-string as one text, each
    placeholder written ``{}``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    inside_fstrings: set[int] = set()
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inside_fstrings.add(id(value))
                parts.append(value.value if isinstance(value, ast.Constant) else "{}")
            texts.append("".join(str(p) for p in parts))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in skip and id(node) not in inside_fstrings:
                texts.append(node.value)
    return texts


def spells(text: str, name: str) -> bool:
    """``text`` names the file or folder ``name`` as a path (not in prose): the whole text, or a
    path component of it (``x/name``, ``name/x``), or the name with a SQLite side suffix."""
    if text == name or text.startswith(name + "/") or text.endswith("/" + name) or f"/{name}/" in text:
        return True
    return any(text == name + suffix for suffix in ("-wal", "-shm", "-journal"))


def sql_on_manifest(text: str) -> bool:
    return bool(SQL_START.match(text)) and bool(MANIFEST_SQL.search(text))


def _literal_offenders() -> set[tuple[str, str]]:
    found = set()
    for path in _modules():
        rel = _rel(path)
        if rel == OWNER:
            continue
        for text in _strings(path.read_text(encoding="utf-8")):
            for name in LAYOUT_NAMES:
                if spells(text, name):
                    found.add((rel, name))
    return found


# -- the layout --------------------------------------------------------------------------------------
def test_every_name_is_what_aries_has_always_written(tmp_path: Path) -> None:
    """No on-disk change: each part of a workspace keeps its name."""
    paths = WorkspacePaths(tmp_path)
    expected = {
        paths.settings: "workspace.yaml",
        paths.policy: "policy.yaml",
        paths.profiles: "profiles",
        paths.audit_db: "audit.db",
        paths.transcripts: "transcripts",
        paths.artifacts: "artifacts",
        paths.indexes: "indexes",
        paths.context: "context",
        paths.logs: "logs",
        paths.prompt_history: "prompt_history.json",
        paths.exports: "exports",
        paths.quarantine: ".quarantine",
        paths.lock_file: ".aries.lock",
        paths.session_file: ".aries-session.json",
    }
    for path, name in expected.items():
        assert path == tmp_path / name
    index = paths.index("docs")
    assert isinstance(index, IndexPaths)
    assert (index.name, index.manifest, index.tantivy, index.chroma) == (
        "docs",
        tmp_path / "indexes" / "docs" / "manifest.db",
        tmp_path / "indexes" / "docs" / "tantivy",
        tmp_path / "indexes" / "docs" / "chroma",
    )


def test_a_workspace_and_its_stores_use_the_layout(tmp_path: Path) -> None:
    from services.history_search.prompt_history import FILE_NAME
    from services.retrieval.store_locks import LOCKS_DIR
    from services.retrieval.store_manifest import MANIFEST
    from services.workspace.manager import WorkspaceManager

    workspace, _ = WorkspaceManager(tmp_path).create("w")
    assert workspace.paths == WorkspacePaths(workspace.root)
    assert sorted(p.name for p in workspace.root.iterdir()) == ["artifacts", "indexes", "transcripts", "workspace.yaml"]
    assert (workspace.meta_path, workspace.transcripts_dir, workspace.artifacts_dir, workspace.indexes_dir) == (
        workspace.paths.settings,
        workspace.paths.transcripts,
        workspace.paths.artifacts,
        workspace.paths.indexes,
    )
    assert (FILE_NAME, LOCKS_DIR, MANIFEST) == ("prompt_history.json", ".locks", "manifest.db")


def test_index_folders_skip_hidden_folders_and_files(tmp_path: Path) -> None:
    paths = WorkspacePaths(tmp_path)
    assert paths.index_folders() == []
    for name in ("b", "a", ".locks", ".a.creating-1"):
        (paths.indexes / name).mkdir(parents=True)
    (paths.indexes / "stray.txt").write_text("x")
    assert [index.name for index in paths.index_folders()] == ["a", "b"]


def test_the_tools_may_not_write_the_workspace_records() -> None:
    from services.policy.model import WORKSPACE_INTERNAL

    assert set(WORKSPACE_INTERNAL) == {
        "audit.db",
        "audit.db-wal",
        "audit.db-shm",
        "audit.db-journal",
        "workspace.yaml",
        "policy.yaml",
        "profiles",
        ".quarantine",
        ".aries-session.json",
        "transcripts",
        "artifacts",
        "indexes",
        "cache",  # the derived conversation search index (issue 32): no tool writes it either
        "exports",  # conversations exported as documents (issue 32): no tool plants one
        "commands",  # workspace commands (issue 31): authority, edited through Aries only
        "AGENTS.md",  # project instructions (issue 31): authority, as the profiles are
    }


# -- the scans detect what they look for --------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "name"),
    [
        ('p = root / "policy.yaml"', "policy.yaml"),
        ('p = f"{root}/audit.db"', "audit.db"),
        ('x = ("audit.db-wal",)', "audit.db"),
        ('p = root / "indexes/docs/manifest.db"', "manifest.db"),
        ('MANIFEST = "manifest.db"', "manifest.db"),
    ],
)
def test_the_literal_scan_finds_a_spelled_name(source: str, name: str) -> None:
    assert any(spells(text, name) for text in _strings(source))


def test_the_literal_scan_leaves_prose_and_docstrings() -> None:
    source = '"""Reads policy.yaml."""\nmessage = "edit policy.yaml and reload"\n'
    assert not any(spells(text, name) for text in _strings(source) for name in LAYOUT_NAMES)


@pytest.mark.parametrize(
    "source",
    [
        "db.execute(\"SELECT value FROM meta WHERE key = 'embedding_model'\")",
        'db.execute("DELETE FROM roots")',
        'db.executemany("INSERT OR IGNORE INTO roots(root, added_at, updated_at) VALUES (?, ?, ?)", rows)',
        "db.execute(\"UPDATE meta SET value = 'null' WHERE key = 'chroma_url'\")",
        'db.execute(f"SELECT COUNT(*) FROM chunks WHERE x = {y}")',
    ],
)
def test_the_sql_scan_finds_sql_on_a_manifest(source: str) -> None:
    assert any(sql_on_manifest(text) for text in _strings(source))


def test_the_sql_scan_leaves_other_tables() -> None:
    source = 'db.execute("SELECT value FROM audit_meta WHERE key = 1")\ndb.execute("SELECT run_id FROM plan_runs")'
    assert not any(sql_on_manifest(text) for text in _strings(source))


# -- the rules ------------------------------------------------------------------------------------------
def test_no_product_module_spells_the_layout() -> None:
    offenders = _literal_offenders()
    assert offenders - PENDING_LITERALS == set(), "use services.workspace.paths (Workspace.paths)"
    assert PENDING_LITERALS - offenders == set(), "fixed: remove it from PENDING_LITERALS"


def test_no_sql_on_an_index_manifest_outside_retrieval() -> None:
    offenders = []
    for path in _modules():
        rel = _rel(path)
        if rel.startswith("services/retrieval/"):
            continue
        texts = _strings(path.read_text(encoding="utf-8"))
        offenders += [f"{rel}: {text[:60]}" for text in texts if sql_on_manifest(text)]
    assert offenders == []


@pytest.mark.parametrize("package", ["services/trust", "services/bundles"])
def test_trust_and_bundles_hold_no_sql(package: str) -> None:
    """Each store runs its own import check and owns its accessors: trust/ and bundles/ call them."""
    offenders = []
    for path in sorted((REPO / package).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        offenders += [f"{_rel(path)}: {text[:60]}" for text in _strings(source) if SQL_START.match(text)]
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript"):
                offenders.append(f"{_rel(path)}:{node.lineno}: .{node.attr}(")
    assert offenders == []


def test_nobody_imports_a_private_schema() -> None:
    offenders = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names if a.name.startswith("_") and "SCHEMA" in a.name]
                offenders += [f"{_rel(path)}: {name}" for name in names]
    assert offenders == []
