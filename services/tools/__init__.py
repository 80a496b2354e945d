"""Governed tools: a registry of providers, one policy gateway, and the builtin tools.

Every tool call goes through ``services.tools.gateway.execute_tool_call_with_policy``; the
implementations in ``fs``, ``shell`` and ``web`` refuse to run without the capability the
gateway issues for each call.  This package imports nothing heavy: ``shell`` (psutil) and
``web`` (aiohttp, imported inside its functions) load when the registry first needs them.
"""
