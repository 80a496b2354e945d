"""Shell commands run in an OS sandbox (bubblewrap or Landlock): a command that the policy lets
run still cannot write outside the allowed roots, read a hidden path or open a socket to a
loopback server; the same command works inside the root; the process tree stays managed; the
doctor says which sandbox is active.  Each sandbox kind is tested where the machine offers it and
skipped, with the reason, where it does not.  Real processes, real sockets, no mocks."""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from services.policy import Policy
from services.tools.doctor import doctor
from services.tools.gateway import ToolGateway
from services.tools.processes import ENV_TAG
from services.tools.sandbox import SandboxSupport, SandboxUnavailable, select, support
from tests.tools.conftest import SENTINEL, Sandbox, make_policy

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

SHELL = [{"id": "dev", "names": ["python3", "sh", "sleep", "touch", "cat", "true"]}]


def _unavailable(kind: str) -> str | None:
    found = support()
    if kind == "bubblewrap" and not found.bwrap_usable:
        return found.bwrap_error or "bwrap is not installed (apt-get install bubblewrap)"
    if kind == "landlock" and found.landlock_abi < 1:
        return "the kernel offers no Landlock (Linux >= 5.13 with Landlock enabled)"
    if kind == "landlock" and found.landlock_abi < 4:
        return f"Landlock ABI {found.landlock_abi} cannot restrict the network (ABI 4 needed)"
    return None


@pytest.fixture(params=["bubblewrap", "landlock"])
def kind(request: pytest.FixtureRequest) -> str:
    why = _unavailable(request.param)
    if why is not None:
        pytest.skip(f"{request.param} sandbox cannot run here: {why}")
    return str(request.param)


