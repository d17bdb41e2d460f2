"""Benchmarks for the runner (issue 4): ``python -m bench`` runs them all and prints one table.

One module per benchmark (``throughput``, ``idle``, ``timeliness``, ``fanout``, ``memory``),
shared helpers in ``common``; ``python -m bench.whatif`` measures the effect of the engine changes
``bench/RESULTS.md`` recommends. Nothing here is a test: no assertion on time anywhere.
"""
