"""A minimal example env: how to plug a new env into the harness (see README)."""

from envs.example.env import FileCheckEnv

__all__ = ["FileCheckEnv"]
