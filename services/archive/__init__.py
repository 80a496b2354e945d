"""Archives below both bundles and context packages: the reader that refuses hostile members, the
deterministic writer, MIME types.
"""
