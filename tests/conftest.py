"""Test configuration shared by every suite.

- Each test gets its own ``ARIES_HOME`` under tmp_path: no user data is ever read or written.
- Textual animations are off and the status line's clock is frozen, so snapshots and Pilot runs are
  deterministic.
- Snapshot baselines live in the top-level ``snapshots/`` folder, one sub-folder per test module.
- ``loopback``: real HTTP (or raw TCP) servers on 127.0.0.1 for the test (see ``tests/loopback.py``).
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

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
os.environ.setdefault("ARIES_FROZEN_CLOCK", "1")  # the status line shows 0.0 s: snapshots stay stable
os.environ["AXIOMME_EMBEDDER"] = os.environ.get("AXIOMME_EMBEDDER", "hash")


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
def aries_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "aries-home"
    monkeypatch.setenv("ARIES_HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
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
