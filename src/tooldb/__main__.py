"""`python -m tooldb` runs the CLI."""

from .cli import main

main()
