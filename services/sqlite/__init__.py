"""SQLite helpers every store shares: the integrity check of an imported database, read-only opening."""
