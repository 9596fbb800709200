"""A faithful local stand-in for GitHub: REST API, hosted git repos, signed webhook deliveries.

Used by the tests and by ``stackbot demo``; stackbot's own code talks to it exactly as it talks
to api.github.com (through :mod:`stackbot.adapters.github`). Entry points:
:class:`~stackbot.standin.server.StandinServer` (a running server),
:func:`~stackbot.standin.app.create_standin_app` (the ASGI app) and
:class:`~stackbot.standin.control.StandinControl` (what users and GitHub do).
"""

from stackbot.standin.app import create_standin_app
from stackbot.standin.control import StandinControl, StandinError
from stackbot.standin.server import StandinServer
from stackbot.standin.state import StandinState

__all__ = ["StandinControl", "StandinError", "StandinServer", "StandinState", "create_standin_app"]
