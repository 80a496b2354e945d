"""The JSON Schema validator class for tool arguments (draft 2020-12 with two changes).

Split from ``registry.py``; built once, on first use (jsonschema is imported lazily).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

_VALIDATOR_CLASS: Any = None


def validator_class() -> Any:
    """Draft 2020-12, built once on first use, with two changes for tool arguments.

    ``number`` means a finite number; and a message quotes at most ~60 characters of the value it
    is about, so that ``path: '…' is too long`` still says what is wrong after any cut to one line.
    """
    global _VALIDATOR_CLASS
    if _VALIDATOR_CLASS is None:
        from jsonschema import Draft202012Validator, validators

        base = Draft202012Validator.TYPE_CHECKER

        def is_finite_number(checker: Any, instance: Any) -> bool:
            return bool(base.is_type(instance, "number")) and math.isfinite(instance)

        _VALIDATOR_CLASS = validators.extend(  # type: ignore[no-untyped-call]
            Draft202012Validator,
            validators={name: _short_messages(fn) for name, fn in Draft202012Validator.VALIDATORS.items()},
            type_checker=base.redefine("number", is_finite_number),
        )
    return _VALIDATOR_CLASS


def _short_messages(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        for error in keyword(validator, value, instance, schema) or ():
            # Only this keyword's own errors (jsonschema fills in ``validator`` after we yield them);
            # errors from nested subschemas were shortened where they arose.
            if not isinstance(error.validator, str) and isinstance(instance, (str, list, dict)):
                quoted = repr(instance)
                if len(quoted) > 60 and quoted in error.message:
                    error.message = error.message.replace(quoted, f"{quoted[:48]}…{quoted[-1]}")
            yield error

    return check


__all__ = ["validator_class"]
