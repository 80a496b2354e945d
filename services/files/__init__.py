"""Durable files: atomic writes, YAML read and written safely, staged folders that appear whole, crash
points for the kill tests.
"""
