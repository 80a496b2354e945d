"""The self-check of one session (``aries tool doctor``, ``/doctor``): the tool runtime against the
policy in force, its MCP servers and one check per index of the workspace. Functions over a
:class:`~services.session.session.Session` (they read it, never change what is in force)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from services.errors import AriesError, ConfigError
from services.tools.doctor import Check, DoctorReport, doctor, mcp_checks


class _Workspace(Protocol):
    @property
    def indexes_dir(self) -> Path: ...


class _Indexes(Protocol):
    def index_list(self) -> list[Any]: ...


class Session(Protocol):
    """What the doctor reads of a ``services.session.session.Session`` (a protocol: ``services.tools`` does not
    import the session, which imports retrieval)."""

    @property
    def workspace(self) -> _Workspace: ...
    @property
    def policy_source(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def has_engine(self) -> bool: ...
    def policy(self) -> Any: ...
    def engine(self) -> _Indexes: ...
    def gateway(self) -> Any: ...


def session_doctor(session: Session) -> DoctorReport:
    """The tool runtime against the policy in force (a failure when it does not load,
    ``services.tools.doctor``), its MCP servers (started here if enabled) and one check per index."""
    try:
        policy = session.policy()
    except ConfigError as exc:
        report = doctor(source=session.policy_source, policy_error=exc.message)
    else:
        report = doctor(policy, source=session.policy_source, mode=session.mode)
        try:
            report.checks.extend(mcp_checks(policy, session.gateway))
        except Exception as exc:  # the doctor reports, it does not crash
            report.checks.append(Check("mcp provider", False, f"{type(exc).__name__}: {exc}"[:300]))
    report.checks.extend(index_checks(session))
    return report


def index_checks(session: Session) -> list[Check]:
    """One check per index of the workspace: does it open, are its vectors sound, which files failed."""
    if not session.workspace.indexes_dir.is_dir() and not session.has_engine:
        return []
    try:
        infos = session.engine().index_list()
    except AriesError as exc:
        return [Check("indexes", False, exc.message)]
    checks = []
    for info in infos:
        detail = f"{info.files} file(s), {info.chunks} chunk(s), {info.status}"
        if info.status_detail:
            detail += f": {info.status_detail}"
        if advice := info.status.advice(info.name):
            detail += f" ({advice})"
        if info.failed:
            detail += f"; {len(info.failed)} file(s) failed to re-load (old chunks kept): {info.failed[0]['path']}"
        checks.append(Check(f"index {info.name}", info.status == "ok", detail))
    return checks


__all__ = ["Session", "index_checks", "session_doctor"]
