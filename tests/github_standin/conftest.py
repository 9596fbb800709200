"""The GitHub stand-in's fixtures (tests/support/standin.py) for this package."""

from tests.support.standin import app_key, app_settings, shared_standin, standin, token_settings

__all__ = ["app_key", "app_settings", "shared_standin", "standin", "token_settings"]
