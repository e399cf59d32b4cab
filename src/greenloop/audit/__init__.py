"""The Tester's self-check of a DevLoop unit (`greenloop audit units/<unit>`).

`report` runs the checks and builds the report; `sources` reads the unit's tests; `check` is
the verdict record; one module per check: `acceptance_coverage`, `contract_coverage`,
`module_mocks`, `network_clock`, `sandbox`, `result_json`, `negative_tests`.
"""
