"""Entry point: `python -m envs.swe.taskgen generate|verify|sites`."""

from envs.swe.taskgen.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    main()
