"""stackbot: keeps a long series of dependent pull requests integrable and tested."""

__version__ = "0.1.0"
