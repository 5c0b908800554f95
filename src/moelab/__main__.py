from moelab.cli import main

main()
