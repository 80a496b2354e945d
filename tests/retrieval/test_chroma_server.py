"""Client/server mode: the same engine against a real ``chroma run`` on loopback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.retrieval import RetrievalEngine
from services.retrieval.errors import VectorStoreUnavailable
from services.workspace.manager import Workspace

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _chroma_executable() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    if beside.is_file():
        return str(beside)
    return shutil.which("chroma")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[str]:
    executable = _chroma_executable()
    if executable is None:
        pytest.skip("the chroma executable is not installed")
    port = _free_port()
    log = (tmp_path / "chroma.log").open("wb")
    process = subprocess.Popen(
        [executable, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(tmp_path / "chroma-data")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chroma run did not start: {(tmp_path / 'chroma.log').read_text(errors='replace')}")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def test_engine_against_a_chroma_server(chroma_server: str, workspace: Workspace, docs: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    host, port = chroma_server.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))
    with RetrievalEngine(workspace, chroma_url=chroma_server) as engine:
        report = engine.index_add(docs)
        assert len(report.added) == 3
        hit = engine.query("apt debian install", k=1).hits[0]
        assert hit.source_path == "guides/install.md" and hit.dense_rank is not None
        collections = [c.name for c in client.list_collections()]
        assert len(collections) == 1
        _, chunks = engine.indexes.store("docs").manifest.counts()
        assert client.get_collection(collections[0]).count() == chunks
        assert not (workspace.indexes_dir / "docs" / "chroma").exists()  # vectors live on the server
    # a new engine (no URL given) finds the server recorded in the index
    with RetrievalEngine(workspace) as again:
        assert again.query("apt debian install", k=1).hits[0].handle == hit.handle
        again.index_drop("docs")
    assert client.list_collections() == []


def test_unreachable_server_is_an_error(workspace: Workspace, docs: Path) -> None:
    port = _free_port()
    with RetrievalEngine(workspace, chroma_url=f"http://127.0.0.1:{port}") as engine:
        with pytest.raises(VectorStoreUnavailable, match=f"127.0.0.1:{port}"):
            engine.index_add(docs)
        assert engine.index_list() == []  # no half-created index is left behind


def test_collection_lost_on_the_server_is_rebuilt_in_place(
    chroma_server: str, workspace: Workspace, docs: Path
) -> None:
    import chromadb
    from chromadb.config import Settings

    host, port = chroma_server.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))
    with RetrievalEngine(workspace, chroma_url=chroma_server) as engine:
        engine.index_add(docs, "docs")
        fresh = [h.handle for h in engine.query("cats purr", k=3).hits]
        collection = str(engine.indexes.store("docs").manifest.get_meta("collection"))
    client.delete_collection(collection)  # the server lost it (wiped, restored from an old backup)
    with RetrievalEngine(workspace, chroma_url=chroma_server) as engine:
        assert engine.index_info("docs").status == "vectors missing"
        result = engine.query("cats purr", k=3)
        assert result.mode == "keyword" and result.warnings
        chunks = engine.indexes.store("docs").manifest.counts()[1]
        assert engine.index_repair("docs") == chunks
        assert engine.index_info("docs").status == "ok"
        healed = engine.query("cats purr", k=3)
        assert healed.mode == "hybrid" and [h.handle for h in healed.hits] == fresh
    assert client.get_collection(collection).count() == chunks
