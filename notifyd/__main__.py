from notifyd.cli import main

main()
