"""Headless core of Aries.

Nothing in this package imports Textual (an import-linter contract and a subprocess
test keep it so). Heavy libraries (torch, sentence-transformers, chromadb, tantivy,
pypdf, ebooklib, aiohttp) are imported inside the functions that use them.
"""
