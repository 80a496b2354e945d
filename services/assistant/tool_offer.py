"""Offer the tools that fit: the enabled tools ranked by relevance to the request, the best offered
within the tools' budget (part 2 of the one budget, :mod:`services.models.window_budget`).

Each enabled tool is a small document of three fields: its name (the words of ``builtin:fs:read_text``
or ``list_directory``), its argument names, and its description. The request (the operator's message,
and with less weight the recent turns) is scored against them like BM25F, with two changes because a
server-written (MCP) description is untrusted text:

- a description counts each word **once** (binary presence): repeating ``file file file`` buys nothing;
- its weight is normalised by the number of *distinct* words it has, so a description that lists the
  whole vocabulary is scored as a long document (each match worth less), not as a good one.

Words are split on ``_``, ``:``, ``-``, case changes and non-letters, lower-cased, lightly stemmed
(``files`` → ``file``, ``listing`` → ``list``) and a small table of everyday synonyms maps to the words
tools use (``folder`` → ``directory``, ``download`` → ``fetch``). No model is loaded for this.

The selection (:func:`select`) keeps the tools the profile names (and, later, a workspace command's
tools: ``pinned``) first whatever they cost, saying so when those alone exceed the budget; then the
ranked tools, best first, each whole, while they fit; a tool that matches nothing is offered only when
every enabled tool fits (as without ranking). Same input, same output. Pure: no I/O, imports nothing of
Aries.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TOOL_BUDGET = 1200
"""Tokens the tool definitions may take in a request unless the model's settings say otherwise."""

RECENT_WEIGHT = 0.4  # a word of the recent turns counts this much against one of the message
NAME_WEIGHT = 3.0
ARGS_WEIGHT = 1.5
DESCRIPTION_WEIGHT = 1.0
K1 = 1.2
B = 0.75

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from get give how i in into is it its me my of on or please "
    "show tell that the this to up use using what when where which with you your all any some there their "
    "then than them these those was were will would could should may might just also via out now".split()
)
SYNONYMS: Mapping[str, str] = {
    "folder": "directory",
    "folders": "directory",
    "dir": "directory",
    "subfolder": "directory",
    "ls": "list",
    "cat": "read",
    "open": "read",
    "download": "fetch",
    "website": "web",
    "webpage": "web",
    "url": "web",
    "internet": "web",
    "online": "web",
    "execute": "run",
    "launch": "run",
    "grep": "search text",
    "hello": "greet",
    "overwrite": "write",
    "find": "search",
    "lookup": "search",
    "rename": "move",
    "mkdir": "create",
    "clock": "time",
    "timezone": "time",
    "save": "write",
    "diff": "patch",
    "stop": "kill",
    "terminate": "kill",
    "revert": "restore",
    "undo": "restore",
}


def stem(word: str) -> str:
    """A light suffix stripper (enough for the vocabulary of tools): ``directories`` → ``directory``,
    ``files`` → ``file``, ``listing`` → ``list``, ``created`` → ``creat``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 4 and word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The words of ``text`` as the ranking sees them (split, lower-cased, synonyms mapped, stemmed,
    stopwords and single letters dropped), in order, repeats kept."""
    out: list[str] = []
    for raw in _WORD.findall(text):
        word = raw.lower()
        if word in STOPWORDS or len(word) < 2:
            continue
        out.extend(stem(each) for each in SYNONYMS.get(word, word).split())
    return out


_PATH = re.compile(r"(?:^|\s)(?:[\w.-]*/[\w./-]*|[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5})(?=[\s,;:!?)]|$)")
PATH_WORDS = ("file", "path")
"""A message that names a path (``notes/todo.md``, ``src/``) is about files: these words are added."""


@dataclass(frozen=True)
class ToolDoc:
    """One enabled tool as the ranking sees it."""

    tool_id: str
    name: str  # the provider-side name sent
    description: str
    arg_names: tuple[str, ...]
    tokens: int  # its definition's cost (estimated tokens)

    @classmethod
    def of(cls, tool_id: str, name: str, description: str, parameters: Any, tokens: int) -> ToolDoc:
        props = parameters.get("properties") if isinstance(parameters, Mapping) else None
        args = tuple(str(key) for key in props) if isinstance(props, Mapping) else ()
        return cls(tool_id, name, description, args, tokens)


@dataclass(frozen=True)
class Pick:
    """One enabled tool: its score, cost and whether (and why) it is offered."""

    tool_id: str
    score: float
    tokens: int
    offered: bool
    why: str  # "named by the profile", "matched: read, file", "relevant, over the budget", "no match", …
    matched: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool_id,
            "offered": self.offered,
            "score": round(self.score, 3),
            "tokens": self.tokens,
            "why": self.why,
        }


