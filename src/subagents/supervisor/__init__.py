"""supervisor — the process that owns one run (``python -m subagents.supervisor RUN_DIR``):
spawns the child, reads its stream, writes the run's artifacts, decides completion and
writes ``result.json``. Standard library only (and orjson for long streams), so it starts
fast; this ``__init__`` is empty on purpose, and the package offers its modules.

May import: backends, present, core.
"""
