from txmq.cli.main import main

main()