@dataclass(frozen=True)
class Selection:
    """What :func:`select` decided: every enabled tool, ranked, each offered or not, and why."""

    picks: tuple[Pick, ...]
    budget: int  # the tokens the tool definitions could take
    pinned_over: bool = False  # the pinned tools alone exceed the budget (they are offered anyway)
    pinned: tuple[str, ...] = field(default_factory=tuple)

    @property
    def offered(self) -> list[str]:
        return [pick.tool_id for pick in self.picks if pick.offered]

    @property
    def tokens(self) -> int:
        return sum(pick.tokens for pick in self.picks if pick.offered)

    @property
    def all_offered(self) -> bool:
        return all(pick.offered for pick in self.picks)

    def note(self) -> str | None:
        """One line for the transcript when not every enabled tool is offered (None when all are)."""
        if self.all_offered:
            return None
        left = len(self.picks) - len(self.offered)
        line = (
            f"Offered {len(self.offered)} of {len(self.picks)} enabled tools ({self.tokens:,} of a "
            f"{self.budget:,}-token budget); {left} left out, less relevant or over the budget (/tools offered)."
        )
        if self.pinned_over:
            line += f" The tools the profile names alone exceed the budget: all {len(self.pinned)} are offered."
        return line

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "tokens": self.tokens,
            "offered": self.offered,
            "pinned_over_budget": self.pinned_over,
            "tools": [pick.to_dict() for pick in self.picks],
        }

    def lines(self) -> list[str]:
        """``/tools offered``: one tool a line, offered first (in rank order), then the others."""
        head = f"{len(self.offered)} of {len(self.picks)} enabled tools offered, {self.tokens:,}/{self.budget:,} tokens"
        if self.pinned_over:
            head += " (the profile's tools alone exceed the budget)"
        rows = [head]
        for pick in sorted(self.picks, key=lambda p: not p.offered):
            mark = "+" if pick.offered else "-"
            rows.append(f"{mark} {pick.tool_id}  {pick.tokens:,} tok  score {pick.score:.2f}  {pick.why}")
        return rows


class Ranker:
    """The index over one set of tools (built once per offer; :meth:`score` per request)."""

    def __init__(self, docs: Sequence[ToolDoc]) -> None:
        self.docs = list(docs)
        self.fields = [
            (
                frozenset(terms(" ".join((doc.tool_id, doc.name)))),
                frozenset(term for arg in doc.arg_names for term in terms(arg)),
                frozenset(terms(doc.description)),
            )
            for doc in self.docs
        ]
        self.variety = [variety(terms(doc.description)) for doc in self.docs]
        self.average = max(1.0, sum(len(desc) for _, _, desc in self.fields) / max(1, len(self.fields)))
        frequency: dict[str, int] = {}
        for name, args, desc in self.fields:
            for term in name | args | desc:
                frequency[term] = frequency.get(term, 0) + 1
        count = len(self.docs)
        self.idf = {term: math.log(1 + (count - n + 0.5) / (n + 0.5)) for term, n in frequency.items()}

    def score(self, query: Mapping[str, float]) -> list[tuple[float, tuple[str, ...]]]:
        """Each tool's score against ``query`` (term → weight) and the query terms it matched."""
        out = []
        for (name, args, desc), varied in zip(self.fields, self.variety, strict=True):
            norm = K1 * (1 - B + B * len(desc) / self.average) / varied
            total, matched = 0.0, []
            for term, weight in query.items():
                idf = self.idf.get(term)
                if idf is None:
                    continue
                tf = NAME_WEIGHT * (term in name) + ARGS_WEIGHT * (term in args)
                tf += DESCRIPTION_WEIGHT * (term in desc) / (norm / K1)
                if tf:
                    total += weight * idf * tf * (K1 + 1) / (tf + K1)
                    matched.append(term)
            out.append((total, tuple(matched)))
        return out


def variety(words: Sequence[str]) -> float:
    """How little a description repeats itself: 1 for ordinary text (at least half of its words
    distinct), down to near 0 for one that repeats a list of words (its matches count that much)."""
    if not words:
        return 1.0
    return min(1.0, 2 * len(set(words)) / len(words))


def query_terms(message: str, recent: Iterable[str] = ()) -> dict[str, float]:
    """The request's words and their weights: the message's at 1, the recent turns' at
    :data:`RECENT_WEIGHT` (each word once, at its highest weight)."""
    weights: dict[str, float] = {}
    for text in recent:
        for term in terms(text):
            weights[term] = RECENT_WEIGHT
    for term in terms(message):
        weights[term] = 1.0
    if _PATH.search(message):
        for term in PATH_WORDS:
            weights.setdefault(term, RECENT_WEIGHT)
    return weights


