from subagents.cli.entry import main

main()
