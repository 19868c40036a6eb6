"""A JSON Schema found valid is checked once per test process, not once per MCP session.

The SDK's client checks each tool's output schema against JSON Schema's metaschema the first time a
session sees a result of that tool (`ClientSession._output_schema_validator`): 7 ms for mnote's
envelope, a tenth of an in-process test's CPU, as the unit tests open thousands of sessions on the
same few schemas. `remember_valid_schemas` (tests/conftest.py) keeps the schemas that passed
`Draft202012Validator.check_schema` for the process and skips only their repeats: the first check of
each runs as before, and a schema that fails is never kept, so it fails every time it is checked.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

_VALID: set[str] = set()


def remember_valid_schemas() -> None:
    check = Draft202012Validator.check_schema.__func__  # type: ignore[attr-defined]  # the classmethod's function

    def check_schema(cls: type[Draft202012Validator], schema: Any, *args: Any, **kwargs: Any) -> None:
        if args or kwargs or cls is not Draft202012Validator:  # another format checker: not remembered
            check(cls, schema, *args, **kwargs)
            return
        key = json.dumps(schema, sort_keys=True, default=repr)
        if key not in _VALID:
            check(cls, schema)
            _VALID.add(key)

    if not getattr(Draft202012Validator.check_schema, "remembers", False):
        check_schema.remembers = True  # type: ignore[attr-defined]
        setattr(Draft202012Validator, "check_schema", classmethod(check_schema))  # noqa: B010
