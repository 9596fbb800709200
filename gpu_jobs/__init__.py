"""What runs on GPU nodes and what launches it.

Imports nothing from ``stackbot`` and needs only the standard library, torch and pytest at run
time, so a GPU node installs it without the web stack. The contract with stackbot is a JSON job
spec and a JSON result (:mod:`gpu_jobs.spec`); ``python -m gpu_jobs run`` is the node side.
"""

__version__ = "0.1.0"
