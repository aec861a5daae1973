# `make test` and `make demo` set up .venv on first use and are quick afterwards.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test test-all demo bench clean

$(STAMP): setup.py pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: install
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests

demo: install
	$(PY) -m seahorse_metrics.demo

bench: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/score.py --quick
	$(PY) bench/train.py --quick
	$(PY) bench/beam.py --quick

clean:
	rm -rf $(VENV) demo_output .pytest_cache build *.egg-info
