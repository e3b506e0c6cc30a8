"""What the tests share, by subject: the fake agent and its streams, the command line, git
repositories, waiting and checks, the MCP client, Claude Code's and pi's parents, the web
server, a pseudo-terminal. Fixtures stay in tests/conftest.py; a test module imports from
here, never from another test module (tests/test_layout.py checks it)."""
