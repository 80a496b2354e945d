"""Lasting, scoped grants: "always in this workspace" (issue 31 items 1-2).

- ``pattern``: a grant's pattern in words (``ls *``, ``docs/``) and back, and what a *plain*
  argument is (what a trailing ``*`` may match);
- ``matcher``: whether a grant covers a call (the parsed argv, the resolved executable, the cwd, the
  paths under the roots; wrappers, options and look-alikes never);
- ``proposal``: the narrowest grant for a call, and the widenings the operator may choose;
- ``store``: the grants of one workspace in the operator's settings store (``$ARIES_HOME``), keyed by
  the workspace's identity, with use counts and expiry; grants that combine into running code unasked.

The records themselves are ``services.settings.operator.LastingGrant`` (the store's file format).
Nothing here imports Textual; the pipeline (``services.tools.pipeline``) consults the store only when
the policy says ``confirm``, so a grant never overrides a deny rule, the roots, the sandbox, the
profile, or strict mode (where lasting grants do not apply).
"""
