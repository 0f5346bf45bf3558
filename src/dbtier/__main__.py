from dbtier.cli import main

main()
