"""Search every conversation of a workspace (issue 32 item 1; the index issue 30 brings turns back from).

``documents`` turns transcript entries into documents (secrets redacted), ``store`` keeps the derived
Tantivy index in ``<workspace>/cache/conversations/`` current and rebuildable under one writer lock,
``query`` answers a query with ranked, highlighted hits. A package of its own rather than a module of
``services.conversation``: redaction comes from the bridge's detectors, and the bridge records into a
conversation, so a module inside ``services.conversation`` would close an import circle.
"""
