"""The timeline schema is closed: tests/schema/timeline.schema.json forbids
keys it does not define at each level the timeline defines (objects keyed
by data, such as marks or the effective config, stay open), so a key
renamed without a version bump fails here and in every test that validates
a run against the schema (test_trace.py, test_mlock.py)."""
import copy
import json

import jsonschema
import pytest

from conftest import ROOT
from test_skeleton import scenario

SCHEMA = json.loads((ROOT / "tests" / "schema" / "timeline.schema.json").read_text())


@pytest.fixture(scope="module")
def run_tl(tmp_path_factory):
    """A traced run of the exact-count file helper (test_skeleton's)."""
    return scenario("files", tmp_path_factory.mktemp("schema"))


def errors(tl):
    return list(jsonschema.Draft7Validator(SCHEMA).iter_errors(tl))


def test_run_validates(run_tl):
    assert errors(run_tl) == []


@pytest.mark.parametrize("where", ["top", "files", "tracing", "memory", "launcher.start"])
def test_renamed_key_is_refused(run_tl, where):
    tl = copy.deepcopy(run_tl)
    if where == "top":
        tl["file_list"] = tl.pop("files")
    elif where == "files":
        f = tl["files"][0]
        f["bytes_in"] = f.pop("bytes_read")
    elif where == "tracing":
        tl["tracing"]["probe_list"] = tl["tracing"].pop("probes")
    elif where == "memory":
        tl["memory"]["majors"] = tl["memory"].pop("major_faults")
    else:
        tl["launcher"]["start"]["epoch"] = tl["launcher"]["start"].pop("wall_epoch")
    errs = errors(tl)
    assert errs, where
    # the new name itself is refused, not only the old one missed (a key
    # that is not required would not be missed)
    assert any(e.validator == "additionalProperties" for e in errs), errs


def test_data_keyed_objects_stay_open(run_tl):
    tl = copy.deepcopy(run_tl)
    tl["marks"]["my_own_mark"] = 1.0
    assert errors(tl) == []


# objects keyed by data, not by the format: open on purpose
OPEN_BY_DATA = {"$.launcher.config", "$.memory.mlock.events[]"}


def open_objects(node, path="$"):
    """Object schemas that let any key through: neither additionalProperties
    false nor a schema every extra key must match."""
    defs = SCHEMA["definitions"]
    if "$ref" in node:
        node = defs[node["$ref"].split("/")[-1]]
    out = []
    types = node.get("type")
    types = types if isinstance(types, list) else [types]
    if "object" in types or "properties" in node:
        ap = node.get("additionalProperties")
        if ap is not False and not isinstance(ap, dict):
            out.append(path)
        for k, v in node.get("properties", {}).items():
            out += open_objects(v, path + "." + k)
        if isinstance(ap, dict):
            out += open_objects(ap, path + ".*")
    if isinstance(node.get("items"), dict):
        out += open_objects(node["items"], path + "[]")
    return out


def test_every_section_is_closed():
    """issue 13: the schema forbids additional properties per section."""
    assert set(open_objects(SCHEMA)) == OPEN_BY_DATA


def test_schema_version_2_and_1():
    assert SCHEMA["properties"]["schema"]["enum"] == ["tts-launch.timeline/2",
                                                      "tts-launch.timeline/1"]


def test_run_writes_version_2(run_tl):
    assert run_tl["schema"] == "tts-launch.timeline/2"
