"""``stackbot demo``: a Megatron-like repository, a stacked series, and the whole pipeline
running offline on this machine against the GitHub stand-in."""
