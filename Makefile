# The two commands of the README: `make demo` (the quick validation) and `make test`.
VENV ?= .venv
RUNS ?= runs

.PHONY: demo test setup clean

setup:
	@VENV=$(VENV) scripts/setup.sh

demo: setup
	@$(VENV)/bin/refbench run --plan plans/quick.toml --runs-dir $(RUNS)

test: setup
	@$(VENV)/bin/python -m pytest -q -n 6 --dist loadfile --no-loadscope-reorder --durations=25

clean:
	rm -rf $(VENV) build src/*.egg-info
