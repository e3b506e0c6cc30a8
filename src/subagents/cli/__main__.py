from subagents.cli import main

main()
