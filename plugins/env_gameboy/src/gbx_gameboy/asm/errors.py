"""The one error type of the assembler: a one-line message prefixed with ``file:line``."""

from __future__ import annotations


class AsmError(Exception):
    """Raised for any problem in the source; ``str(err)`` is ``file:line: message``."""

    def __init__(self, message: str, file: str = "<source>", line: int = 0) -> None:
        self.message = message
        self.file = file
        self.line = line
        super().__init__(f"{file}:{line}: {message}" if line else f"{file}: {message}")
