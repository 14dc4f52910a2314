from venomx.cli.app import main

main()
