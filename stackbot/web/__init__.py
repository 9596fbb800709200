"""The web layer: webhook intake, health and metrics, dashboard. Build it with
:func:`stackbot.web.app.create_app`."""
