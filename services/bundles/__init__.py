"""Workspace bundles: deterministic ``.tar.zst`` export, and an import that is checked while it streams."""

from services.bundles.manifest import FORMAT_VERSION, BundleError, BundleLimits

__all__ = ["FORMAT_VERSION", "BundleError", "BundleLimits"]
