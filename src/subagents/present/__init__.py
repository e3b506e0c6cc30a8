"""present — how things are told to a person, in words shared by every view: the progress
formatter (``progress``: one wording for the live view and ``transcript.md``, with
``humanize``), failure diagnostics (``diagnostics``), the jsonl progress feed (``feed``) and
what a job view shows of its runs (``jobview``, ``runstate``).

Standard library only: the supervisor writes its transcript with it. The package offers its
modules (this ``__init__`` is empty); the rich and Textual views live with the command line.

May import: core.
"""
