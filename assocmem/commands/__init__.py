"""CLI sub-commands; each module exposes ``register(subparsers)``."""
