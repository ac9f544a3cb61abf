#!/usr/bin/env python3
"""Decodes an OTLP profiles file (jtap's `-o profile.otlp`) with the official generated
modules of opentelemetry-proto (scripts/setup-otlp.sh installs them into .cache/otlp-python)
and checks what the format requires: index 0 of every dictionary table its zero value, every
index in range. Prints one JSON object: each resource's attributes, and for each profile
its sample type and unit, sample count, total of values, and its heaviest stack's leaf
function; exits non-zero on a failed check."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".cache", "otlp-python"))
from opentelemetry.proto.profiles.v1development import profiles_pb2  # noqa: E402


def main(path):
    data = profiles_pb2.ProfilesData()
    with open(path, "rb") as f:
        data.ParseFromString(f.read())
    d = data.dictionary
    strings = d.string_table
    problems = []
    if not strings or strings[0] != "":
        problems.append("string_table[0] is not empty")
    for name in ("mapping_table", "location_table", "function_table", "link_table",
                 "attribute_table", "stack_table"):
        table = getattr(d, name)
        if not table or table[0].ByteSize() != 0:
            problems.append(f"{name}[0] is not the zero value")

    def check(index, table, what):
        if not 0 <= index < len(table):
            problems.append(f"{what} {index} out of range ({len(table)})")
            return False
        return True

    def leaf(stack_index):
        stack = d.stack_table[stack_index]
        if not stack.location_indices:
            return None
        location = stack.location_indices[0]
        if not check(location, d.location_table, "location"):
            return None
        line = d.location_table[location].lines[0]
        if not check(line.function_index, d.function_table, "function"):
            return None
        return strings[d.function_table[line.function_index].name_strindex]

    for stack in d.stack_table:
        for location in stack.location_indices:
            if check(location, d.location_table, "location"):
                for line in d.location_table[location].lines:
                    check(line.function_index, d.function_table, "function")
    profiles = []
    resources = [{a.key: a.value.string_value for a in r.resource.attributes}
                 for r in data.resource_profiles]
    for resource in data.resource_profiles:
        for scope in resource.scope_profiles:
            for profile in scope.profiles:
                by_stack = {}
                for sample in profile.samples:
                    if check(sample.stack_index, d.stack_table, "stack"):
                        by_stack[sample.stack_index] = by_stack.get(sample.stack_index, 0) + sum(sample.values)
                heaviest = max(by_stack, key=by_stack.get) if by_stack else None
                profiles.append({
                    "scope": scope.scope.name,
                    "type": strings[profile.sample_type.type_strindex],
                    "unit": strings[profile.sample_type.unit_strindex],
                    "samples": len(profile.samples),
                    "total": sum(sum(s.values) for s in profile.samples),
                    "top_leaf": None if heaviest is None else leaf(heaviest),
                })
    print(json.dumps({"resources": resources, "profiles": profiles, "problems": problems}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