def select(
    docs: Sequence[ToolDoc],
    message: str,
    recent: Iterable[str] = (),
    *,
    budget: int = DEFAULT_TOOL_BUDGET,
    pinned: Iterable[str] = (),
    ranker: Ranker | None = None,
) -> Selection:
    """The tools to offer for ``message`` within ``budget`` tokens (see the module docstring)."""
    ranker = ranker or Ranker(docs)
    scored = ranker.score(query_terms(message, recent))
    order = sorted(range(len(docs)), key=lambda i: (-scored[i][0], i))
    pinned_ids = [doc.tool_id for doc in docs if doc.tool_id in set(pinned)]
    decided: dict[str, Pick] = {}
    used = 0
    for i in order:
        doc, (score, matched) = docs[i], scored[i]
        if doc.tool_id in pinned_ids:
            decided[doc.tool_id] = Pick(doc.tool_id, score, doc.tokens, True, "named by the profile", matched)
            used += doc.tokens
    pinned_over = used > budget
    everything = sum(doc.tokens for doc in docs) <= budget  # all fit: all are offered, as without ranking
    for i in order:
        doc, (score, matched) = docs[i], scored[i]
        if doc.tool_id in decided:
            continue
        fits = used + doc.tokens <= budget and (score > 0 or everything)
        used += doc.tokens if fits else 0
        if score > 0:
            why = f"matched: {', '.join(matched[:4])}" if fits else "relevant, over the budget"
        else:
            why = "all enabled tools fit" if fits else "no match"
        decided[doc.tool_id] = Pick(doc.tool_id, score, doc.tokens, fits, why, matched)
    picks = tuple(decided[docs[i].tool_id] for i in order)
    return Selection(picks, budget, pinned_over, tuple(pinned_ids))


TOP_LEFT_OUT = 5


def compact(offered: Mapping[str, Any]) -> dict[str, Any]:
    """:meth:`Selection.to_dict` (with ``sent``) as an answer's ``usage.tools_offered`` keeps it in the
    transcript: the tools offered with their reasons, and how many were left out with the best of them."""
    rows = [row for row in offered.get("tools", []) if isinstance(row, Mapping)]
    kept = [row for row in rows if row.get("offered")]
    left = [row for row in rows if not row.get("offered")]
    return {
        "budget": offered.get("budget"),
        "tokens": offered.get("tokens"),
        "sent": offered.get("sent", True),
        "pinned_over_budget": offered.get("pinned_over_budget", False),
        "tools": kept + left[:TOP_LEFT_OUT],
        "left_out": len(left),
    }


def offered_lines(recorded: Mapping[str, Any]) -> list[str]:
    """``/tools offered``: what an answer's ``usage.tools_offered`` (:func:`compact`) says, one tool a line."""
    rows = [row for row in recorded.get("tools", []) if isinstance(row, Mapping)]
    kept = [row for row in rows if row.get("offered")]
    left = int(recorded.get("left_out") or 0)
    head = (
        f"{len(kept)} tools offered ({recorded.get('tokens', 0):,} of a {recorded.get('budget', 0):,}-token "
        f"budget), {left} enabled tools left out (less relevant, or over the budget)."
    )
    if recorded.get("pinned_over_budget"):
        head += " The tools the profile names alone exceed the budget: all of them are offered."
    if not recorded.get("sent", True):
        head += " The window had no room for them: none was sent."
    out = [head]
    for row in rows:
        mark = "+" if row.get("offered") else "-"
        out.append(f"{mark} {row.get('tool')}  {row.get('tokens', 0):,} tok  {row.get('why', '')}")
    if left > len(rows) - len(kept):
        out.append(f"  … and {left - (len(rows) - len(kept))} more left out")
    return out


def named_tools(patterns: Sequence[str] | None) -> frozenset[str]:
    """The tool ids a profile names outright in ``tools.enable`` (not a class, not a glob): always offered."""
    if not patterns:
        return frozenset()
    return frozenset(p for p in patterns if ":" in p and not any(ch in p for ch in "*?["))


__all__ = [
    "DEFAULT_TOOL_BUDGET",
    "Pick",
    "Ranker",
    "Selection",
    "ToolDoc",
    "compact",
    "named_tools",
    "offered_lines",
    "query_terms",
    "select",
    "stem",
    "terms",
    "variety",
]
