"""The SDK keeps to docs/openapi.yaml: every route, schema and field of the
document has a counterpart here, or sdk/conformance.json names it as left
out (with why) or pending (with the issue it lands with); and nothing here
is missing from the document."""

from __future__ import annotations

import fnmatch
import inspect
import json
import re
from pathlib import Path
from typing import Dict, Set

import agentsandbox
from agentsandbox import _async_client, _client, _routes
from agentsandbox._errors import ERROR_CLASSES
from agentsandbox._models import WIRE_TYPES, wire_fields

ROOT = Path(__file__).resolve().parents[3]
DOC = json.loads((ROOT / "docs" / "openapi.yaml").read_text())
RULES = json.loads((ROOT / "sdk" / "conformance.json").read_text())


def excused(key: str) -> str:
    """Why key is left out or pending, or ""."""
    for table in ("left_out", "pending"):
        for pattern, why in RULES[table].items():
            if fnmatch.fnmatchcase(key, pattern):
                return why
    return ""


def doc_routes() -> Set[str]:
    return {f"{m.upper()} {p}" for p, item in DOC["paths"].items() for m in item if m != "parameters"}


def test_routes() -> None:
    ours = {f"{r.method} {r.template}" for r in _routes.ALL}
    missing = sorted(r for r in doc_routes() - ours if not excused(r))
    assert not missing, f"routes of docs/openapi.yaml the SDK does not call: {missing}"
    assert not ours - doc_routes(), f"routes the SDK calls that docs/openapi.yaml lacks: {sorted(ours - doc_routes())}"


def test_routes_used_by_both_clients() -> None:
    names = [n for n, v in vars(_routes).items() if isinstance(v, _routes.Route)]
    for mod in (_client, _async_client):
        src = inspect.getsource(mod)
        unused = [n for n in names if f"routes.{n}" not in src]
        assert not unused, f"{mod.__name__} never calls {unused}"


def schema_props(name: str) -> Set[str]:
    s = DOC["components"]["schemas"][name]
    return set(s.get("properties", {}))


def test_schemas_and_fields() -> None:
    by_schema: Dict[str, type] = {}
    for cls in WIRE_TYPES:
        for name in cls.__wire__:  # type: ignore[attr-defined]
            by_schema[name] = cls
    problems = []
    for name in DOC["components"]["schemas"]:
        cls = by_schema.get(name)
        if cls is None:
            if not excused(name):
                problems.append(f"schema {name} has no dataclass (or an entry in sdk/conformance.json)")
            continue
        ours = set(wire_fields(cls))
        theirs: Set[str] = set()
        for n in cls.__wire__:  # type: ignore[attr-defined]
            theirs |= schema_props(n)
        problems += [f"{name}.{f} has no field in {cls.__name__}" for f in sorted(theirs - ours) if not excused(f"{name}.{f}")]
        problems += [f"{cls.__name__}.{f} is not in {'/'.join(cls.__wire__)}" for f in sorted(ours - theirs)]  # type: ignore[attr-defined]
    problems += [f"{n} (of {c.__name__}) is not a schema of the document" for n, c in by_schema.items()
                 if n not in DOC["components"]["schemas"]]
    assert not problems, "\n".join(problems)


def test_error_codes() -> None:
    desc = DOC["components"]["schemas"]["Error"]["properties"]["code"]["description"]
    listed = desc.split(":", 1)[1].split(".")[0]  # "a, b (400), c, …"
    codes = {re.sub(r"\s*\(\d+\)$", "", c.strip()) for c in listed.split(",")}
    assert "sandbox_not_found" in codes and "workspace_full" in codes, codes
    missing = sorted(c for c in codes if c not in ERROR_CLASSES)
    assert not missing, f"error codes without an exception class: {missing}"
    for code, cls in ERROR_CLASSES.items():
        assert code in desc, f"{cls.__name__} stands for {code}, which docs/openapi.yaml does not list"
    assert all(getattr(agentsandbox, c.__name__) is c for c in ERROR_CLASSES.values())


def test_parameters() -> None:
    """Every query and header parameter is one the clients send."""
    src = inspect.getsource(_client) + inspect.getsource(_async_client)
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            for prm in op.get("parameters", []):
                key = f"{method.upper()} {path} {prm['in']} {prm['name']}"
                assert f'"{prm["name"]}"' in src or excused(key), f"{key} is never sent"
