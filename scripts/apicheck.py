"""Drift checks: each binding's generated declarations against bindings-common/api.toml.

Each check reads what the binding's own generator produced and committed
(napi's index.d.ts, uniffi's Kotlin sources, the MCP server's golden tool
list, each kept current by its own staleness check) and returns one line per
disagreement. Rules per binding are in docs/reference/api.md ("How each
language spells the manifest").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from api import ROOT, camel, expand_params

import apitypes


def norm(doc: str) -> str:
    """A doc text with whitespace collapsed, for comparison across comment styles."""
    return " ".join(doc.split())


def split_args(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


# ------------------------------------------------------------------ Node (index.d.ts)


def _jsdoc(lines: list[str], i: int) -> str:
    """The JSDoc block that ends just above line i ('' if none)."""
    j = i - 1
    if j < 0 or not lines[j].strip().endswith("*/"):
        return ""
    block = []
    while j >= 0:
        block.append(lines[j])
        if lines[j].strip().startswith("/**"):
            break
        j -= 1
    text = []
    for line in reversed(block):
        t = line.strip()
        t = t.removeprefix("/**").removesuffix("*/").strip()
        t = t.removeprefix("*").strip() if t.startswith("*") else t
        text.append(t)
    return "\n".join(text).strip()


def parse_dts(text: str) -> tuple[dict, dict]:
    """Classes {name: {member: (kind, args, ret, doc)}} and interfaces {name: {field: (type, doc)}}."""
    lines = text.split("\n")
    classes: dict = {}
    interfaces: dict = {}
    cur = None
    for i, line in enumerate(lines):
        m = re.match(r"export declare class (\w+)", line)
        if m:
            cur = classes.setdefault(m.group(1), {})
            kind = "class"
            continue
        m = re.match(r"export interface (\w+) \{", line)
        if m:
            cur = interfaces.setdefault(m.group(1), {})
            kind = "interface"
            continue
        if line.startswith("}"):
            cur = None
            continue
        if cur is None or not line.startswith("  ") or line.startswith("   "):
            continue
        body = line.strip()
        if kind == "interface":
            m = re.match(r"(\w+)(\??): (.*)$", body)
            if m:
                cur[m.group(1)] = (m.group(3), _jsdoc(lines, i), bool(m.group(2)))
            continue
        m = re.match(r"get (\w+)\(\): (.*)$", body)
        if m:
            cur[m.group(1)] = ("get", [], m.group(2), _jsdoc(lines, i))
            continue
        m = re.match(r"(static )?(\w+)\((.*)\)(?:: (.*))?$", body)
        if m:
            cur[m.group(2)] = ("method", split_args(m.group(3)), m.group(4) or "", _jsdoc(lines, i))
    return classes, interfaces


def _inline_fields(t: str, interfaces: dict) -> set[str] | None:
    names: set[str] = set()
    for part in [p.strip() for p in t.split("&")]:
        part = part.replace(" | undefined | null", "")
        if part.startswith("{"):
            for f in split_args(part.strip("{} ").replace(";", ",")):
                names.add(f.split(":")[0].rstrip("?").strip())
        elif part in interfaces:
            names |= set(interfaces[part])
        else:
            return None
    return names


def unknown_members(api: dict, lang: str, oname: str, o: dict, have) -> list[str]:
    """Members of a binding's class that no manifest property or method maps to."""
    names = set(o.get(f"{lang}_only", []))
    for kind in ("property", "method"):
        for n, v in o.get(kind, {}).items():
            if v.get(lang) is not False:
                names.add(v.get(lang) or camel(n))
    return [f"{oname}.{n}: in the {lang} binding, not in api.toml" for n in sorted(set(have) - names)]


