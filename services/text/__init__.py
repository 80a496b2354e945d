"""Text as data: neutralising untrusted text for a terminal, HTML to text, and the names a user may
give things.
"""
