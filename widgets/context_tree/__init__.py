"""The context browser's panes: the tree of scopes, the L0/L1 preview and the trace view."""