def node(api: dict) -> list[str]:
    classes, interfaces = parse_dts((ROOT / "bindings-node" / "index.d.ts").read_text())
    problems = []
    for oname, o in api["object"].items():
        if o.get("node") is False:
            continue
        cls = classes.get(oname)
        if cls is None:
            problems.append(f"class {oname} is missing from index.d.ts")
            continue
        problems += unknown_members(api, "node", oname, o, cls)
        for pname, p in o.get("property", {}).items():
            if p.get("node") is False:
                continue
            js = p.get("node") or camel(pname)
            if js not in cls or cls[js][0] != "get":
                problems.append(f"{oname}.{js}: getter missing (manifest property {pname})")
        for mname, m in o.get("method", {}).items():
            if m.get("node") is False:
                continue
            js = m.get("node") or camel(mname)
            where = f"{oname}.{js}"
            if js not in cls:
                problems.append(f"{where}: method missing (manifest {oname}.{mname})")
                continue
            _, args, _, _ = cls[js]
            params = expand_params(api, m)
            positional = [p for p in params if "default" not in p or p.get("node_positional")]
            optional = [p for p in params if p not in positional and not p.get("node") is False]
            want = [p.get("node") or camel(p["name"]) for p in positional]
            got = [a.split(":")[0].rstrip("?").strip() for a in args]
            if optional or m.get("node_extra"):
                want.append("options")
            if got != want:
                problems.append(f"{where}: parameters {got}, manifest says {want}")
                continue
            for p, a in zip(positional, args):
                opt = a.split(":")[0].endswith("?")
                if ("default" in p) != opt:
                    problems.append(f"{where}: parameter {camel(p['name'])} optional={opt}, manifest default={p.get('default')}")
            if optional or m.get("node_extra"):
                t = args[-1].split(":", 1)[1].strip()
                fields = _inline_fields(t, interfaces)
                rec = next((p["options"] for p in optional if "options" in p), None)
                if rec and rec not in t:
                    problems.append(f"{where}: options type is {t!r}, manifest says {rec}")
                if fields is None:
                    problems.append(f"{where}: cannot read the options type {t!r}")
                    continue
                wantf = {camel(p["name"]) for p in optional} | set(m.get("node_extra", []))
                if fields != wantf:
                    problems.append(
                        f"{where}: options fields {sorted(fields)}, manifest says {sorted(wantf)}"
                    )
    # Option records are shared (bindings-common): names, optionality and docs.
    for rname, r in api.get("options", {}).items():
        iface = interfaces.get(rname)
        if iface is None:
            problems.append(f"interface {rname} is missing from index.d.ts")
            continue
        want = [camel(f["name"]) for f in r["fields"] if f.get("node") is not False]
        if list(iface) != want:
            problems.append(f"{rname}: fields {list(iface)}, manifest says {want}")
        for f in r["fields"]:
            js = camel(f["name"])
            if js in iface and norm(iface[js][1]) != norm(f.get("doc", "")):
                problems.append(f"{rname}.{js}: doc {iface[js][1]!r}, manifest says {f.get('doc', '')!r}")
    for rname, r in api.get("record", {}).items():
        if r.get("node") is False:
            continue
        iface = interfaces.get(rname)
        if iface is None:
            problems.append(f"interface {rname} is missing from index.d.ts")
            continue
        want = {camel(f["name"]) for f in r["fields"] if f.get("node") is not False}
        got = set(iface) - set(r.get("node_extra", []))
        if got != want:
            problems.append(f"{rname}: fields {sorted(got)}, manifest says {sorted(want)}")
    return problems


# ------------------------------------------------------------------ Kotlin (uniffi)

KOTLIN = ROOT / "bindings-swift" / "kotlin" / "src" / "generated" / "kotlin" / "dev" / "memstrata"


def parse_kotlin() -> tuple[dict, dict]:
    """Interfaces {Class: {fun: [params]}} and data classes {Record: [fields]}."""
    text = (KOTLIN / "memstrata.kt").read_text() + "\n" + (KOTLIN / "common" / "memstrata_common.kt").read_text()
    objects: dict = {}

    def params(sig: str) -> list[str]:
        return [a.split(":")[0].strip("` ") for a in split_args(sig)]

    for m in re.finditer(r"public interface (\w+)Interface \{(.*?)\n    companion object", text, re.S):
        funs = {}
        for f in re.finditer(r"fun `(\w+)`\((.*?)\)", m.group(2)):
            funs[f.group(1)] = params(f.group(2))
        objects[m.group(1)] = funs
    # Constructors and companion functions (`Memory.open`) live on the class itself.
    for m in re.finditer(r"\nopen class (\w+): Disposable(.*?)(?=\nopen class |\npublic interface |\Z)", text, re.S):
        funs = objects.setdefault(m.group(1), {})
        c = re.search(r"\n    constructor\((`.*?)\) :", m.group(2))
        if c:
            funs["constructor"] = params(c.group(1))
        comp = m.group(2).split("\n    companion object", 1)
        if len(comp) == 2:
            for f in re.finditer(r"fun `(\w+)`\((.*?)\)", comp[1].split("\n    }", 1)[0]):
                funs.setdefault(f.group(1), params(f.group(2)))
    records: dict = {}
    for m in re.finditer(r"data class (\w+) \((.*?)\n\)", text, re.S):
        records[m.group(1)] = [f.group(1) for f in re.finditer(r"va[rl] `(\w+)`", m.group(2))]
    return objects, records


