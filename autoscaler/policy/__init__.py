"""The pure decision core shared by the controller, the replay and `infscale explain`.

Import rule (enforced by tests/test_import_rules.py): nothing here imports from the rest of the
project or from an I/O library. Time is a parameter (`now`, seconds on any monotonic epoch).
"""
