"""The pure domain core: series graph, commands, integration policy, allowlist model, result
comparison and report rendering. Nothing here imports PyGithub, GitPython, an SQL engine or
torch, and nothing here does I/O: callers fetch the inputs and apply the results."""
