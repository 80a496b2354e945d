"""Options that several ``aries`` sub-commands share (a module of its own: no import cycles)."""

from __future__ import annotations

import argparse


def workspace_option(parser: argparse.ArgumentParser) -> None:
    """``-w/--workspace`` on a sub-command. ``SUPPRESS``: without it, the sub-command's default would
    overwrite ``aries -w NAME <command> …``."""
    parser.add_argument(
        "-w", "--workspace", metavar="W", default=argparse.SUPPRESS, help="the workspace (default: ephemeral)"
    )
