"""`vsa bench`: block-sparse attention against every peer present, with a correctness check.

Entry point: vsa.bench.cli.main(argv) -> exit code; also `python -m vsa.bench`.
"""
