"""Timestamps in one format: UTC, ISO 8601, millisecond precision, ``Z`` suffix."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    return format_ts(datetime.now(UTC))


def format_ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
