"""demo — shipped, but not the engine: the loopback mock model server (``mockmodel``) that
speaks the agent CLIs' model APIs, so the demo and the tests run real CLIs offline.

May import: nothing else of subagents; the engine never imports it.
"""
