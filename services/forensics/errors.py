"""ForensicsError: a forensics question that cannot be answered, as the CLI's one line and the HTTP 4xx both say it."""

from __future__ import annotations

from almanac.events.errors import RuleError
from almanac.events.forensics.state_paths import PathError


class ForensicsError(Exception):
    """Input that cannot be answered: an HTTP status, a code, a message, the field at fault and what is allowed there."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 allowed: list[str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.allowed = status, code, message, field, allowed

    @classmethod
    def of(cls, error: PathError | RuleError) -> ForensicsError:
        return cls(422, error.code, error.message, error.field, error.allowed)
