"""One-time preparations that take a while, told to whoever shows them.

Exporting the ONNX encoder (once per machine, see :mod:`services.retrieval.embedders_onnx`) runs
deep inside a query or an ingest; the CLI says so on stderr and the TUI shows a status line.  The
service calls :func:`tell`; a front end registers a listener with :func:`add_listener`.  A module of
its own, with no imports, so that registering costs a front end nothing at start-up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Listener = Callable[[str, str, str], None]
"""``listener(key, stage, message)``: ``stage`` is ``start``, then ``done`` or ``failed``; ``key``
names the preparation (``onnx-export``)."""

_LOCK = threading.Lock()
_LISTENERS: list[Listener] = []


def add_listener(listener: Listener) -> Callable[[], None]:
    """Tell ``listener`` about preparations (from the thread doing them); returns its remover."""
    with _LOCK:
        _LISTENERS.append(listener)

    def remove() -> None:
        with _LOCK:
            if listener in _LISTENERS:
                _LISTENERS.remove(listener)

    return remove


def tell(key: str, stage: str, message: str) -> None:
    """Pass ``stage``/``message`` of preparation ``key`` to every listener; a failing listener is ignored."""
    with _LOCK:
        listeners = list(_LISTENERS)
    for listener in listeners:
        try:
            listener(key, stage, message)
        except Exception:  # a closed terminal or a gone UI never stops the work
            pass


__all__ = ["Listener", "add_listener", "tell"]