def kotlin(api: dict) -> list[str]:
    objects, records = parse_kotlin()
    problems = []
    for oname, o in api["object"].items():
        if o.get("kotlin") is False:
            continue
        funs = objects.get(oname)
        if funs is None:
            problems.append(f"class {oname} is missing from the Kotlin sources")
            continue
        problems += unknown_members(api, "kotlin", oname, o, funs)
        for pname, p in o.get("property", {}).items():
            if p.get("kotlin") is False:
                continue
            kt = p.get("kotlin") or camel(pname)
            if kt not in funs:
                problems.append(f"{oname}.{kt}(): missing (manifest property {pname})")
        for mname, m in o.get("method", {}).items():
            if m.get("kotlin") is False:
                continue
            kt = m.get("kotlin") or camel(mname)
            where = f"{oname}.{kt}"
            if kt not in funs:
                problems.append(f"{where}: fun missing (manifest {oname}.{mname})")
                continue
            params = [p for p in expand_params(api, m) if p.get("kotlin") is not False]
            want, seen = [], set()
            for p in params:
                if "options" in p:
                    if p["options"] not in seen:
                        seen.add(p["options"])
                        want.append(m.get("kotlin_options", "options"))
                else:
                    want.append(p.get("kotlin") or camel(p["name"]))
            want += m.get("kotlin_extra", [])
            if funs[kt] != want:
                problems.append(f"{where}: parameters {funs[kt]}, manifest says {want}")
    for rname, r in list(api.get("options", {}).items()) + list(api.get("record", {}).items()):
        if r.get("kotlin") is False:
            continue
        got = records.get(rname)
        if got is None:
            problems.append(f"data class {rname} is missing from the Kotlin sources")
            continue
        want = [camel(f["name"]) for f in r["fields"] if f.get("kotlin") is not False]
        extra = r.get("kotlin_extra", [])
        if [g for g in got if g not in extra] != want:
            problems.append(f"{rname}: fields {got}, manifest says {want}")
    return problems


# ------------------------------------------------------------------ MCP tool schemas


def mcp(api: dict) -> list[str]:
    tools = json.loads((ROOT / "mcp-adapter" / "tests" / "golden" / "tools.json").read_text())
    problems = []
    mirrored = 0
    for oname, o in api["object"].items():
        for mname, m in o.get("method", {}).items():
            tool = m.get("mcp")
            if not tool:
                continue
            mirrored += 1
            where = f"{tool} (mirrors {oname}.{mname})"
            t = tools.get(tool)
            if t is None:
                problems.append(f"{where}: no such tool")
                continue
            params = [p for p in expand_params(api, m) if p["name"] not in m.get("mcp_skip", [])]
            rename = m.get("mcp_rename", {})
            want = {rename.get(p["name"], p["name"]) for p in params} | set(m.get("mcp_extra", []))
            if set(t["arguments"]) != want:
                problems.append(f"{where}: arguments {sorted(t['arguments'])}, manifest says {sorted(want)}")
            req = {rename.get(p["name"], p["name"]) for p in params if "default" not in p}
            req |= set(m.get("mcp_required", []))
            if set(t["required"]) != req:
                problems.append(f"{where}: required {sorted(t['required'])}, manifest says {sorted(req)}")
    if mirrored == 0:
        problems.append("no manifest method names an MCP tool (mcp = ...)")
    return problems
