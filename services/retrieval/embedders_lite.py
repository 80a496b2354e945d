"""The ``semantic-lite`` embedder: a local, dependency-light lexical embedding, no model, no download.

Pure Python, deterministic in every process and on every platform (no ``hash()``, whose seed
changes per process).  A text becomes two bags of features, each hashed into the same fixed-size
space with signed feature hashing (blake2b):

* **words**: Unicode-normalized (NFKD, combining marks dropped, case-folded), split on anything
  that is not a letter or digit, a built-in English stop list removed, each reduced by a light
  suffix stemmer (plurals, ``-ing``, ``-ed``, ``-ly``, ``-ation``… so ``cells``/``cell`` and
  ``studies``/``study`` meet);
* **character 4-grams** of ``<word>`` (boundary-marked, content words only): morphology,
  compounds and spelling variants the stemmer misses (``diffusion``/``diffusivity``).

Term frequency is sublinear (``1 + ln tf``).  Each bag is L2-normalized on its own and the two are
mixed with fixed weights (words 1, characters 1.3), so that a long text's n-grams do not drown its
words; the sum is L2-normalized.  The dimension is fixed (512).

Measured on the SciFact subset (docs/BENCHMARKS.md): word bigrams, a second n-gram size, the
unstemmed word beside its stem and a word-length weight (a corpus-free stand-in for IDF) each made
dense nDCG@10 *worse* at 512 dimensions — more features, more hash collisions — so none is used.

``model_id`` names the algorithm and its version: any change to the features, weights, stop list,
stemmer or dimension must bump :data:`VERSION`, so that an index built with the old vectors says
"rebuild needed" instead of mixing two vector spaces.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence

VERSION = 1
LITE_DIM = 512
WORD_WEIGHT = 1.0
CHAR_WEIGHT = 1.3
CHAR_SIZE = 4
_CACHE_LIMIT = 1 << 18

STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either else etc even
    ever every few for from further had has have having he her here hers herself him himself his how
    however i if in into is it its itself just may me might more most much must my myself neither no
    nor not now of off on once only or other ought our ours ourselves out over own per rather same
    shall she should since so some such than that the their theirs them themselves then there these
    they this those though through thus to too under until up upon us very via was we were what when
    where whether which while who whom whose why will with within without would yet you your yours
    yourself yourselves
    """.split()
)

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ational", "ate"),
    ("ization", "ize"),
    ("fulness", "ful"),
    ("iveness", "ive"),
    ("ousness", "ous"),
    ("ations", "ate"),
    ("ation", "ate"),
    ("ments", "ment"),
    ("ities", "ity"),
    ("ingly", ""),
    ("edly", ""),
    ("sses", "ss"),
    ("ness", ""),
    ("ies", "y"),
    ("ing", ""),
    ("ied", "y"),
    ("ly", ""),
    ("ed", ""),
    ("es", "e"),
    ("s", ""),
)


def normalize_text(text: str) -> str:
    """NFKD, combining marks dropped, case-folded: ``Café`` and ``cafe`` are one word."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def stem(word: str) -> str:
    """A light, deterministic suffix stripper (not Porter: a handful of English inflections)."""
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            base = word[: len(word) - len(suffix)] + replacement
            if suffix in ("ing", "ed") and len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # running → run, stopped → stop
            return base
    return word


class SemanticLiteEmbedder:
    """Signed feature hashing of stemmed words, word bigrams and character n-grams (see the module)."""

    backend = "lite"
    quantization = "none"

    def __init__(self, dim: int = LITE_DIM) -> None:
        if dim < 16:
            raise ValueError("semantic-lite needs at least 16 dimensions")
        self.dim = dim
        self.model_id = f"semantic-lite-v{VERSION}-{dim}"
        self._slots: dict[str, tuple[int, float]] = {}

    def _slot(self, feature: str) -> tuple[int, float]:
        slot = self._slots.get(feature)
        if slot is None:
            value = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
            slot = (value % self.dim, 1.0 if (value >> 63) & 1 else -1.0)
            if len(self._slots) >= _CACHE_LIMIT:
                self._slots.clear()
            self._slots[feature] = slot
        return slot

    def _bag(self, counts: dict[str, float]) -> dict[int, float]:
        """Sublinear tf, hashed into slots, L2-normalized (an empty bag stays empty)."""
        vector: dict[int, float] = {}
        for feature in counts:  # insertion order: the text's order, the same in every process
            index, sign = self._slot(feature)
            vector[index] = vector.get(index, 0.0) + sign * counts[feature]
        norm = math.sqrt(sum(value * value for value in vector.values()))
        return {index: value / norm for index, value in vector.items()} if norm > 0 else {}

    def features(self, text: str) -> tuple[dict[str, float], dict[str, float]]:
        """The weighted word and character n-gram bags of ``text`` (before hashing)."""
        words: dict[str, float] = {}
        chars: dict[str, float] = {}
        for token in _TOKEN.findall(normalize_text(text)):
            if token in STOP_WORDS or (len(token) == 1 and not token.isdigit()):
                continue
            root = stem(token)
            words[root] = words.get(root, 0.0) + 1.0
            marked = f"<{token}>"
            for start in range(max(len(marked) - CHAR_SIZE + 1, 1)):
                gram = "#" + marked[start : start + CHAR_SIZE]  # "#": never equal to a word feature
                chars[gram] = chars.get(gram, 0.0) + 1.0
        return (
            {key: 1.0 + math.log(tf) for key, tf in words.items()},
            {key: 1.0 + math.log(tf) for key, tf in chars.items()},
        )

    def _vector(self, text: str) -> list[float]:
        words, chars = self.features(text)
        vector = [0.0] * self.dim
        for weight, bag in ((WORD_WEIGHT, words), (CHAR_WEIGHT, chars)):
            for index, value in self._bag(bag).items():
                vector[index] += weight * value
        return _unit(vector)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _unit(vector: Iterable[float]) -> list[float]:
    values = list(vector)
    norm = math.sqrt(sum(x * x for x in values))
    return [x / norm for x in values] if norm > 0 else values


__all__ = ["LITE_DIM", "STOP_WORDS", "VERSION", "SemanticLiteEmbedder", "normalize_text", "stem"]
