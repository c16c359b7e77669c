"""SWE environment: SWE-bench-format tasks, tools, grading and the shipped offline task set."""

__all__: list[str] = []
