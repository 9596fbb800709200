"""In-memory trees for the regeneration tests: path -> source, blobs named by their sha1."""

from __future__ import annotations

import hashlib
import textwrap

from stackbot.domain.allowlist import Generation, MemoryScanCache, TreeScan, scan_tree


def blob_sha(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def scan_sources(files: dict[str, str], generation: Generation) -> TreeScan:
    contents = {path: textwrap.dedent(source).encode() for path, source in files.items()}
    store = {blob_sha(content): content for content in contents.values()}
    blobs = {path: blob_sha(content) for path, content in contents.items()}
    return scan_tree(blobs, store.__getitem__, generation, MemoryScanCache())
