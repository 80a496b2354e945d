"""Whether a model server shows the model the tool definitions a request carries.

An OpenAI-compatible server takes ``tools`` with every request, but what the model reads is what the
server's chat template renders, and some templates have no place for tools: llama-cpp-python serving
Gemma 3 270M (its GGUF ships no template; the server falls back to a format without tools) drops them.
The model then never sees the tools — it can call one only by writing the call as text — and a
meter that counts their schemas over-counts the request by their size (issue 30 item 6).

Such a server does not count the prompt of a streamed answer either (llama-cpp-python sends no usage),
so nothing calibrates the estimate. Once a streamed answer came without a count, the turn loop asks
before the next request that carries tools (or after the first one, when that was the first request),
once per server and model (:func:`probe`): two one-token,
non-streamed requests, the same one-word message with and without one small tool, and the server's
own prompt counts. Equal counts: the template leaves tools out. The answer is kept per provider, URL
and model in ``$ARIES_HOME/cache/model-templates.json`` (the next process starts from it) and
changes only what the estimate counts: the tools are still sent (a forced ``tool_choice`` still
works through the server's grammar), nothing is started and no rule changes.

Only servers on this machine or a private network are asked: a hosted API renders tools, and its
tokens cost money.
"""

from __future__ import annotations

import ipaddress
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from services.models.window import read_cache, update_cache

CACHE_FILE = "model-templates.json"
MIN_TOOL_TOKENS = 8
"""The least difference in prompt tokens that says the probe's tool was rendered (it is ~50 tokens)."""
PROBE_MESSAGE = "Hello."
PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup_word",
        "description": "Look up one word in the dictionary and return every meaning it lists, oldest first.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "the word to look up"}},
            "required": ["word"],
        },
    },
}

_LOCK = threading.Lock()
_MEMORY: dict[str, bool | None] = {}  # None: asked and not answered (this process does not ask again)
_UNCOUNTED: set[str] = set()  # servers whose streamed answer came without counts, in this process


def _cache_path() -> Path:
    from services.settings.config import aries_home

    return aries_home() / "cache" / CACHE_FILE


def local_server(base_url: str) -> bool:
    """Whether ``base_url`` is on this machine or a private network (the servers that are probed)."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def known(key: str) -> bool | None:
    """What is known of ``key``'s template: True (tools shown), False (left out), None (not known)."""
    with _LOCK:
        if key in _MEMORY:
            return _MEMORY[key]
    entry = read_cache(_cache_path(), key)
    shown = entry.get("tools_shown") if isinstance(entry, dict) else None
    if isinstance(shown, bool):
        with _LOCK:
            _MEMORY[key] = shown
        return shown
    return None


def mark_uncounted(key: str) -> None:
    """``key``'s server streamed an answer without counting its prompt: the next request that carries
    tools asks first (:func:`uncounted`), so that its estimate is right from the start."""
    with _LOCK:
        _UNCOUNTED.add(key)


def uncounted(key: str) -> bool:
    """Whether ``key``'s server streamed without counts and has not been asked yet in this process."""
    with _LOCK:
        return key in _UNCOUNTED and key not in _MEMORY


def asked(key: str) -> bool:
    """Whether this process asked already (answered or not): a server is asked at most once."""
    with _LOCK:
        return key in _MEMORY


async def probe(provider: Any, key: str) -> bool | None:
    """Ask ``provider``'s server (see the module docstring) and keep the answer; None when it cannot
    say (no counts in its answers, an error, not a local server, a provider that cannot be asked)."""
    ask = getattr(provider, "prompt_tokens_of", None)
    if ask is None or not local_server(str(getattr(provider, "base_url", ""))):
        with _LOCK:
            _MEMORY[key] = None
        return None
    plain = await ask(PROBE_MESSAGE, None)
    with_tool = await ask(PROBE_MESSAGE, [PROBE_TOOL])
    shown = None if plain is None or with_tool is None else with_tool - plain >= MIN_TOOL_TOKENS
    with _LOCK:
        _MEMORY[key] = shown
    if shown is not None:
        update_cache(_cache_path(), key, {"tools_shown": shown})
    return shown


def forget_all() -> None:
    """Forget this process's answers (tests)."""
    with _LOCK:
        _MEMORY.clear()
        _UNCOUNTED.clear()


__all__ = [
    "CACHE_FILE",
    "PROBE_TOOL",
    "asked",
    "forget_all",
    "known",
    "local_server",
    "mark_uncounted",
    "probe",
    "uncounted",
]
