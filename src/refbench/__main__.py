from refbench.cli import main

main()
