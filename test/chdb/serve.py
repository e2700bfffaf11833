"""A current ClickHouse (chDB, in process) for the tests: one session, statements from stdin.

Each stdin line is a JSON request {"id", "sql", "format"?, "database"?, "settings"?, "data"?}; each
stdout line answers it, {"id", "ok": true, "text"} or {"id", "ok": false, "error"}. The
settings are applied for that statement only (SET, then SET ... = DEFAULT), in the
database given (USE), as a ClickHouse server applies a request's settings and database.
"data" (base64) is the body of an INSERT ... FORMAT RowBinary: binary rows do not travel
inside the statement's text.
"""
import base64
import json
import os
import re
import sys
import tempfile

from chdb import session


def literal(value: object) -> str:
    text = str(value)
    if isinstance(value, (int, float)) or text.isdigit():
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


BINARY_INSERT = re.compile(r"^INSERT INTO (\w+) \(([^)]*)\) FORMAT RowBinary$")


def binary_insert(store: "session.Session", database: str, sql: str, data: bytes) -> None:
    """INSERT ... FORMAT RowBinary with its rows: read from a file through file(), with the table's column types."""
    match = BINARY_INSERT.match(sql.strip())
    if not match:
        raise ValueError(f"binary data with a statement other than INSERT INTO t (columns) FORMAT RowBinary: {sql}")
    table, names = match.group(1), [name.strip() for name in match.group(2).split(",")]
    described = store.query(
        f"SELECT name, type FROM system.columns WHERE database = {literal(database or 'default')} AND table = {literal(table)}",
        "JSONEachRow",
    )
    types = {row["name"]: row["type"] for row in map(json.loads, described.bytes().decode("utf-8").splitlines())}
    structure = ", ".join(f"{name} {types[name]}" for name in names)
    handle, path = tempfile.mkstemp(suffix=".bin")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        store.query(f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM file({literal(path)}, 'RowBinary', {literal(structure)})")
    finally:
        os.unlink(path)


def main() -> None:
    store = session.Session(sys.argv[1])
    for line in sys.stdin:
        request = json.loads(line)
        answer = {"id": request["id"]}
        settings = request.get("settings") or {}
        try:
            if request.get("database"):
                store.query(f"USE {request['database']}")
            for name, value in settings.items():
                store.query(f"SET {name} = {literal(value)}")
            if request.get("data"):
                binary_insert(store, request.get("database") or "", request["sql"], base64.b64decode(request["data"]))
                result = None
            else:
                result = store.query(request["sql"], request["format"]) if request.get("format") else store.query(request["sql"])
            try:
                text = result.bytes().decode("utf-8", "replace") if result is not None else ""
            except Exception:  # a statement with no result set
                text = ""
            answer.update(ok=True, text=text)
        except Exception as error:  # the statement's own error, for the caller to throw
            answer.update(ok=False, error=str(error))
        finally:
            for name in settings:
                try:
                    store.query(f"SET {name} = DEFAULT")
                except Exception:
                    pass
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
