"""The type vocabulary of bindings-common/api.toml and its spelling per language.

Types in the manifest are language-neutral:

    str int float bool bytes        scalars
    json                            any JSON-like value
    timestamp                       an instant (aware UTC)
    duration                        a TTL: seconds or a timedelta
    path                            a filesystem path
    embedding                       a vector of floats (1..=4096)
    embedder  action  self          a host embedder, a host action, the class itself
    list[T]  map[T]  T?             sequence, string-keyed mapping, optional
    "a"|"b"                         one of these strings
    Name                            a record or object of the manifest

Python spells a parameter's type as what it accepts (``Iterable[str]``,
``Mapping[str, ...]``) and a result's as what it returns (``list[str]``).
"""

from __future__ import annotations

import re

_PY_SCALAR = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "bytes": "bytes",
    "timestamp": "datetime.datetime",
    "duration": "_TTL",
    "path": "_StrPath",
    "embedding": "Sequence[float]",
    "embedder": "_Embedder",
    "action": "_Action",
    "self": "Self",
    "any": "Any",
    "none": "None",
}

_TS_SCALAR = {
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
    "json": "JsonValue",
    "timestamp": "Date",
    "duration": "number",
    "path": "string",
}


def split_top(s: str, sep: str) -> list[str]:
    """Split `s` on `sep` outside brackets and quotes."""
    parts, depth, cur, quote = [], 0, "", False
    for ch in s:
        if ch == '"':
            quote = not quote
        elif not quote and ch == "[":
            depth += 1
        elif not quote and ch == "]":
            depth -= 1
        if ch == sep and depth == 0 and not quote:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def parse(t: str):
    """A type string as a tree: ("opt", T) | ("list", T) | ("map", T) | ("enum", [..]) | ("name", n)."""
    t = t.strip()
    if t.endswith("?"):
        return ("opt", parse(t[:-1]))
    if t.startswith('"'):
        return ("enum", [json_str(p) for p in split_top(t, "|")])
    m = re.fullmatch(r"(list|map)\[(.*)\]", t)
    if m:
        return (m.group(1), parse(m.group(2)))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t):
        raise ValueError(f"bad manifest type {t!r}")
    return ("name", t)


def json_str(p: str) -> str:
    if not (p.startswith('"') and p.endswith('"')):
        raise ValueError(f"enum members are quoted strings, got {p!r}")
    return p[1:-1]


def python(t: str, *, param: bool, in_class_with_list: bool = False) -> str:
    """The Python annotation of manifest type `t` (a parameter's or a result's)."""
    lst = "builtins.list" if in_class_with_list else "list"

    def go(n) -> str:
        kind, x = n
        if kind == "opt":
            return f"Optional[{go(x)}]"
        if kind == "enum":
            return "Literal[" + ", ".join(f'"{v}"' for v in x) + "]"
        if kind == "list":
            return f"Iterable[{go(x)}]" if param else f"{lst}[{go(x)}]"
        if kind == "map":
            return f"Mapping[str, {go(x)}]" if param else f"dict[str, {go(x)}]"
        if x == "json":
            return "_JSON" if param else "Any"
        return _PY_SCALAR.get(x, x)

    return go(parse(t))


def typescript(t: str) -> str:
    """The TypeScript spelling napi gives manifest type `t` (records keep their names)."""

    def go(n) -> str:
        kind, x = n
        if kind == "opt":
            return f"{go(x)} | undefined | null"
        if kind == "enum":
            return " | ".join(f"'{v}'" for v in x)
        if kind == "list":
            return f"Array<{go(x)}>"
        if kind == "map":
            return f"Record<string, {go(x)}>"
        return _TS_SCALAR.get(x, x)

    return go(parse(t))


def is_optional(t: str) -> bool:
    return parse(t)[0] == "opt"
