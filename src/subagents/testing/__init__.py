"""Test support that ships with the package: a scriptable fake agent CLI and the
backend conformance kit, so a backend plugin can be tested the way the built-ins are."""
