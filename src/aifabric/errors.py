"""Errors the user can act on. Each names the field (a dotted path) and the reason."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InputError(Exception):
    """Bad input: a scenario, a flag, a file. The CLI prints every problem and exits 2."""

    def __init__(self, problems: list[Problem] | Problem | str, source: str | None = None):
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems = list(problems)
        self.source = source
        super().__init__("; ".join(str(p) for p in self.problems))
