"""The allowlist scanner as a long-lived process, run under another Python (one that parses
Megatron-LM's grammar: PEP 701 f-strings need 3.12) by :mod:`stackbot.adapters.scanner_process`.

Started as ``PYTHON -I -S -c <bootstrap> ROOT``: isolated, without site-packages, with only
stackbot's source root on the path, so it imports nothing but the standard library and the
pure scanner (``stackbot.domain`` does no I/O and needs no third-party package).

Protocol on stdin/stdout, one request at a time:

- on start it writes ``{"python": [3, 12, 1]}\\n``;
- a request is a JSON line ``{"generation": "scope", "sizes": [n1, n2, ...]}`` followed by the
  blobs' bytes, concatenated;
- the answer is one JSON line ``{"outcomes": [[entries, lines, error], ...]}``, in order.

End of input ends the process (its parent closed the pipe or died).
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import BinaryIO

from stackbot.domain.allowlist.model import Generation
from stackbot.domain.allowlist.scanner import scan_sources


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError(f"input ended {left} bytes short of a request")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    # The checker shows warnings and goes on; here nobody reads stderr until a crash.
    warnings.simplefilter("ignore")
    stdout.write(json.dumps({"python": list(sys.version_info[:3])}).encode() + b"\n")
    stdout.flush()
    while True:
        header = stdin.readline()
        if not header:
            return
        request = json.loads(header)
        sizes = [int(n) for n in request["sizes"]]
        data = _read_exactly(stdin, sum(sizes))
        sources, start = [], 0
        for size in sizes:
            sources.append(data[start : start + size])
            start += size
        outcomes = scan_sources(Generation(request["generation"]), sources)
        answer = [[list(o.entries), list(o.lines), o.error] for o in outcomes]
        stdout.write(json.dumps({"outcomes": answer}).encode() + b"\n")
        stdout.flush()


def main() -> None:
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
