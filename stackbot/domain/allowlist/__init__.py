"""The process-group usage allowlist of Megatron-LM: the two checker generations' scanners,
the file's model, and its regeneration on merged trees (DESIGN.md, "Facts about the target
repository"). Pure: callers read blobs from git and write the result back."""

from stackbot.domain.allowlist.model import (
    Allowlist,
    AllowlistFormatError,
    Generation,
    detect_generation,
    parse_allowlist,
    render_allowlist,
)
from stackbot.domain.allowlist.regen import (
    AllowlistCheck,
    EntryTally,
    LocalScanner,
    MemoryScanCache,
    Regeneration,
    ScanCache,
    Scanner,
    TreeReads,
    TreeScan,
    check,
    choose_comment,
    regenerate,
    scan_tree,
)
from stackbot.domain.allowlist.scanner import (
    SCANNER_VERSION,
    ScanOutcome,
    is_scanned_path,
    scan_current,
    scan_first_generation,
)

__all__ = [
    "SCANNER_VERSION",
    "Allowlist",
    "AllowlistCheck",
    "AllowlistFormatError",
    "EntryTally",
    "Generation",
    "LocalScanner",
    "MemoryScanCache",
    "Regeneration",
    "ScanCache",
    "ScanOutcome",
    "Scanner",
    "TreeReads",
    "TreeScan",
    "check",
    "choose_comment",
    "detect_generation",
    "is_scanned_path",
    "parse_allowlist",
    "regenerate",
    "render_allowlist",
    "scan_current",
    "scan_first_generation",
    "scan_tree",
]
