"""The ``axiom://`` context filesystem: URIs, scopes, the context tree on disk, tiers.

Headless (no Textual).  Import from the modules directly (``services.context.uri``,
``services.context.tree`` ...); this package imports nothing heavy.
"""
