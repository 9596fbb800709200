"""Adapters: the one module per outside system (git, GitHub) that talks to it."""
