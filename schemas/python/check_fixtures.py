"""Validates every fixture with Python's jsonschema (format checking on) against the
record schema, and prints {"<dir>/<file>": true|false, ...} as JSON.

The gateway validates with AJV; this is the independent second opinion that a
producer in another language gets from a standard validator. Usage:
    python check_fixtures.py <usage-record.schema.json> <fixtures dir>
"""

import json
import pathlib
import sys

import jsonschema


def main() -> None:
    schema = json.loads(pathlib.Path(sys.argv[1]).read_text(encoding="utf-8"))
    fixtures = pathlib.Path(sys.argv[2])
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    checker = validator_class.FORMAT_CHECKER
    if "date-time" not in checker.checkers:
        sys.exit("jsonschema cannot check date-time: rfc3339-validator is not installed")
    validator = validator_class(schema, format_checker=checker)
    results = {}
    for folder in ("valid", "invalid"):
        for path in sorted((fixtures / folder).glob("*.json")):
            document = json.loads(path.read_text(encoding="utf-8"))
            record = document if folder == "valid" else document["record"]
            results[f"{folder}/{path.name}"] = validator.is_valid(record)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
