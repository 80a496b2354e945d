"""L0/L1 tier files: ``.abstract.md`` (a one-paragraph abstract) and ``.overview.md`` (a structured
overview) in every navigable directory, beside its L2 files (the originals).

:func:`synthesize_tiers` regenerates them bottom-up: every folder below the one that changed
(deepest first), that folder, then its parents up to the scope folder (a parent's overview quotes its
children's abstracts).  Internal scopes (``temp``, ``queue``) have no tiers.

Determinism: a tier file is a pure function of the folder's *inputs* — its name, its sorted entries,
each file's size and the first bytes of its text, each subfolder's abstract and entry count, the mode
and the embedder — with no times, absolute paths or host details.  A SHA-256 of those inputs is kept
in the last line of ``.overview.md`` (an HTML comment, invisible when rendered); a folder whose
inputs hash the same is not visited again, and a tier file whose new bytes equal the old ones is not
rewritten (its mtime is kept).  Two trees with the same content get byte-identical tier files.

Modes (``AXIOMME_TIER_SYNTHESIS``, :mod:`services.context.settings`):

* ``deterministic``: the abstract names what the folder holds, the titles of its first entries and
  the first sentence of its README/index (or first file);
* ``semantic-lite``: the abstract is the :data:`SEMANTIC_PICKS` sentences nearest the centroid of the
  folder's candidate sentences under the embedder passed in (ties broken by order), and the overview
  lists them as key sentences.  Same embedder, same bytes.

Caps (tiers stay small whatever the folder holds): :data:`PREFIX_BYTES` read per file,
:data:`MAX_ENTRIES` entries described per overview (the rest are counted), titles cut at
:data:`MAX_TITLE_CHARS`, sentences at :data:`MAX_SENTENCE_CHARS`, the abstract at
:data:`MAX_ABSTRACT_CHARS`, :data:`SENTENCES_PER_FILE` candidate sentences per file.  All text taken
from files goes through :func:`services.text.textsafe.neutralize` (single line).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from services.context.errors import ContextError, ResourceNotFound, WrongKind
from services.context.tree import ContextTree, Entry
from services.context.uri import INTERNAL_SCOPES, AxiomUri
from services.errors import ConfigError
from services.hashing import sha256_hex
from services.text.textsafe import neutralize

ABSTRACT = ".abstract.md"
OVERVIEW = ".overview.md"
TIER_VERSION = 1
PREFIX_BYTES = 8192
"""Bytes read from the start of each file."""
MAX_ENTRIES = 200
"""Entries described in one overview; further entries are only counted."""
MAX_TITLE_CHARS = 120
MAX_SENTENCE_CHARS = 240
MAX_ABSTRACT_CHARS = 600
SENTENCES_PER_FILE = 8
"""Candidate sentences per file for semantic-lite."""
SEMANTIC_PICKS = 3
"""Sentences in a semantic-lite abstract."""
_TOPICS = 8
_MARKER = re.compile(r"<!-- axiom-tiers v(\d+) sha256=([0-9a-f]{64}) -->\n?\Z")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LEAD = ("readme", "index", "overview", "summary")


class SentenceEmbedder(Protocol):
    """What semantic-lite needs of an embedder (``services.retrieval.embedders`` ones fit)."""

    model_id: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class _Item:
    name: str
    kind: str  # "file" | "dir"
    size: int  # bytes for a file, visible entries for a folder
    title: str
    sentences: tuple[str, ...]


def _cap(text: str, limit: int) -> str:
    text = neutralize(" ".join(text.split()), single_line=True)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def _sentences(text: str, limit: int) -> tuple[str, ...]:
    """Sentences of the prose of ``text`` (headings, code fences, tables and rules skipped)."""
    paragraphs: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or not stripped or _HEADING.match(line) or stripped.startswith(("|", "---", "<!--")):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(stripped.lstrip("-*> ").strip())
    if current:
        paragraphs.append(" ".join(current))
    out: list[str] = []
    for paragraph in paragraphs:
        for sentence in _SENTENCE_END.split(paragraph):
            capped = _cap(sentence, MAX_SENTENCE_CHARS)
            if len(capped) >= 3 and capped not in out:
                out.append(capped)
                if len(out) >= limit:
                    return tuple(out)
    return tuple(out)


def _file_item(tree: ContextTree, entry: Entry) -> _Item:
    data = tree.read_bytes(entry.uri, limit=PREFIX_BYTES)
    if b"\x00" in data:
        return _Item(entry.name, "file", entry.size, "", ("(binary file)",))
    text = data.decode("utf-8", errors="replace")
    title = ""
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            title = _cap(match.group(1), MAX_TITLE_CHARS)
            break
    return _Item(entry.name, "file", entry.size, title, _sentences(text, SENTENCES_PER_FILE))


def _dir_item(tree: ContextTree, entry: Entry) -> _Item:
    count = len(tree.ls(entry.uri))
    try:
        abstract = tree.read_text(entry.uri.join(ABSTRACT))
    except (ResourceNotFound, WrongKind):
        abstract = ""
    return _Item(entry.name, "dir", count, "", (_cap(abstract, MAX_SENTENCE_CHARS),) if abstract.strip() else ())


def _label(uri: AxiomUri) -> str:
    return _cap(uri.name, MAX_TITLE_CHARS).replace("`", "'")


def _count(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _lead_sentence(items: Sequence[_Item]) -> str:
    files = [i for i in items if i.kind == "file" and i.sentences and i.sentences[0] != "(binary file)"]
    files.sort(key=lambda i: (not i.name.lower().startswith(_LEAD), i.name))
    return files[0].sentences[0] if files else ""


def _summary(uri: AxiomUri, items: Sequence[_Item], total: int) -> str:
    files = sum(1 for i in items if i.kind == "file")
    dirs = sum(1 for i in items if i.kind == "dir")
    if total == 0:
        return f"{_label(uri)} is empty."
    more = total - len(items)
    counts = f"{_count(files, 'file')} and {_count(dirs, 'folder')}" + (f" (and {more} more entries)" if more else "")
    return f"{_label(uri)} holds {counts}."


def _abstract(uri: AxiomUri, items: Sequence[_Item], total: int, picks: Sequence[str]) -> str:
    parts = [_summary(uri, items, total)]
    if picks:
        parts.extend(picks)
    else:
        topics = [i.title or (i.name + ("/" if i.kind == "dir" else "")) for i in items[:_TOPICS]]
        if topics:
            extra = " …" if len(items) > _TOPICS else ""
            parts.append("Topics: " + "; ".join(_cap(t, MAX_TITLE_CHARS) for t in topics) + extra + ".")
        lead = _lead_sentence(items)
        if lead:
            parts.append(lead)
    return _cap(" ".join(parts), MAX_ABSTRACT_CHARS) + "\n"


def _overview(uri: AxiomUri, items: Sequence[_Item], total: int, picks: Sequence[str], digest: str) -> str:
    lines = [f"# {_label(uri)}", "", f"URI: `{uri}`", "", _summary(uri, items, total)]
    dirs = [i for i in items if i.kind == "dir"]
    files = [i for i in items if i.kind == "file"]
    if dirs:
        lines += ["", "## Folders", ""]
        for item in dirs:
            about = f" — {item.sentences[0]}" if item.sentences else ""
            name = _cap(item.name, MAX_TITLE_CHARS).replace("`", "'")
            lines.append(f"- `{name}/` ({_count(item.size, 'entry', 'entries')}){about}")
    if files:
        lines += ["", "## Files", ""]
        for item in files:
            about = "".join(f" — {part}" for part in (item.title, item.sentences[0] if item.sentences else "") if part)
            name = _cap(item.name, MAX_TITLE_CHARS).replace("`", "'")
            lines.append(f"- `{name}` ({_count(item.size, 'byte')}){about}")
    if total > len(items):
        lines += ["", f"… and {total - len(items)} more entries, not described here."]
    if picks:
        lines += ["", "## Key sentences", ""] + [f"- {p}" for p in picks]
    lines += ["", f"<!-- axiom-tiers v{TIER_VERSION} sha256={digest} -->", ""]
    return "\n".join(lines)


def _semantic_picks(items: Sequence[_Item], embedder: SentenceEmbedder) -> list[str]:
    candidates: list[str] = []
    for item in items:
        for sentence in item.sentences:
            if sentence != "(binary file)" and sentence not in candidates:
                candidates.append(sentence)
    if not candidates:
        return []
    vectors = embedder.embed(candidates)
    dim = len(vectors[0]) if vectors else 0
    centroid = [sum(v[k] for v in vectors) / len(vectors) for k in range(dim)]
    norm = math.sqrt(sum(c * c for c in centroid)) or 1.0

    def score(vector: list[float]) -> float:
        length = math.sqrt(sum(x * x for x in vector)) or 1.0
        return round(sum(a * b for a, b in zip(vector, centroid, strict=True)) / (length * norm), 9)

    ranked = sorted(range(len(candidates)), key=lambda i: (-score(vectors[i]), i))
    return [candidates[i] for i in sorted(ranked[:SEMANTIC_PICKS])]


def _stored_digest(tree: ContextTree, uri: AxiomUri) -> str | None:
    try:
        text = tree.read_text(uri.join(OVERVIEW))
    except ContextError:
        return None
    match = _MARKER.search(text)
    return match.group(2) if match and int(match.group(1)) == TIER_VERSION else None


def _write_if_changed(tree: ContextTree, uri: AxiomUri, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        if tree.read_bytes(uri) == data:
            return False
    except (ResourceNotFound, WrongKind):
        pass
    tree.write_bytes(uri, data, actor="system")
    return True


def _synthesize_one(tree: ContextTree, uri: AxiomUri, mode: str, embedder: SentenceEmbedder | None) -> bool:
    entries = [e for e in tree.ls(uri) if e.kind in ("file", "dir")]
    entries.sort(key=lambda e: (e.kind != "dir", e.name))
    described = entries[:MAX_ENTRIES]
    items = [_dir_item(tree, e) if e.kind == "dir" else _file_item(tree, e) for e in described]
    inputs = {
        "version": TIER_VERSION,
        "mode": mode,
        "embedder": embedder.model_id if mode == "semantic-lite" and embedder is not None else None,
        "uri": str(uri),
        "total": len(entries),
        "items": [asdict(item) for item in items],
    }
    digest = sha256_hex(json.dumps(inputs, sort_keys=True, ensure_ascii=False))
    if digest == _stored_digest(tree, uri) and tree.exists(uri.join(ABSTRACT)):
        return False
    picks = _semantic_picks(items, embedder) if mode == "semantic-lite" and embedder is not None else []
    wrote_abstract = _write_if_changed(tree, uri.join(ABSTRACT), _abstract(uri, items, len(entries), picks))
    wrote_overview = _write_if_changed(tree, uri.join(OVERVIEW), _overview(uri, items, len(entries), picks, digest))
    return wrote_abstract or wrote_overview


def _subtree(tree: ContextTree, uri: AxiomUri) -> list[AxiomUri]:
    """Folders below ``uri`` (not following links, not hidden), deepest first, then ``uri``."""
    order: list[AxiomUri] = []
    for entry in tree.ls(uri):
        if entry.kind == "dir":
            order.extend(_subtree(tree, entry.uri))
    order.append(uri)
    return order


def synthesize_tiers(
    tree: ContextTree, dir_uri: AxiomUri, *, mode: str = "deterministic", embedder: SentenceEmbedder | None = None
) -> list[AxiomUri]:
    """Regenerate the tier files of ``dir_uri``, the folders below it and its parents (bottom-up).

    Returns the folders whose ``.abstract.md`` or ``.overview.md`` changed, in the order written.
    ``mode`` is ``deterministic`` or ``semantic-lite`` (which needs ``embedder``).
    """
    if mode not in ("deterministic", "semantic-lite"):
        raise ConfigError(
            f"AXIOMME_TIER_SYNTHESIS={mode!r} is not supported; use one of: deterministic, semantic-lite",
            setting="AXIOMME_TIER_SYNTHESIS",
        )
    if mode == "semantic-lite" and embedder is None:
        raise ConfigError("AXIOMME_TIER_SYNTHESIS=semantic-lite needs an embedder", setting="AXIOMME_TIER_SYNTHESIS")
    if dir_uri.scope in INTERNAL_SCOPES:
        return []
    if tree.stat(dir_uri).kind != "dir":
        raise WrongKind(f"{dir_uri} is not a folder", uri=str(dir_uri))
    if dir_uri.is_hidden:
        return []
    order = _subtree(tree, dir_uri) + list(dir_uri.ancestors)
    return [uri for uri in order if _synthesize_one(tree, uri, mode, embedder)]
