"""lifecycle — the durable record of jobs: the session log (``sessionlog``: lifecycle
entries, one whole line per append under a lock; reading, following and selecting them for
``history``/``watch``), the hooks and notices run when a job ends (``hooks``), job ends told
once to a reader (``notices``) and cost totals over the logs (``cost``).

Its modules are its offer. May import: core, config. It knows nothing of jobs: a job's
driver hands it plain entries.
"""
