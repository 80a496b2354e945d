"""The value types of find/search: the filter, a hit, a result, and the directory view of the
candidates that search walks (:func:`directories`)."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from services.context.traces import Trace
from services.context.uri import CORE_SCOPES, AxiomUri, parse_uri
from services.errors import InvalidInput

if TYPE_CHECKING:
    from services.retrieval.models import Hit


@dataclass(frozen=True)
class SearchFilter:
    """Which files may be hits: a scope, a URI prefix, file types (suffixes, no dot), levels."""

    scope: str | None = None
    prefix: str | None = None
    file_types: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.scope is not None and self.scope not in CORE_SCOPES:
            raise InvalidInput(f"scope {self.scope!r} is not searchable; use one of: {', '.join(CORE_SCOPES)}")
        if self.prefix is not None:
            parse_uri(self.prefix)
        bad = [level for level in self.levels if level not in ("L0", "L1", "L2")]
        if bad:
            raise InvalidInput(f"unknown level {bad[0]!r}; use L0, L1 or L2")

    def admits(self, uri: AxiomUri, key: str, level: str, *, navigation: bool = False) -> bool:
        """Scope and prefix always; levels and file types only for hits (not for ``navigation``)."""
        if self.scope is not None and uri.scope != self.scope:
            return False
        if self.prefix is not None and not (key == self.prefix or key.startswith(self.prefix.rstrip("/") + "/")):
            return False
        if navigation:
            return True
        if self.levels and level not in self.levels:
            return False
        return not self.file_types or uri.name.rsplit(".", 1)[-1].lower() in self.file_types


@dataclass(frozen=True)
class ContextHit:
    uri: str
    score: float
    snippet: str
    handle: str
    level: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RetrievalResult:
    hits: list[ContextHit]
    trace: Trace

    def to_dict(self) -> dict[str, Any]:
        return {"hits": [hit.to_dict() for hit in self.hits], "trace": self.trace.to_dict()}


@dataclass
class Cand:
    uri: AxiomUri
    key: str
    level: str
    directory: AxiomUri
    score: float
    hit: Hit


@dataclass
class Dirs:
    """The directory view of the candidates (keys are URI strings)."""

    tier: dict[str, float] = field(default_factory=dict)
    best: dict[str, float] = field(default_factory=dict)
    best_l2: dict[str, float] = field(default_factory=dict)
    files: dict[str, list[Cand]] = field(default_factory=dict)
    children: dict[str, dict[str, AxiomUri]] = field(default_factory=dict)
    uris: dict[str, AxiomUri] = field(default_factory=dict)

    def own(self, key: str) -> float:
        return (self.tier.get(key, 0.0) + self.best.get(key, 0.0)) / 2


@functools.lru_cache(maxsize=65536)
def text_of(uri: AxiomUri) -> str:
    return str(uri)


@functools.lru_cache(maxsize=65536)
def parent_of(uri: AxiomUri) -> AxiomUri:
    return uri.parent


@functools.lru_cache(maxsize=65536)
def chain_of(uri: AxiomUri) -> tuple[AxiomUri, ...]:
    """``uri`` and its ancestors, nearest first."""
    return (uri, *uri.ancestors)


def directories(cands: list[Cand], target: AxiomUri | None) -> Dirs:
    """Tier scores, best scores below, L2 files and children of every directory holding candidates."""
    dirs = Dirs()
    for cand in cands:
        here = cand.directory
        where = text_of(here)
        dirs.uris.setdefault(where, here)
        if cand.level == "L2":
            dirs.files.setdefault(where, []).append(cand)
        else:
            dirs.tier[where] = max(dirs.tier.get(where, 0.0), cand.score)
        chain = chain_of(here)
        for position, node in enumerate(chain):
            key = text_of(node)
            dirs.uris.setdefault(key, node)
            dirs.best[key] = max(dirs.best.get(key, 0.0), cand.score)
            if cand.level == "L2":
                dirs.best_l2[key] = max(dirs.best_l2.get(key, 0.0), cand.score)
            if position:
                dirs.children.setdefault(key, {})[text_of(chain[position - 1])] = chain[position - 1]
            if target is not None and node == target:
                break
    return dirs
