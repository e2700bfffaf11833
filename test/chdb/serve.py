"""A current ClickHouse (chDB, in process) for the tests: one session, statements from stdin.

Each stdin line is a JSON request {"id", "sql", "format"?, "database"?, "settings"?}; each
stdout line answers it, {"id", "ok": true, "text"} or {"id", "ok": false, "error"}. The
settings are applied for that statement only (SET, then SET ... = DEFAULT), in the
database given (USE), as a ClickHouse server applies a request's settings and database.
"""
import json
import sys

from chdb import session


def literal(value: object) -> str:
    text = str(value)
    if isinstance(value, (int, float)) or text.isdigit():
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
