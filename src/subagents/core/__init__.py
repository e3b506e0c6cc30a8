"""core — what every layer shares; imports nothing else of subagents, and (but for
``procs``' psutil) nothing outside the standard library.

Its modules are its offer, each small and public: ``events`` (canonical events, stop
reasons, usage), ``ids`` (run and job ids), ``paths`` (the state directory's layout),
``files`` (private dirs, atomic and once-only writes, JSON reads), ``records`` (a JSON value
read back checked as a record), ``upgrade`` (each record's version; earlier shapes read as
today's), ``procs`` (process identity and process groups), ``waker`` (directory wake-ups),
``tail`` (reading what a file gained), ``clock`` (ISO and epoch times), ``childtext`` (a
child's text made safe to show), ``inputs`` (the checks every surface applies to what a caller gives),
``controlsock`` (a run's control endpoint).
"""
