"""Commands in PR comments (the ``pr_command`` task): one module per command, routed by type.

- :mod:`.ok_to_test`: ``/ok to test <sha>`` (vetters), approve the PR's current head.
- :mod:`.retest`: ``/stackbot retest [TEST_SET | own:N]`` (vetters), new jobs.
- :mod:`.status`: ``/stackbot status``, the PR's state as stored.
- :mod:`.dependency`: ``/stackbot depends-on #N`` / ``no-dependency #N`` (author or vetters).
- :mod:`.restack`: ``/stackbot restack [--push]`` (author or vetters).
- :mod:`.port`: ``/stackbot port <branch>`` (vetters).
- :mod:`.unknown`: any other ``/stackbot`` word, answered with usage.

:mod:`.router` maps a command type (:mod:`stackbot.domain.commands` parses a comment into
one) to its handler; :mod:`.task` parses the comment once, routes it, replies and queues.

Edited comments count only for ``/ok to test`` naming the current head; anything else in an
edit is ignored silently. Comments without a command are ignored silently (one that may declare
a dependency syncs the PR); commands written by bots are ignored.

Replies are fixed texts (nothing the commenter wrote is echoed) and limited, since each one is
one of GitHub's content writes the reports need: a non-vetter gets at most one reply per PR,
and every user at most ``settings.command_replies_per_hour`` an hour per repository
(:mod:`stackbot.db.replies_store`). A command over the limit is still acted on, silently.

To add a command: its type and parse rule in :mod:`stackbot.domain.commands`, one module here
with a ``router`` and its handler, and that router in :data:`.task.ROUTER`.
"""

from __future__ import annotations

from stackbot.services.commands.task import handle_pr_command, register_tasks

__all__ = ["handle_pr_command", "register_tasks"]