@pytest.fixture
def elsewhere() -> Iterator[Path]:
    """A directory outside the roots and outside /tmp (bubblewrap gives /tmp a private tmpfs)."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    path = Path(tempfile.mkdtemp(prefix="aries-sbx-test-", dir=base))
    (path / "secret.txt").write_text(f"{SENTINEL}\n", encoding="utf-8")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _policy(sandbox: Sandbox, mode: str, **shell: Any) -> Policy:
    # check_path_arguments off: the policy itself would let every one of these commands run.
    return make_policy(
        sandbox.root,
        shell__executables=SHELL,
        shell__check_path_arguments=False,
        shell__sandbox=mode,
        **{f"shell__{k}": v for k, v in shell.items()},
    )


def _run(gateway: ToolGateway, argv: list[str], **extra: Any) -> dict[str, Any]:
    result = gateway.execute_sync("builtin:shell:run", {"argv": argv, **extra})
    assert result.ok and result.data is not None, result.to_dict()
    return {**result.data, "meta": result.meta}


def test_write_outside_the_root_is_stopped(
    sandbox: Sandbox, elsewhere: Path, kind: str, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(_policy(sandbox, kind))
    for target in (elsewhere / "escaped.txt", sandbox.outside / "escaped.txt"):
        out = _run(gateway, ["touch", str(target)])
        assert out["exit_code"] != 0, out
        assert not target.exists()
        assert out["meta"]["sandbox"]["os"]["kind"] == kind
    inside = _run(gateway, ["touch", str(sandbox.root / "made.txt")])
    assert inside["exit_code"] == 0, inside
    assert (sandbox.root / "made.txt").exists()
    # The same command without the sandbox: the policy lets it write there.
    plain = gateway_factory(_policy(sandbox, "off"))
    assert _run(plain, ["touch", str(elsewhere / "escaped.txt")])["exit_code"] == 0
    assert (elsewhere / "escaped.txt").exists()


def test_hidden_paths_cannot_be_read(
    sandbox: Sandbox, elsewhere: Path, kind: str, gateway_factory: Callable[..., ToolGateway]
) -> None:
    secret = str(elsewhere / "secret.txt")
    hidden = gateway_factory(_policy(sandbox, kind, outside_root="hidden"))
    out = _run(hidden, ["cat", secret])
    assert out["exit_code"] != 0 and SENTINEL not in out["stdout"], out
    assert out["meta"]["sandbox"]["os"]["outside_root"] == "hidden"
    inside = _run(hidden, ["cat", str(sandbox.root / "hello.txt")])
    assert inside["exit_code"] == 0 and inside["stdout"].startswith("hello world"), inside
    # read_only (the default) leaves it readable, but not writable.
    readable = gateway_factory(_policy(sandbox, kind))
    assert SENTINEL in _run(readable, ["cat", secret])["stdout"]


@pytest.fixture
def loopback() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on 127.0.0.1 that records every connection it accepts."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except OSError:
                continue
            accepted.append(f"{peer[0]}:{peer[1]}")
            conn.sendall(b"hello\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(timeout=2)
    server.close()


CONNECT = "import socket, sys; s = socket.create_connection(('127.0.0.1', {port}), timeout=3); print(s.recv(16))"


def test_socket_to_a_loopback_server_is_refused(
    sandbox: Sandbox, kind: str, loopback: tuple[int, list[str]], gateway_factory: Callable[..., ToolGateway]
) -> None:
    port, accepted = loopback
    code = CONNECT.format(port=port)
    gateway = gateway_factory(_policy(sandbox, kind))
    out = _run(gateway, ["python3", "-c", code])
    assert out["exit_code"] != 0 and "hello" not in out["stdout"], out
    assert accepted == []
    assert out["meta"]["sandbox"]["os"]["network"] is False
    allowed = gateway_factory(_policy(sandbox, kind, network=True))
    ok = _run(allowed, ["python3", "-c", code])
    assert ok["exit_code"] == 0 and "hello" in ok["stdout"], ok
    assert len(accepted) == 1


def _tagged(session: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(ENV_TAG, "").startswith(session + ":") and process.status() != "zombie":
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def test_sandboxed_process_tree_is_still_managed(
    sandbox: Sandbox, kind: str, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(_policy(sandbox, kind))
    started = gateway.execute_sync("builtin:shell:start", {"argv": ["sh", "-c", "sleep 30 & sleep 30"]})
    assert started.ok and started.data is not None, started.to_dict()
    session = gateway.processes.session
    deadline = time.monotonic() + 5
    while len(_tagged(session)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_tagged(session)) >= 2
    killed = gateway.execute_sync("builtin:shell:kill", {"process_id": started.data["process_id"]})
    assert killed.ok, killed.to_dict()
    assert _tagged(session) == []
    timed = gateway.execute_sync("builtin:shell:run", {"argv": ["sleep", "30"], "timeout_s": 1})
    assert timed.error is not None and timed.error.type == "Timeout", timed.to_dict()
    assert _tagged(session) == []


def test_private_tmp_is_not_the_hosts(sandbox: Sandbox, kind: str, gateway_factory: Callable[..., ToolGateway]) -> None:
    """A file the command writes to its temporary directory is gone from the host after the run."""
    gateway = gateway_factory(_policy(sandbox, kind))
    name = f"aries-sbx-{time.time_ns()}"
    code = f"import tempfile, os; d = tempfile.gettempdir(); open(os.path.join(d, {name!r}), 'w').write('x'); print(d)"
    out = _run(gateway, ["python3", "-c", code])
    assert out["exit_code"] == 0, out
    assert not Path(out["stdout"].strip(), name).exists()
    assert not Path(tempfile.gettempdir(), name).exists()


# -- choosing a sandbox, and the doctor ------------------------------------------------------------
NOTHING = SandboxSupport(bwrap=None, bwrap_error=None, bwrap_argv0=False, landlock_abi=0)
BROKEN_BWRAP = SandboxSupport("/usr/bin/bwrap", "bwrap cannot create its namespaces here: EPERM", False, 6)


def test_selection_and_fallbacks() -> None:
    assert select("auto", NOTHING)[0] is None and "policy and the rlimits only" in select("auto", NOTHING)[1]
    assert select("off", BROKEN_BWRAP)[0] is None
    assert select("auto", BROKEN_BWRAP)[0] == "landlock"
    with pytest.raises(SandboxUnavailable, match="requires the bubblewrap sandbox .* cannot create its namespaces"):
        select("bubblewrap", BROKEN_BWRAP)
    with pytest.raises(SandboxUnavailable, match="bwrap is not installed"):
        select("bubblewrap", NOTHING)
    with pytest.raises(SandboxUnavailable, match="does not offer Landlock"):
        select("landlock", NOTHING)


def _sandbox_check(policy: Policy) -> Any:
    report = doctor(policy)
    return next(c for c in report.checks if c.name == "shell sandbox")


def test_doctor_reports_the_active_sandbox(sandbox: Sandbox) -> None:
    found = support()
    check = _sandbox_check(_policy(sandbox, "auto"))
    assert check.ok
    if found.bwrap_usable:
        assert check.detail.startswith("bubblewrap"), check.detail
    elif found.landlock_abi:
        assert check.detail.startswith(f"Landlock ABI {found.landlock_abi}"), check.detail
    else:
        assert "policy and the rlimits only" in check.detail
    off = _sandbox_check(_policy(sandbox, "off"))
    assert off.ok and off.detail.startswith("shell.sandbox is off: none")


def test_required_sandbox_that_is_absent_is_a_clear_error(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    found = support()
    if found.bwrap_usable:
        pytest.skip("bubblewrap works on this machine: its absence cannot be shown here")
    check = _sandbox_check(_policy(sandbox, "bubblewrap"))
    assert not check.ok and "requires the bubblewrap sandbox" in check.detail
    gateway = gateway_factory(_policy(sandbox, "bubblewrap"))
    result = gateway.execute_sync("builtin:shell:run", {"argv": ["true"]})
    assert result.error is not None and result.error.type == "PermissionDenied", result.to_dict()
    assert "requires the bubblewrap sandbox" in result.error.message
