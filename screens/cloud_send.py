"""The cloud bridge's ``ask`` modal: exactly the text that would leave the machine, Send or Don't send.

Dismisses with ``True`` (send) or ``False`` (don't send; also Esc).  The text shown is the redacted
question that :func:`services.bridge.maybe_ask_cloud` passes to its ``approve`` callable — the
same string goes on the wire, byte for byte.  :func:`modal_approver` turns an App's
``push_screen`` into that callable.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from services.bridge import Approve
from services.workspace.bridge_config import BridgeConfig
from widgets.safe import plain

_PLACEHOLDER = re.compile(r"\[REDACTED:([a-z_]+)#\d+\]")


def redaction_summary(text: str) -> str:
    """``email 2, path 1`` from the placeholders in ``text`` (``none`` when there are none)."""
    counts = Counter(match.group(1) for match in _PLACEHOLDER.finditer(text))
    return ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "none"


class CloudSendScreen(ModalScreen[bool]):
    CSS_PATH = "cloud_send.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "send", "Send", id="cloud.send", tooltip="Send exactly this text to the cloud model"),
        Binding(
            "n",
            "dont_send",
            "Don't send",
            id="cloud.dont_send",
            tooltip="Keep the question on this machine; the local answer stands",
        ),
        Binding("escape", "dont_send", "Don't send", id="cloud.cancel", tooltip="Close without sending"),
    ]

    def __init__(self, text: str, config: BridgeConfig) -> None:
        super().__init__()
        self.text = text
        self.config = config

    def compose(self) -> Any:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_row("to", plain(f"{self.config.model or '?'} at {self.config.base_url or '?'}", single_line=True))
        table.add_row("redacted", plain(redaction_summary(self.text), single_line=True))
        with Vertical(id="cloud-send"):
            yield Static(Text("Send this question to the cloud?", style="bold"), id="cloud-send-title")
            with VerticalScroll(id="cloud-send-body"):
                yield Static(table, id="cloud-send-summary")
                yield Static(plain(self.text), id="cloud-send-text")
            yield Static("s send  ·  n don't send  ·  Esc don't send", id="cloud-send-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#cloud-send-body").focus()

    def action_send(self) -> None:
        self.dismiss(True)

    def action_dont_send(self) -> None:
        self.dismiss(False)


def modal_approver(push_screen: Callable[..., Any], config: BridgeConfig) -> Approve:
    """The ``approve`` callable of the TUI: shows :class:`CloudSendScreen` (with the App's
    ``push_screen``), returns the choice."""

    async def approve(text: str) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def done(result: bool | None) -> None:
            if not future.done():
                future.set_result(bool(result))

        push_screen(CloudSendScreen(text, config), done)
        return await future

    return approve


__all__ = ["CloudSendScreen", "modal_approver", "redaction_summary"]
