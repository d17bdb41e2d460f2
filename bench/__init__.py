"""Benchmarks for the runner (issue 4): ``python -m bench`` runs them all and prints one table.

One module per benchmark (``throughput``, ``idle``, ``timeliness``, ``fanout``, ``memory``), and
what they share by concern: ``backends`` (fresh migrated databases on SQLite or a throwaway
MariaDB), ``workloads`` (bench actions, definitions, bulk-seeded dormant runs), ``statements``
(statement counts, server counters, slow log, EXPLAIN), ``results`` (options, result rows,
statistics) and ``report`` (header and table). Helpers the tests also need live once, in
``tests.support``. ``python -m bench.whatif`` measures the effect of the engine changes
``bench/RESULTS.md`` recommends. Nothing here is a test: no assertion on time anywhere.
"""
