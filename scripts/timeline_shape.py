#!/usr/bin/python3
"""timeline_shape.py OLD.json NEW.json: both valid against
tests/schema/timeline.schema.json, with the same keys (every object's key
list, in order, and every list's element keys in order) in the big
sections and the same top-level and python keys. Exit 1 otherwise."""
import json
import os
import sys

import jsonschema

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "schema",
                      "timeline.schema.json")


def shapes(lst):
    return sorted({tuple(e.keys()) for e in lst or [] if isinstance(e, dict)})


def main():
    schema = json.load(open(SCHEMA))
    docs = [json.load(open(p)) for p in sys.argv[1:3]]
    ok = True
    for p, d in zip(sys.argv[1:3], docs):
        try:
            jsonschema.validate(d, schema)
            print(f"{p}: valid against the schema")
        except jsonschema.ValidationError as e:
            print(f"{p}: INVALID: {e.message} at {list(e.absolute_path)}")
            ok = False
    old, new = docs
    checks = [
        ("top-level keys", list(old), list(new)),
        ("python keys", list(old.get("python", {})), list(new.get("python", {}))),
        ("files[] keys", shapes(old.get("files")), shapes(new.get("files"))),
        ("missing_paths[] keys", shapes(old.get("missing_paths")),
         shapes(new.get("missing_paths"))),
        ("python.imports[] keys", shapes(old.get("python", {}).get("imports")),
         shapes(new.get("python", {}).get("imports"))),
    ]
    for name, a, b in checks:
        same = a == b
        ok &= same
        print(f"{name}: {'same' if same else 'DIFFERENT'}" + ("" if same else f": {a} vs {b}"))
    for k in ("files", "missing_paths"):
        print(f"{k}: {len(old.get(k) or [])} vs {len(new.get(k) or [])} entries")
    print("python.imports: %d vs %d entries" % (len(old.get("python", {}).get("imports") or []),
                                                 len(new.get("python", {}).get("imports") or [])))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
