"""Test configuration shared by every suite.

- Each test starts from a clean environment: every ``AXIOMME_*``, ``ARIES_*``, ``OLLAMA_*``,
  ``OPENAI_*`` and ``TEXTUAL_*`` variable of the shell that runs pytest is cleared (but the few that
  say how to run the suite itself, ``KEPT``), then the suite's own are set (``SUITE_ENV``): a
  developer's model, embedder or retrieval backend never leaks into a test.
- Each test gets its own ``ARIES_HOME`` under tmp_path: no user data is ever read or written.
- The TUI is deterministic without a test switch in product code: Textual animations are off, the
  cursor does not blink and the status line's clock is stopped (patched here, per test).
- Snapshot baselines live in the top-level ``snapshots/`` folder, one sub-folder per test module.
- ``loopback``: real HTTP (or raw TCP) servers on 127.0.0.1 for the test (see ``tests/loopback.py``).
- ``slow`` marks the suites that take tens of seconds to minutes (SIGKILL crash and concurrency runs,
  the browser, the Chroma server, the real embedding model and the real llama.cpp model):
  ``pytest -m 'not slow'`` is the fast lane (README, "Tests").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import LoopbackServer

REPO_ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_ROOT = REPO_ROOT / "snapshots"

CLEARED = ("AXIOMME_", "ARIES_", "OLLAMA_", "OPENAI_", "TEXTUAL_")
KEPT = ("ARIES_UPDATE_GOLDEN", "ARIES_CHROMIUM", "ARIES_REQUIRE_BROWSER", "TEXTUAL_SNAPSHOT")
"""How to run the suite itself (rewrite golden files, which browser, the snapshot plugin's own
variables), not settings Aries reads: kept (prefixes)."""
SUITE_ENV = {"TEXTUAL_ANIMATIONS": "none", "AXIOMME_EMBEDDER": "hash", "ARIES_NOTIFY": "off"}


def _clean_environment() -> None:
    for name in [n for n in os.environ if n.startswith(CLEARED) and not n.startswith(KEPT)]:
        del os.environ[name]
    os.environ.update(SUITE_ENV)


_clean_environment()  # now, for module and session fixtures too (and Textual reads TEXTUAL_* once, on import)


def _root_snapshots_in_repo() -> None:
    """Point pytest-textual-snapshot's SVG extension at ``snapshots/`` instead of ``__snapshots__``."""
    import pytest_textual_snapshot as plugin

    base = plugin.SVGImageExtension

    class RootedSVGImageExtension(base):  # type: ignore[misc,valid-type]
        @classmethod
        def dirname(cls, *, test_location) -> str:  # type: ignore[no-untyped-def]
            return str(SNAPSHOT_ROOT / Path(test_location.filepath).stem)

    plugin.SVGImageExtension = RootedSVGImageExtension


_root_snapshots_in_repo()


@pytest.fixture(autouse=True)
def suite_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean environment and a still TUI (no cursor blink, a stopped status clock), for every test;
    nothing learned of model servers by an earlier test in this process (a calibration would move the
    token estimate, and with it the context meter a snapshot shows)."""
    from services.assistant.turn_window import forget_servers

    forget_servers()
    for name in list(os.environ):
        if name.startswith(CLEARED) and not name.startswith(KEPT):
            monkeypatch.delenv(name)
    for name, value in SUITE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    from textual.widgets import Input

    blinking = Input.__init__

    def still(self: Input, *args: Any, **kwargs: Any) -> None:
        blinking(self, *args, **kwargs)
        self.cursor_blink = False  # no blink phase in a snapshot

    monkeypatch.setattr(Input, "__init__", still)
    monkeypatch.setattr("widgets.status.monotonic", lambda: 0.0)  # the status line shows 0.0 s


@pytest.fixture(autouse=True)
def aries_home(suite_environment: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "aries-home"
    monkeypatch.setenv("ARIES_HOME", str(home))
    return home


@pytest.fixture
def venv_bin() -> Path:
    import sys

    return Path(sys.executable).parent


@pytest.fixture
def loopback() -> Iterator[Callable[..., LoopbackServer]]:
    """Start loopback servers for this test: ``loopback({"GET /x": handler})``, ``loopback(app)``, or
    ``loopback(stream_handler=...)`` for raw TCP. Every server is stopped when the test ends."""
    started: list[LoopbackServer] = []

    def start(app: Any = None, *, stream_handler: Any = None) -> LoopbackServer:
        server = LoopbackServer(app, stream_handler=stream_handler)
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
