"""`vsa bench`: block-sparse attention (--op attention) or the whole VSA layer (--op layer) against
every peer present, forward and backward, with a float64 correctness check.

Entry point: vsa.bench.cli.main(argv) -> exit code; also `python -m vsa.bench`.
"""
