"""Realism check of ``stackbot restack`` and ``stackbot port`` on a real Megatron-LM clone.

    python benchmarks/realism_restack_port.py /work/.mirror/NVIDIA+Megatron-LM/repo [--prs 12] [--onto dev]

The clone is never written: a ``git clone --mirror --shared`` of it in a temporary directory
takes the objects stackbot writes. For the most recently updated PR heads it

- ports each PR (its merge base with main → its head) onto ``--onto`` and prints the outcome
  per file group or the conflicting paths, and
- restacks each PR's own commits (those not on main) onto main's head, which is what
  ``/stackbot restack`` does for a PR whose base moved, and prints the per-commit outcomes;

each with its time, and a baseline measured in the same run: one plain ``git merge-tree
--write-tree main <head>`` of the same PR (what a merge of the branch costs), so the ratio says
how much the per-commit replay and the port's bookkeeping cost beyond a single merge.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stackbot.adapters.git import GitRepository
from stackbot.domain.types import PrNumber
from stackbot.services.port import PortRequest, port
from stackbot.services.restack import RestackRequest, restack


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("clone", type=Path)
    parser.add_argument("--prs", type=int, default=12)
    parser.add_argument("--onto", default="dev")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stackbot-realism-") as tmp:
        work = Path(tmp) / "repo.git"
        subprocess.run(
            ["git", "clone", "-q", "--mirror", "--shared", str(args.clone), str(work)], check=True
        )
        refs = subprocess.run(
            ["git", "for-each-ref", "--sort=-committerdate", f"--count={args.prs}",
             "--format=%(refname)", "refs/pull/*/head"],
            cwd=work, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        repo = GitRepository(work)
        ratios_port, ratios_restack = [], []
        for ref in refs:
            number = int(ref.split("/")[2])
            head = repo.rev_parse(ref)
            base = repo.merge_base(head, repo.rev_parse("main"))
            if base is None:
                continue
            started = time.perf_counter()
            repo.merge_tree(repo.rev_parse("main"), head)
            baseline = time.perf_counter() - started
            started = time.perf_counter()
            ported = port(repo, PortRequest(PrNumber(number), head, base, args.onto))
            port_s = time.perf_counter() - started
            started = time.perf_counter()
            restacked = restack(repo, RestackRequest(PrNumber(number), head, base, "main"))
            restack_s = time.perf_counter() - started
            groups: dict[str, int] = {}
            for item in ported.files:
                groups[item.outcome.value] = groups.get(item.outcome.value, 0) + 1
            port_text = (
                f"applied {groups}"
                if ported.commit
                else f"conflicts in {len(ported.conflicts)} files"
            )
            outcomes = [c.outcome.value for c in restacked.commits]
            print(
                f"#{number}: port onto {args.onto}: {port_text} ({port_s:.2f}s); restack onto "
                f"main: {len(outcomes)} commits {dict((o, outcomes.count(o)) for o in set(outcomes))}"
                f", {len(restacked.surprises)} surprises ({restack_s:.2f}s); one merge-tree "
                f"{baseline:.2f}s"
            )
            ratios_port.append(port_s / max(baseline, 1e-3))
            tried = len([o for o in outcomes if o != "not replayed"])
            if tried:
                ratios_restack.append(restack_s / max(baseline, 1e-3) / tried)
        if ratios_port:
            print(f"port / one merge-tree: median {statistics.median(ratios_port):.1f}x")
        if ratios_restack:
            print(
                "restack per attempted commit / one merge-tree: median "
                f"{statistics.median(ratios_restack):.1f}x"
            )
        repo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
