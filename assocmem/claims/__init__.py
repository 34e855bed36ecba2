"""Claim modules: each registers checks for IDs declared in ``catalogue``."""
