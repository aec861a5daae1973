"""Reading JSON files and JSON-lines rows, with errors that name the file and line.

data = read_json("calibration.json", "calibration file")
record, why = json_object(line)     # one JSON-lines row, or why it is none
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional


def read_json(path: str, what: str = "file") -> Any:
    """The JSON value of the file `path`.

    Args:
      path: The file.
      what: What the file is, for messages ("calibration file").

    Raises:
      FileNotFoundError: "{what} {path} not found".
      ValueError: in one line naming `path`: not JSON (with the line), not
        UTF-8, nested too deeply, or a number Python cannot read.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path} not found")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error.msg} at line {error.lineno})") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to be a {what}") from None
    except (UnicodeDecodeError, ValueError) as error:  # Not UTF-8; an integer of 5,000 digits.
        raise ValueError(f"{path}: not a JSON {what} ({error})") from None


def read_json_or_none(path: str) -> Optional[Any]:
    """The JSON value of `path`, or None when it is absent, torn or no JSON
    (for caches, which are then made again)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None


def json_object(text: str) -> tuple[Optional[dict], Optional[str]]:
    """One JSON-lines row: (its object, None), or (None, why it is not one)."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"invalid JSON ({error.msg})"
    if not isinstance(record, dict):
        return None, f"expected a JSON object, got {type(record).__name__}"
    return record, None
