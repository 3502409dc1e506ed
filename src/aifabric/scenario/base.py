"""Base of every scenario model: unknown fields are errors, values are immutable, numbers are numbers.

Every number of a scenario ends up in the event loop's arithmetic: infinite, NaN and denormal values (`.inf`,
`"1e999"`, `5e-324`) would hang or overflow it, so they are refused here, by field, for the CLI and Python users
alike; `true` is not a count (pydantic would read it as 1).
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

# a float of a scenario that is not 0 is within these magnitudes (a rate, a time, a ratio, a price)
MIN_MAGNITUDE = 1e-9
MAX_MAGNITUDE = 1e15


def _admits_bool(annotation: Any) -> bool:
    if annotation is bool or annotation is Any:
        return True
    return any(_admits_bool(a) for a in typing.get_args(annotation) if not isinstance(a, (int, str)))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name in cls.model_fields:
            if not _admits_bool(cls.model_fields[info.field_name].annotation):
                raise ValueError(f"must be a number, not {str(value).lower()}")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _sane_magnitude(cls, value: Any) -> Any:
        for x in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(x, float) and x != 0 and not MIN_MAGNITUDE <= abs(x) <= MAX_MAGNITUDE:
                raise ValueError(f"must be 0 or of magnitude {MIN_MAGNITUDE:g} to {MAX_MAGNITUDE:g} (got {x!r})")
        return value
