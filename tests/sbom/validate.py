#!/usr/bin/env python3
"""Validates a CycloneDX SBOM the way a scanner would read it.

    python validate.py FILE

With PyPI's cyclonedx-python-lib (`JsonStrictValidator`, CycloneDX 1.6: the JSON
schema, no extra fields) and packageurl-python (each purl parses and is already in
canonical form); and the references that a schema cannot check: bom-refs unique,
every dependency naming components. Prints every problem and exits 1 on any.
"""

import json
import sys

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL


def main(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text, all_errors=True)
    for error in errors or []:
        # The jsonschema error: its message and where, without the schema dump.
        data = error.data
        where = "/".join(str(p) for p in getattr(data, "absolute_path", []))
        problems.append(f"schema: at /{where}: {getattr(data, 'message', data)}")
    doc = json.loads(text)
    refs = [c.get("bom-ref") for c in doc.get("components", [])]
    if len(refs) != len(set(refs)):
        problems.append(f"bom-refs are not unique: {refs}")
    for component in doc.get("components", []):
        purl = component.get("purl", "")
        try:
            canonical = PackageURL.from_string(purl).to_string()
        except ValueError as e:
            problems.append(f"purl {purl!r} does not parse: {e}")
            continue
        if canonical != purl:
            problems.append(f"purl {purl!r} is not canonical ({canonical!r})")
    for dependency in doc.get("dependencies", []):
        for ref in [dependency["ref"], *dependency.get("dependsOn", [])]:
            if ref not in refs:
                problems.append(f"dependency names no component: {ref!r}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
