"""Query normalization of find/search (``AXIOMME_QUERY_NORMALIZER``, default on).

:func:`normalize_query` turns the query text into a list of terms:

1. the text is split into words (letters and digits; everything else separates);
2. **folding** (normalizer on): each word is case-folded (``str.casefold``) and its diacritics are
   removed (NFKD, combining marks dropped): ``Zürich`` → ``zurich``, ``CAFÉ`` → ``cafe``.  When
   folding changed a word beyond its case, the case-folded original is kept too (``zürich``), so
   documents written with the accent still match the lexical index (which lower-cases but does not
   fold accents);
3. **aliases** (normalizer on): each folded term found in the alias table adds its expansions,
   folded the same way (``k8s`` → ``kubernetes``).  Expansions are not expanded again.

The result keeps first-seen order without repeats; the normalized query is the terms joined by one
space.  Normalizer off: the query is passed through as typed (only whitespace collapsed).

The alias table is a YAML mapping ``term: [expansion, ...]`` (or ``term: expansion``), read from
``AXIOMME_QUERY_ALIASES`` or else ``context_aliases.yaml`` in the workspace folder; keys and values
are folded when loaded.  A malformed table is one :class:`~services.errors.ConfigError` naming it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from services.errors import ConfigError

ALIASES_FILE = "context_aliases.yaml"
"""The alias table's default name, in the workspace folder."""
MAX_ALIASES = 10_000
_WORD = re.compile(r"\w+", re.UNICODE)


def fold(word: str) -> str:
    """Case and diacritics folding of one word."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalize_query(text: str, *, enabled: bool = True, aliases: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """The normalized query (see the module docstring)."""
    if not enabled:
        return " ".join(text.split())
    terms: list[str] = []
    for word in _WORD.findall(text):
        folded = fold(word)
        terms.append(folded)
        lowered = word.casefold()
        if lowered != folded:
            terms.append(lowered)
        for expansion in (aliases or {}).get(folded, ()):
            terms.append(expansion)
    return " ".join(dict.fromkeys(term for term in terms if term))


def load_aliases(path: Path) -> dict[str, tuple[str, ...]]:
    """The folded alias table of ``path`` (empty when the file does not exist)."""
    from services.files.yamlio import load_yaml

    if not path.is_file():
        return {}
    data = load_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the alias table must be a mapping of term: [expansions]", setting="aliases")
    table: dict[str, tuple[str, ...]] = {}
    for key, value in data.items():
        values = [value] if isinstance(value, str) else value
        if (
            not isinstance(key, str | int)
            or not isinstance(values, list)
            or not all(isinstance(item, str | int) for item in values)
        ):
            raise ConfigError(f"{path}: alias {key!r}: expected a term and a list of terms", setting="aliases")
        expansions = [fold(w) for item in values for w in _WORD.findall(str(item))]
        table[fold(str(key))] = tuple(dict.fromkeys(expansions))
        if len(table) > MAX_ALIASES:
            raise ConfigError(f"{path}: more than {MAX_ALIASES} aliases", setting="aliases")
    return table
