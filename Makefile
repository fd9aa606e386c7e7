# The two commands of the README: `make demo` (the quick validation) and `make test`.
VENV ?= .venv
RUNS ?= runs

.PHONY: demo test check coverage test-reference test-false-changes setup clean

setup:
	@VENV=$(VENV) scripts/setup.sh

# With bytecode writing on (this VM sets PYTHONDONTWRITEBYTECODE): a module compiles once, not in every process.
demo: setup
	@PYTHONDONTWRITEBYTECODE= $(VENV)/bin/refbench run --plan plans/quick.toml --runs-dir $(RUNS)

# First the floors (pyproject's [tool.importlinter]: a few seconds), then the tests, handed to workers one at a time
# (a module whose tests share a fixture goes whole to one worker: tests/conftest.py); slow ones first.
SUITE = -q -n 6 --dist loadgroup --no-loadscope-reorder -m 'not reference and not false_changes'
test: setup
	@$(VENV)/bin/lint-imports --no-cache --no-logo
	@PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest $(SUITE) --durations=25

# The edit loop: the floors and every test that starts no server, browser, cluster or measured run (not `live`).
check: setup
	@$(VENV)/bin/lint-imports --no-cache --no-logo
	@PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest -q -n 2 --durations=10 -m 'not live and not reference and not false_changes'

# Line and branch coverage of `make test`'s tests (slower than make test: every line is traced); docs/development.md
# gives the last figures.
coverage: setup
	@rm -rf .coverage-data && mkdir .coverage-data
	@REFBENCH_COVERAGE_DIR=$(CURDIR)/.coverage-data PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest $(SUITE) --cov --cov-report=term:skip-covered --cov-report=json:.coverage-data/coverage.json

# The query answers at SF 1 against the official TPC-H answer set, on DuckDB and MariaDB (about 280 CPU-s, the
# loads of 8.6 million rows mostly), and the bottlenecks made on purpose on PostgreSQL that the wait profile must name
# (flush, read, locks, CPU; flush and CPU on MariaDB too: about 130 s), the contention made on purpose (a server
# capped by its cgroup, a MariaDB lock convoy, a parallel power stream: about 90 s), and refbench tune end to end on a
# user's PostgreSQL and on a managed one (about 260 s). CI runs it after `make test`.
test-reference: setup
	@PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest -q -n 2 --durations=5 -m reference

# compare's false-change rate over 20 pairs of same-configuration runs, every other with a neighbour made beside its
# second run (a CPU loop, two writers, a memory hog), a memory hog under a cache bound, and compare's power on three
# real changes at --repeats 3 (about 50 minutes; docs/BENCHMARKS.md, "False changes and power of compare").
test-false-changes: setup
	@PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest -q -s -p no:xdist -m false_changes --basetemp /var/tmp/refbench-false-changes

clean:
	rm -rf $(VENV) build src/*.egg-info
