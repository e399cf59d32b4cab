"""The integration spec: units.json, contracts and integration/spec.json, validated into frozen records.

`records` holds the records, `units` loads units.json and contracts, `steps` and `expectations`
parse the cases' steps, `loading.load_spec` validates a whole project.
"""
