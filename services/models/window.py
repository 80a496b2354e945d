"""How many tokens a model can see: its context window, where it comes from, and what was learned.

In order of precedence:

1. configuration — ``settings.models.<name>.context_window`` of the workspace (``<name>`` is the
   ``provider:model`` label or the bare model name);
2. learned — the window a server stated in a context-overflow error (see
   :func:`overflow_numbers`), kept in ``$ARIES_HOME/cache/model-windows.json`` so that the next
   process starts from it (keyed by provider, URL and model; a later error replaces it);
3. the provider — Ollama's ``POST /api/show`` (the model's ``num_ctx`` parameter, else 8192 capped
   by the model's trained length; Aries then sends that ``num_ctx`` so the server uses exactly the
   window the request was fitted to), an OpenAI-compatible server's
   ``GET /models`` entry (``max_model_len``, as vLLM reports it);
4. :data:`DEFAULT_WINDOW` — a server that says nothing and has not overflowed yet.

A server's numbers only ever *narrow* what is sent; they start nothing and change no rule.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.models.tokens import Calibration

DEFAULT_WINDOW = 8192
MIN_WINDOW = 128
MAX_WINDOW = 10_000_000
CACHE_FILE = "model-windows.json"

_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.I),  # OpenAI, vLLM, llama-cpp-python's server
    re.compile(r"exceed(?:s|ed)? (?:the )?context window of (\d+)", re.I),  # llama-cpp-python itself
    re.compile(r"available context size \((\d+) tokens?\)", re.I),  # llama.cpp's llama-server
    re.compile(r"context length of only (\d+)", re.I),  # LM Studio
    re.compile(r"context (?:length|window|size)(?: is| of)? (\d+)", re.I),
)
_PROMPT_PATTERNS = (
    re.compile(r"\((\d+) in the messages", re.I),
    re.compile(r"requested tokens \((\d+)\)", re.I),
    re.compile(r"request \((\d+) tokens?\)", re.I),
    re.compile(r"(?:messages|prompt) resulted in (\d+) tokens", re.I),
)
_OVERFLOW_WORDS = re.compile(
    r"context[ _](?:length|window|size)|maximum context|too many tokens|exceed_context|context_length_exceeded", re.I
)


def overflow_numbers(message: str, error: dict[str, Any] | None = None) -> tuple[bool, int | None, int | None]:
    """``(is_overflow, window, prompt_tokens)`` read from a server's error message (and error object,
    e.g. llama-server's ``n_ctx`` / ``n_prompt_tokens``)."""
    error = error or {}
    code = str(error.get("code") or error.get("type") or "")
    overflow = bool(_OVERFLOW_WORDS.search(message) or _OVERFLOW_WORDS.search(code))
    if not overflow:
        return False, None, None
    window = _int(error.get("n_ctx")) or _first(_WINDOW_PATTERNS, message)
    prompt = _int(error.get("n_prompt_tokens")) or _first(_PROMPT_PATTERNS, message)
    if window is not None and not MIN_WINDOW <= window <= MAX_WINDOW:
        window = None
    return True, window, prompt


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass
class ModelWindow:
    """The window a request is fitted to, where that number came from, and the estimate's correction."""

    tokens: int
    source: str  # config | learned | provider | default
    calibration: Calibration = field(default_factory=Calibration)

    def describe(self) -> str:
        return f"{self.tokens} tokens ({self.source})"


# -- learned windows: one small JSON file in ARIES_HOME, shared by every process --------------------
_LOCK = threading.Lock()
_MEMORY: dict[str, dict[str, Any]] = {}


def cache_key(provider: str, url: str, model: str) -> str:
    return f"{provider} {url} {model}"


def _cache_path() -> Path:
    from services.settings.config import aries_home

    return aries_home() / "cache" / CACHE_FILE


def learned(key: str) -> dict[str, Any] | None:
    """``{"window": N, "factor": F}`` learned for ``key`` (this process, else the cache file)."""
    with _LOCK:
        if key in _MEMORY:
            return dict(_MEMORY[key])
    entry = read_cache(_cache_path(), key)
    if not isinstance(entry, dict) or _int(entry.get("window")) is None:
        return None
    window = int(entry["window"])
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        return None
    factor = entry.get("factor")
    clean = {"window": window, "factor": float(factor) if isinstance(factor, int | float) else 1.0}
    with _LOCK:
        _MEMORY[key] = clean
    return dict(clean)


def remember(key: str, window: int, factor: float) -> None:
    """Keep what a server said (this process at once; the cache file atomically, best effort)."""
    entry = {"window": int(window), "factor": round(float(factor), 4)}
    with _LOCK:
        _MEMORY[key] = entry
        update_cache(_cache_path(), key, entry)


def update_cache(path: Path, key: str, entry: Any) -> None:
    """Set ``key`` to ``entry`` in the small JSON cache file ``path`` (atomically; best effort: a
    read-only home or a damaged file leaves what the process knows)."""
    from services.files.atomic import atomic_write_text

    try:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        data[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only home: the process still knows


def read_cache(path: Path, key: str) -> Any:
    """``key``'s entry in the JSON cache file ``path`` (None: no file, no entry, or not readable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get(key) if isinstance(data, dict) else None


def forget_all() -> None:
    """Forget this process's learned windows (tests)."""
    with _LOCK:
        _MEMORY.clear()


__all__ = [
    "CACHE_FILE",
    "DEFAULT_WINDOW",
    "ModelWindow",
    "cache_key",
    "forget_all",
    "learned",
    "overflow_numbers",
    "read_cache",
    "remember",
    "update_cache",
]
