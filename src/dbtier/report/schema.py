"""The JSON contract: every document dbtier writes follows result.schema.json (packaged beside this
module). `validate` checks one; the test suite sets DBTIER_CHECK_SCHEMA=1 so that every document
written while it runs is checked as it is written."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("result.schema.json")
#: set (to 1) to check every document as it is written: the test suite does
CHECK_ENV = "DBTIER_CHECK_SCHEMA"


@functools.cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@functools.cache
def _validator():
    import jsonschema

    return jsonschema.Draft202012Validator(schema())


def problems(doc: dict) -> list[str]:
    """What in `doc` breaks the schema, one line each."""
    return [f"{'/'.join(str(p) for p in err.absolute_path) or '(top)'}: {err.message}"
            for err in sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]


def check_if_asked(doc: dict) -> None:
    """Raises ValueError when DBTIER_CHECK_SCHEMA is set and `doc` breaks the schema."""
    if not os.environ.get(CHECK_ENV):
        return
    found = problems(doc)
    if found:
        raise ValueError(f"a {doc.get('kind')} document breaks result.schema.json: " + "; ".join(found[:5]))
