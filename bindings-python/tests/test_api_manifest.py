"""The compiled module against the API manifest (bindings-common/api.toml).

Signatures (names, kinds, defaults) are checked by mypy.stubtest against
_memstrata.pyi, which `python3 scripts/api.py pyi --check` keeps equal to what
the manifest generates. What stubtest does not see is checked here: every
public name of the module is in the manifest, and every docstring the module
carries (classes, methods, properties, record fields) is the manifest's text.
"""

import inspect
import tomllib
from pathlib import Path

import pytest

import memstrata._memstrata as M

MANIFEST = Path(__file__).resolve().parents[2] / "bindings-common" / "api.toml"
API = tomllib.loads(MANIFEST.read_text())

# Runtime-only members that are not part of the API (pyo3 and object protocol).
IGNORED = {"__repr__", "__doc__", "__module__", "__new__", "__init__", "__hash__", "__eq__"}


def doc(obj) -> str:
    d = getattr(obj, "__doc__", None)
    return inspect.cleandoc(d) if d else ""


def members(cls) -> set[str]:
    return {n for n in vars(cls) if not (n.startswith("__") and n.endswith("__"))}


@pytest.mark.parametrize("name", sorted(API["object"]))
def test_object_matches_manifest(name):
    o = API["object"][name]
    cls = getattr(M, name)
    declared = set(o.get("method", {})) | set(o.get("property", {}))
    public = members(cls)
    assert public - declared == set(), f"{name}: in the module, not in api.toml"
    assert {n for n in declared if not n.startswith("__")} - public == set(), f"{name}: in api.toml, not in the module"
    assert doc(cls) == o.get("doc", ""), f"{name} docstring differs from api.toml"
    for mname, m in {**o.get("method", {}), **o.get("property", {})}.items():
        if mname in IGNORED:
            continue
        assert doc(getattr(cls, mname)) == m.get("doc", ""), f"{name}.{mname} docstring differs from api.toml"


@pytest.mark.parametrize("name", sorted(API["record"]))
def test_record_matches_manifest(name):
    r = API["record"][name]
    cls = getattr(M, name)
    fields = [f["name"] for f in r["fields"]]
    assert members(cls) == set(fields), f"{name}: fields differ from api.toml"
    assert doc(cls) == r.get("doc", ""), f"{name} docstring differs from api.toml"
    for f in r["fields"]:
        assert doc(getattr(cls, f["name"])) == f.get("doc", ""), f"{name}.{f['name']} docstring differs"


def test_module_names_are_the_manifest():
    declared = set(API["python_all"])
    assert set(M.__all__) == declared
    for kind in ("object", "record", "error", "constant", "function"):
        for name in API.get(kind, {}):
            assert name in declared, f"{kind} {name} is not in python_all"
