"""A model cannot grant itself: ``aries grants add`` run by a tool is refused (the tool-call marker in
every tool subprocess's environment), and no command writes the operator's store — outside the roots
the sandbox stops it, inside them the policy refuses a command naming it and bubblewrap binds it
read-only — in both sandbox modes."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.grants.store import TOOL_CALL_MARKER
from services.settings.operator import settings_path
from services.tools.calls import approve_all
from services.tools.gateway import ToolGateway
from services.tools.sandbox import support
from services.workspace.manager import Workspace, WorkspaceManager
from tests.grants.test_lasting import _grant
from tests.tools.conftest import make_policy

VENV_BIN = str(Path(sys.executable).parent)
SHELL = [{"id": "dev", "names": ["aries", "touch", "cp", "sh", "env", "ls"]}]


@pytest.fixture(params=["bubblewrap", "landlock"])
def kind(request: pytest.FixtureRequest) -> str:
    found = support()
    if request.param == "bubblewrap" and not found.bwrap_usable:
        pytest.skip(f"bubblewrap cannot run here: {found.bwrap_error}")
    if request.param == "landlock" and found.landlock_abi < 1:
        pytest.skip("the kernel offers no Landlock")
    return str(request.param)


@pytest.fixture
def aries_home(suite_environment: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Outside /tmp (bubblewrap gives commands a private /tmp, where a write would land unseen)."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    home = Path(tempfile.mkdtemp(prefix="aries-grants-test-", dir=base))
    monkeypatch.setenv("ARIES_HOME", str(home))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _state() -> bytes:
    return settings_path().read_bytes()


@pytest.fixture
def workspace(aries_home: Path) -> Workspace:
    made, _ = WorkspaceManager().create("demo")
    _grant(made, "builtin:shell:run", "ls *")  # the store exists, with one grant
    return made


def _gateway(workspace: Workspace, kind: str, roots: Path, **shell: Any) -> ToolGateway:
    policy = make_policy(
        roots,
        shell__executables=SHELL,
        shell__sandbox=kind,
        shell__env_passthrough=["PATH", "HOME", "LANG", "ARIES_HOME"],
        **{f"shell__{k}": v for k, v in shell.items()},
    )
    return ToolGateway(workspace, policy=policy, approver=approve_all)


def test_grants_add_inside_a_tool_call_is_refused(workspace: Workspace, kind: str) -> None:
    before = _state()
    with _gateway(workspace, kind, workspace.root) as gateway:
        result = gateway.execute_sync(
            "builtin:shell:run", {"argv": ["aries", "-w", "demo", "grants", "add", "builtin:shell:run", "sh *"]}
        )
        assert result.ok and result.data is not None, result.to_dict()
        assert result.data["exit_code"] == 1
        assert "refuses to run inside an Aries tool call" in result.data["stderr"]
        seen = gateway.execute_sync("builtin:shell:run", {"argv": ["env"]})
        assert seen.data is not None and f"{TOOL_CALL_MARKER}=1" in seen.data["stdout"].splitlines()
    assert _state() == before


def test_no_command_writes_the_store_outside_the_roots(workspace: Workspace, kind: str) -> None:
    before = _state()
    store = str(settings_path())
    with _gateway(workspace, kind, workspace.root, check_path_arguments=False) as gateway:
        # (not ``touch``: Landlock does not cover a file's timestamps, only what can be written into it)
        for argv in (["cp", str(workspace.meta_path), store], ["sh", "-c", f"echo '{{}}' > {store}"]):
            result = gateway.execute_sync("builtin:shell:run", {"argv": argv})
            assert result.ok and result.data is not None and result.data["exit_code"] != 0, (argv, result.to_dict())
    assert _state() == before


def test_inside_the_roots_the_policy_refuses_a_command_naming_the_store(
    aries_home: Path, workspace: Workspace, kind: str
) -> None:
    before = _state()
    with _gateway(workspace, kind, aries_home) as gateway:
        for argv in (["touch", str(settings_path())], ["cp", str(workspace.meta_path), "settings.json"]):
            cwd = {"cwd": str(aries_home)} if not argv[-1].startswith("/") else {}
            result = gateway.execute_sync("builtin:shell:run", {"argv": argv, **cwd})
            assert not result.ok and result.error.details["rule"] == "shell.path_argument", result.to_dict()
            assert result.error.details["path_rule"] == "fs.operator_store"
    assert _state() == before


def test_bubblewrap_binds_the_store_read_only_inside_a_writable_root(aries_home: Path, workspace: Workspace) -> None:
    if not support().bwrap_usable:
        pytest.skip("bubblewrap cannot run here")
    before = _state()
    with _gateway(workspace, "bubblewrap", aries_home, check_path_arguments=False) as gateway:
        result = gateway.execute_sync("builtin:shell:run", {"argv": ["sh", "-c", f"echo '{{}}' > {settings_path()}"]})
        assert result.ok and result.data is not None and result.data["exit_code"] != 0, result.to_dict()
        assert "Read-only file system" in result.data["stderr"]
    assert _state() == before
