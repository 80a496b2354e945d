"""Approvals of the plain mode (``aries -w W --plain``): a numbered question on the controlling
terminal (allow once, for this session, deny, and — when a lasting grant can cover the call — always in
this workspace, with the narrowest rule it stores), or a refusal when there is none.

Standard input and output belong to the session (prompts in, transcript out: a pipe, a screen
reader), so the question goes to ``/dev/tty``, as ``ssh`` and ``sudo`` ask for a password. Without
a controlling terminal (a pipe under cron, a CI job) the call is refused exactly as ``aries ask``
refuses it (``HeadlessApprover``): a structured denial the model reads, and
:attr:`TtyApprover.refused` counts it so that the session ends with the CLI's exit code for a refused
call (3).

Everything shown on the terminal goes through the neutraliser: the preview and the arguments come
from a model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from services.text.textsafe import neutralize

if TYPE_CHECKING:
    from services.tools.calls import ApprovalDecision, ApprovalRequest

TTY = "/dev/tty"
PREVIEW_LINES = 20
CHOICES = ("allow once", "allow for this session", "deny")

Opener = Callable[[], int]


def open_tty() -> int:
    """A descriptor of the controlling terminal, read and write (``OSError`` when the process has none)."""
    return os.open(TTY, os.O_RDWR | os.O_NOCTTY)


def question(request: ApprovalRequest) -> str:
    """The numbered question for ``request``, neutralised (several lines, ending with the prompt)."""
    tier = getattr(request.tier, "value", request.tier)
    lines = [f"Approval needed: {request.tool_id} (risk {tier}) — {request.description}"]
    if request.decision.rule:
        lines.append(f"  rule: {request.decision.rule}")
    lines.extend("  " + line for line in _preview(request))
    lines.extend(f"  {number}) {choice}" for number, choice in enumerate(CHOICES, start=1))
    proposal = getattr(request, "proposal", None)
    if proposal is not None:  # the narrowest lasting grant (the TUI's modal can widen it)
        lines.append(f"  4) always in this workspace: stores {request.tool_id} {proposal.words()}")
    text = "\n".join(neutralize(line, single_line=True) for line in lines)
    return f"{text}\nChoice [1-{4 if proposal is not None else 3}, Enter denies]: "


def _preview(request: ApprovalRequest) -> list[str]:
    preview = request.preview or {}
    body = preview.get("diff") or preview.get("command") or preview.get("text")
    if body is None:
        body = json.dumps(request.args, ensure_ascii=False, default=str)
    lines = str(body).splitlines() or [""]
    if len(lines) > PREVIEW_LINES:
        lines = [*lines[:PREVIEW_LINES], f"… {len(lines) - PREVIEW_LINES} more line(s)"]
    return lines


class TtyApprover:
    """Asks on the controlling terminal; refuses (and counts) when there is none."""

    def __init__(self, opener: Opener = open_tty) -> None:
        self.opener = opener
        self.refused = 0
        """Calls refused because no terminal could be asked."""

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        from services.tools.calls import ApprovalDecision

        try:
            descriptor = self.opener()
        except OSError:
            self.refused += 1
            return ApprovalDecision.deny(
                f"plain mode: {request.tool_id} needs approval and there is no terminal (/dev/tty) to ask; "
                "run the session in a terminal to be asked"
            )
        try:
            answer = ask(descriptor, question(request))
            if answer == "1":
                return ApprovalDecision.once()
            if answer == "2":
                return ApprovalDecision.session()
            if answer == "4" and getattr(request, "proposal", None) is not None:
                return ApprovalDecision.always(request.proposal.choices[0])
            reason = ask(descriptor, "Reason (optional, Enter for none): ")
        finally:
            os.close(descriptor)
        return ApprovalDecision.deny(reason or "denied by the operator")


def ask(descriptor: int, prompt: str) -> str:
    """Write ``prompt`` on the terminal and read one line back (stripped; empty at end of input)."""
    os.write(descriptor, prompt.encode("utf-8"))
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(descriptor, 1)
        if not chunk:
            break
        line += chunk
    return line.decode("utf-8", errors="replace").strip()


__all__ = ["CHOICES", "TTY", "TtyApprover", "open_tty", "question"]
