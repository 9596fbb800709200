"""Task workers and the durable task queue they share (see :mod:`stackbot.worker.queue`)."""
