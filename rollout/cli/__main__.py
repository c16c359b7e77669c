"""`python -m rollout.cli ...` is the `conductor` command."""

from rollout.cli.app import main

main()
