"""Settings read from outside a workspace: the environment (ARIES_*), Aries's home, and the operator's
settings store.
"""
