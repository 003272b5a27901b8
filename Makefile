# Every target creates the virtualenv and installs what is missing first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test bench install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tau2-a2a demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/oracle_fidelity.py --domains airline retail
	$(BIN)/python bench/request_overhead.py
	$(BIN)/python bench/scale_slow_agent.py --delay 0.5 --concurrency 32
	$(BIN)/python bench/service_throughput.py --levels 1,2,4 --num-tasks 5
	$(BIN)/python bench/service_list_domains.py

clean:
	rm -rf $(VENV) results
