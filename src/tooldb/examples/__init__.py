"""Example tools bundled with tooldb, so the README's demo runs on a fresh install."""
