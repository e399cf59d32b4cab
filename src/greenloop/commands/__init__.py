"""Thin CLI handlers: `<area>.<name>(args) -> int`. Each calls the core once and renders."""
