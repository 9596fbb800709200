"""Fixture code shared by the test packages (real services, real repos)."""
