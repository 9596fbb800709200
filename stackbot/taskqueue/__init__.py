"""The task framework: the durable queue (:mod:`.queue`), the registry of handlers and the
context a handler runs with (:mod:`.registry`), and the webhook intake's write (:mod:`.inbox`).

It sits below ``services/``: it imports the domain and the database, never a service. The
worker process (:mod:`stackbot.worker`) assembles the services' handlers and runs them.
"""

from stackbot.taskqueue.registry import Handler, TaskContext, TaskRegistry

__all__ = ["Handler", "TaskContext", "TaskRegistry"]
