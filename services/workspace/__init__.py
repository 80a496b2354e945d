"""A workspace folder: its layout (paths), its configuration and settings, the manager that creates,
opens and deletes it, its leases, artifacts and transcripts files, and the bridge section of
workspace.yaml.
"""
