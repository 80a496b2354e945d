"""Long fs walks stop when the gateway cancels the call (its deadline passed): a recursive listing and
a search over a real tree of tens of thousands of files end with ``Timeout`` soon after the tool
timeout, instead of walking on in their thread after the caller has been answered."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.policy import parse_policy
from services.tools.gateway import ToolGateway
from tests.tools.conftest import Sandbox, policy_data

pytestmark = pytest.mark.timeout(180)

DIRS, FILES = 200, 150  # 30,000 files


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    for i in range(DIRS):
        folder = root / f"d{i:03}"
        folder.mkdir()
        for j in range(FILES):
            (folder / f"f{j:03}.txt").write_bytes(b"nothing to find here\n")
    return root


def _gateway(sandbox: Sandbox, root: Path, factory: Callable[..., ToolGateway], timeout_s: float) -> ToolGateway:
    data: dict[str, Any] = policy_data(root)
    # per-entry policy work like a real policy with many rules; the limits let the walk cover the tree
    data["filesystem"]["deny"] += [
        {"id": f"rule{i}", "glob": f"**/never-{i}-*/**", "ops": ["list", "read"]} for i in range(60)
    ]
    data["limits"].update(
        {"tool_timeout_s": timeout_s, "fs_list_max_entries": 1_000_000, "fs_search_max_files": 1_000_000}
    )
    return factory(parse_policy(json.dumps(data)))


def _timed(gateway: ToolGateway, tool_id: str, args: dict[str, Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = gateway.execute_sync(tool_id, args)  # returns once the tool's worker thread has ended
    return result, time.monotonic() - started


def test_a_recursive_listing_stops_at_the_deadline(
    sandbox: Sandbox, big_tree: Path, gateway_factory: Callable[..., ToolGateway]
) -> None:
    args = {"path": str(big_tree), "recursive": True}
    full, walk_s = _timed(_gateway(sandbox, big_tree, gateway_factory, 300), "builtin:fs:list_dir", args)
    assert full.ok and full.data is not None and full.data["count"] == DIRS * (FILES + 1)
    result, elapsed = _timed(_gateway(sandbox, big_tree, gateway_factory, 0.2), "builtin:fs:list_dir", args)
    assert result.error is not None and result.error.type == "Timeout", result.to_dict()
    assert "0.2 s" in result.error.message  # names the deadline
    assert elapsed < max(walk_s / 2, 0.2 + 0.5), (elapsed, walk_s)  # the thread stopped; it did not walk on


def test_a_search_stops_at_the_deadline(
    sandbox: Sandbox, big_tree: Path, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = _gateway(sandbox, big_tree, gateway_factory, 0.3)
    result, elapsed = _timed(gateway, "builtin:fs:search_text", {"path": str(big_tree), "query": "needle"})
    assert result.error is not None and result.error.type == "Timeout", result.to_dict()
    assert elapsed < 4, elapsed  # searching the whole tree takes several times that
