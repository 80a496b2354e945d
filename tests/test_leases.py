"""The workspace lease: a real OS lock held by real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from services.workspace.leases import WorkspaceBusy, acquire_lease, lease_holder
from services.workspace.manager import WorkspaceManager, mark_closed, mark_open, session_marker

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parent.parent

HOLDER = textwrap.dedent(
    """
    import sys, time
    from services.workspace.leases import acquire_lease
    from services.workspace.manager import WorkspaceManager
    workspace, _ = WorkspaceManager().open(sys.argv[1])
    lease = acquire_lease(workspace, purpose="tui")
    print("held", flush=True)
    if sys.argv[2] == "release":
        sys.stdin.readline()
        lease.release()
        print("released", flush=True)
    time.sleep(60)
    """
)


def _holder(name: str, mode: str = "hold") -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, name, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_process_is_refused_with_the_holders_pid(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    child = _holder("demo")
    try:
        with pytest.raises(WorkspaceBusy) as caught:
            acquire_lease(workspace, purpose="tui")
        message = caught.value.message
        assert f"pid {child.pid}" in message and "tui" in message and "since" in message
        assert "aries workspace close demo" in message and "\n" not in message
        assert lease_holder(workspace)["pid"] == child.pid  # type: ignore[index]
        # the wrappers the App uses refuse too, and never take the lease from the holder
        with pytest.raises(WorkspaceBusy):
            mark_open(workspace)
        assert not mark_closed(workspace)
        assert session_marker(workspace)["pid"] == child.pid  # type: ignore[index]
        # one-shot commands beside the TUI: opening (recover) changes nothing and says who has it
        _, report = WorkspaceManager().open("demo")
        assert report.open_elsewhere is not None and report.open_elsewhere["pid"] == child.pid
        assert session_marker(workspace)["pid"] == child.pid  # type: ignore[index]
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_sigkill_leaves_a_lease_the_next_opener_takes_and_reports(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    child = _holder("demo")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert (workspace.root / ".aries.lock").exists()  # the file stays; the OS lock is gone
    lease = acquire_lease(workspace, purpose="tui")
    try:
        assert lease.recovered is not None and lease.recovered["pid"] == child.pid
        assert lease.recovery_notice() == f"recovered after an unclean exit (pid {child.pid})"
        assert session_marker(workspace)["pid"] == os.getpid()  # type: ignore[index]
    finally:
        lease.release()
    assert session_marker(workspace) is None
    again = acquire_lease(workspace, purpose="tui")  # a clean release leaves nothing to recover
    assert again.recovered is None
    again.release()


def test_a_clean_release_lets_the_next_process_in_without_a_notice(aries_home: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    child = _holder("demo", "release")
    try:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "released"
        lease = acquire_lease(workspace, purpose="tui")
        assert lease.recovered is None
        lease.release()
        lease.release()  # idempotent
    finally:
        child.kill()
        child.wait()


def test_the_cli_close_refuses_a_live_holder_and_clears_a_dead_one(aries_home: Path) -> None:
    from app.cli import main

    WorkspaceManager().create("demo")
    child = _holder("demo")
    try:
        assert main(["workspace", "close", "demo"]) == 1
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    workspace, _ = WorkspaceManager().open("demo")
    assert session_marker(workspace) is not None  # a dead holder's record is left behind
    assert main(["workspace", "close", "demo"]) == 0
    assert session_marker(workspace) is None


def test_one_shot_commands_run_beside_the_holder_and_never_clear_it(aries_home: Path, tmp_path: Path) -> None:
    workspace, _ = WorkspaceManager().create("demo")
    note = tmp_path / "note.txt"
    note.write_text("beside the TUI\n")
    wide = tmp_path / "wide-policy.yaml"  # the operator's own policy lets the add read outside the workspace
    wide.write_text(
        "version: 1\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled}\n"
        f"filesystem: {{allowed_roots: ['${{workspace}}', '{tmp_path}']}}\n"
    )
    child = _holder("demo")
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ARIES_HOME": str(aries_home)}
        for argv in (
            ["-w", "demo", "artifact", "add", str(note), "--policy", str(wide)],
            ["-w", "demo", "tool", "call", "builtin:fs:list_dir", "--args", '{"path": "."}'],
            ["-w", "demo", "rag", "index", "list"],
            ["workspace", "list"],
            ["workspace", "open", "demo", "--check"],
        ):
            done = subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, text=True, env=env)
            assert done.returncode == 0, (argv, done.stderr)
            assert session_marker(workspace)["pid"] == child.pid, argv  # type: ignore[index]
            assert lease_holder(workspace) is not None, argv
        checked = subprocess.run(
            [sys.executable, "-m", "app", "workspace", "open", "demo", "--check"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert f"open in another Aries (pid {child.pid}, tui" in checked.stdout
    finally:
        child.kill()
        child.wait()


def test_a_second_tui_is_refused_before_it_takes_the_screen(aries_home: Path) -> None:
    """`aries -w demo` while another Aries holds demo: one line naming the holder, exit 1, no screen."""
    WorkspaceManager().create("demo")
    child = _holder("demo")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app", "-w", "demo"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert done.returncode == 1
    assert (
        done.stderr.startswith("aries: workspace demo is open in another Aries (pid") and str(child.pid) in done.stderr
    )
    assert "\x1b" not in done.stdout + done.stderr  # nothing was drawn
