"""Adapters: the one module per outside system (git, GitHub, uvicorn) that talks to it."""
