"""L0/L1 tier files: byte-identical across runs and trees, regenerated after a change, unchanged
folders not rewritten, semantic-lite deterministic, caps and settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.context.settings import ContextSettings
from services.context.tiers import (
    ABSTRACT,
    MAX_ABSTRACT_CHARS,
    MAX_ENTRIES,
    OVERVIEW,
    synthesize_tiers,
)
from services.context.tree import ContextTree
from services.context.uri import AxiomUri, parse_uri
from services.errors import ConfigError
from services.retrieval.embedders import HashEmbedder

FILES = {
    "docs/README.md": "# Widget docs\n\nThis folder documents the widget. It has two parts.\n",
    "docs/install.md": "# Installing\n\nRun the installer as root. Then restart the machine!\n",
    "docs/api/calls.md": "# API calls\n\nThe API has three calls. Each returns JSON.\n\n```\nnot. a. sentence.\n```\n",
    "docs/api/errors.md": "# Errors\n\nErrors carry a code and a message.\n",
    "docs/logo.png": "\x89PNG\x00\x00binary",
    "notes.txt": "Plain text without a heading. A second sentence.\n",
}


def build(root: Path) -> ContextTree:
    tree = ContextTree(root)
    for rel, text in FILES.items():
        tree.write_text(AxiomUri.root("resources").join(rel), text, actor="user")
    return tree


def u(text: str) -> AxiomUri:
    return parse_uri(text)


def tier_bytes(tree: ContextTree) -> dict[str, bytes]:
    out = {}
    for where, _dirs, files in os.walk(tree.root):
        for name in files:
            if name in (ABSTRACT, OVERVIEW):
                path = Path(where) / name
                out[str(path.relative_to(tree.root))] = path.read_bytes()
    return out


@pytest.mark.parametrize("mode", ["deterministic", "semantic-lite"])
def test_byte_identical_across_runs_and_trees(tmp_path: Path, mode: str) -> None:
    one, two = build(tmp_path / "one"), build(tmp_path / "two")
    changed = synthesize_tiers(one, u("axiom://resources"), mode=mode, embedder=HashEmbedder())
    assert [str(c) for c in changed] == ["axiom://resources/docs/api", "axiom://resources/docs", "axiom://resources"]
    synthesize_tiers(two, u("axiom://resources"), mode=mode, embedder=HashEmbedder())
    first = tier_bytes(one)
    assert sorted(first) == [f"resources/{d}{n}" for d in ("", "docs/", "docs/api/") for n in (ABSTRACT, OVERVIEW)]
    assert first == tier_bytes(two)
    # a second run over unchanged content writes nothing
    assert synthesize_tiers(one, u("axiom://resources"), mode=mode, embedder=HashEmbedder()) == []
    assert tier_bytes(one) == first
    assert str(tmp_path) not in "".join(b.decode() for b in first.values())


def test_content_of_the_tiers(tmp_path: Path) -> None:
    tree = build(tmp_path / "c")
    synthesize_tiers(tree, u("axiom://resources/docs"))
    abstract = tree.read_text(u("axiom://resources/docs/.abstract.md"))
    assert abstract.count("\n") == 1 and abstract.endswith("\n")
    assert abstract.startswith("docs holds 3 files and 1 folder.")
    assert "This folder documents the widget." in abstract  # the README's first sentence
    overview = tree.read_text(u("axiom://resources/docs/.overview.md"))
    assert "URI: `axiom://resources/docs`" in overview
    assert "- `api/` (2 entries) — api holds 2 files and 0 folders." in overview
    assert "- `README.md` (67 bytes) — Widget docs — This folder documents the widget." in overview
    assert "- `logo.png` (13 bytes) — (binary file)" in overview
    assert overview.index("## Folders") < overview.index("## Files")
    assert "not. a. sentence" not in tree.read_text(u("axiom://resources/docs/api/.overview.md"))
    # the scope folder got its tiers (bottom-up), the untouched sibling file is listed there
    assert "- `notes.txt`" in tree.read_text(u("axiom://resources/.overview.md"))
    assert synthesize_tiers(tree, u("axiom://temp")) == []


def test_regenerated_after_a_change_and_unchanged_dirs_keep_their_mtime(tmp_path: Path) -> None:
    tree = build(tmp_path / "c")
    synthesize_tiers(tree, u("axiom://resources"))
    api_overview = tree.path_of(u("axiom://resources/docs/api/.overview.md"))
    api_abstract = tree.path_of(u("axiom://resources/docs/api/.abstract.md"))
    old = {p: os.stat(p).st_mtime_ns for p in (api_overview, api_abstract)}
    os.utime(api_overview, ns=(1_000_000_000, 1_000_000_000))
    os.utime(api_abstract, ns=(1_000_000_000, 1_000_000_000))
    tree.write_text(u("axiom://resources/docs/install.md"), "# Setup\n\nUse the new setup tool.\n", actor="user")
    changed = synthesize_tiers(tree, u("axiom://resources/docs"))
    assert [str(c) for c in changed] == ["axiom://resources/docs", "axiom://resources"]
    assert "Setup — Use the new setup tool." in tree.read_text(u("axiom://resources/docs/.overview.md"))
    assert "Installing" not in tree.read_text(u("axiom://resources/docs/.overview.md"))
    assert os.stat(api_overview).st_mtime_ns == 1_000_000_000 and os.stat(api_abstract).st_mtime_ns == 1_000_000_000
    assert old  # (the files existed before the change)


def test_a_change_deep_down_reaches_the_parents(tmp_path: Path) -> None:
    tree = build(tmp_path / "c")
    synthesize_tiers(tree, u("axiom://resources"))
    before = tree.read_bytes(u("axiom://resources/docs/.overview.md"))
    tree.write_text(u("axiom://resources/docs/api/new.md"), "# New\n\nA new call.\n", actor="user")
    changed = synthesize_tiers(tree, u("axiom://resources/docs/api"))
    # docs lists api with its entry count, so it changes; the scope folder's inputs (docs's abstract
    # and entry count) did not change, so it is left alone
    assert [str(c) for c in changed] == ["axiom://resources/docs/api", "axiom://resources/docs"]
    assert tree.read_bytes(u("axiom://resources/docs/.overview.md")) != before
    assert "(3 entries)" in tree.read_text(u("axiom://resources/docs/.overview.md"))


def test_semantic_lite_is_deterministic_and_differs_from_deterministic(tmp_path: Path) -> None:
    tree = build(tmp_path / "c")
    synthesize_tiers(tree, u("axiom://resources/docs"), mode="semantic-lite", embedder=HashEmbedder())
    first = tier_bytes(tree)
    assert "## Key sentences" in tree.read_text(u("axiom://resources/docs/.overview.md"))
    for path in tree.root.rglob(".overview.md"):
        path.unlink()
    for path in tree.root.rglob(".abstract.md"):
        path.unlink()
    synthesize_tiers(tree, u("axiom://resources/docs"), mode="semantic-lite", embedder=HashEmbedder())
    assert tier_bytes(tree) == first
    # another mode or another embedder is another input: the tiers are regenerated
    assert synthesize_tiers(tree, u("axiom://resources/docs")) != []
    assert "## Key sentences" not in tree.read_text(u("axiom://resources/docs/.overview.md"))
    assert synthesize_tiers(tree, u("axiom://resources/docs"), mode="semantic-lite", embedder=HashEmbedder(64)) != []


def test_caps_keep_tiers_small(tmp_path: Path) -> None:
    tree = ContextTree(tmp_path / "c")
    big = u("axiom://resources/big")
    long_sentence = "word " * 5000
    for i in range(MAX_ENTRIES + 25):
        tree.write_text(big.join(f"f{i:04d}.md"), f"# {'T' * 500}\n\n{long_sentence}.\n" + "x" * 50_000, actor="user")
    synthesize_tiers(tree, big)
    abstract = tree.read_text(big.join(ABSTRACT))
    overview = tree.read_text(big.join(OVERVIEW))
    assert len(abstract) <= MAX_ABSTRACT_CHARS + 1
    assert "(and 25 more entries)" in abstract and "… and 25 more entries, not described here." in overview
    assert overview.count("\n- `") == MAX_ENTRIES
    assert len(overview) < 150_000


def test_hostile_text_is_neutralized(tmp_path: Path) -> None:
    tree = ContextTree(tmp_path / "c")
    hostile = "# Title \x1b[2J\u202e\n\nEvil \x1b]0;pwned\x07 text.\n"
    tree.write_text(u("axiom://resources/d/x.md"), hostile, actor="user")
    synthesize_tiers(tree, u("axiom://resources/d"))
    overview = tree.read_text(u("axiom://resources/d/.overview.md"))
    assert "\x1b" not in overview and "\u202e" not in overview and "\x07" not in overview
    assert "\\x1b" in overview


def test_modes_and_settings() -> None:
    tree_free_errors = [
        ({"AXIOMME_TIER_SYNTHESIS": "fancy"}, "AXIOMME_TIER_SYNTHESIS='fancy' is not supported"),
        ({"AXIOMME_TIER_SYNTHESIS": "semantic"}, "use one of: deterministic, semantic-lite"),
    ]
    for env, message in tree_free_errors:
        with pytest.raises(ConfigError, match=message):
            ContextSettings.from_env(env)
    assert ContextSettings.from_env({}).tier_synthesis == "deterministic"
    assert ContextSettings.from_env({"AXIOMME_TIER_SYNTHESIS": " Semantic-Lite "}).tier_synthesis == "semantic-lite"
    assert ContextSettings.from_env({"AXIOMME_TIER_SYNTHESIS": ""}).tier_synthesis == "deterministic"


def test_bad_mode_and_missing_embedder_are_config_errors(tmp_path: Path) -> None:
    tree = build(tmp_path / "c")
    with pytest.raises(ConfigError):
        synthesize_tiers(tree, u("axiom://resources"), mode="fancy")
    with pytest.raises(ConfigError):
        synthesize_tiers(tree, u("axiom://resources"), mode="semantic-lite")
