"""p4c's v1model test corpus through p4switch: `python -m p4switch.conformance DIR` (see __main__.py)."""
