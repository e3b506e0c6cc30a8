"""core — what every layer shares; imports nothing else of subagents, and (but for
``procs``' psutil) nothing outside the standard library.

Its modules are its offer, each small and public:
``events`` (canonical events, stop reasons, usage), ``ids`` (run and job ids),
``paths`` (the state directory's layout), ``files`` (private dirs, atomic and once-only
writes, tails), ``procs`` (process identity and process groups), ``waker`` (directory
wake-ups), ``lazy`` (lazy package exports).
"""
