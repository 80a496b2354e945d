"""The grant matcher against a generated corpus (tests/grants/corpus.py): at least 1,000 argv and path
cases, each with its expected decision; ``ls *`` allows none of the dangerous set."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.grants.matcher import matches
from tests.grants.corpus import Case, build


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Case]]:
    base = tmp_path_factory.mktemp("corpus")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    return root, build(root, outside)


def test_the_corpus_is_large_and_every_case_is_decided_as_expected(corpus: tuple[Path, list[Case]]) -> None:
    root, cases = corpus
    assert len(cases) >= 1000
    assert sum(c.expected for c in cases) >= 300 and sum(not c.expected for c in cases) >= 700
    wrong = [
        f"{c.name}: expected {'allow' if c.expected else 'no match'}, got {verdict.reason}"
        for c in cases
        if bool(verdict := matches(c.pattern, c.facts, c.args, [root])) != c.expected
    ]
    assert not wrong, f"{len(wrong)} of {len(cases)} cases decided wrongly:\n" + "\n".join(wrong[:40])


def test_ls_star_allows_none_of_the_dangerous_set(corpus: tuple[Path, list[Case]]) -> None:
    root, cases = corpus
    dangerous = [c for c in cases if c.name.startswith("ls *:") and not c.expected]
    kinds = {c.name.split(":", 1)[1].split()[0] for c in dangerous}
    assert {"option", "wrapped", "outside", "environment", "metacharacter", "look-alike"} <= kinds
    assert len(dangerous) >= 200
    assert not [c.name for c in dangerous if matches(c.pattern, c.facts, c.args, [root])]


def test_a_root_that_changed_since_is_honoured(corpus: tuple[Path, list[Case]]) -> None:
    """The same plain call stops matching when its path leaves the roots now in force."""
    root, cases = corpus
    case = next(c for c in cases if c.name == "ls *: plain ('docs/x.md',)")
    assert matches(case.pattern, case.facts, {}, [root])
    assert not matches(case.pattern, case.facts, {}, [root / "src"])
