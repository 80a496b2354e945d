"""The audit store: the SQLite database (db) and the append-only log of decisions and calls over it
(log).
"""
