# Every target creates the virtualenv and installs what is missing first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# A real a2a-sdk 0.3 client for the cross-version tests (testbed/sdk03_client.py). It has its
# own virtualenv: 0.3 and 1.x share the import name `a2a`.
VENV03 := .venv-a2a03
STAMP03 := $(VENV03)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test bench install clean postgres chromium

install: $(STAMP) $(STAMP03) postgres chromium

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,ray]'
	touch $(STAMP)

$(STAMP03):
	test -x $(VENV03)/bin/python || $(PYTHON) -m venv $(VENV03) || python3 -m venv $(VENV03)
	$(VENV03)/bin/python -m pip install --quiet --upgrade pip
	$(VENV03)/bin/python -m pip install --quiet 'a2a-sdk[http-server]==0.3.22'
	touch $(STAMP03)

# The tests start a real PostgreSQL server (testbed/postgres_server.py) from the Debian package.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "Installing PostgreSQL (Debian package postgresql) for the tests"; \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1 \
	  || { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq \
	       --no-install-recommends postgresql; }; }

# The report tests open the page in headless Chromium (testbed/browser.py), from the Debian package.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "Installing Chromium (Debian package chromium) for the report tests"; \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
	  || { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq \
	       --no-install-recommends chromium; }; }

demo: $(STAMP)
	$(BIN)/tau2-a2a demo

test: $(STAMP) $(STAMP03) postgres chromium
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/oracle_fidelity.py --domains airline retail
	$(BIN)/python bench/request_overhead.py
	$(BIN)/python bench/scale_slow_agent.py --delay 0.5 --concurrency 32
	$(BIN)/python bench/service_throughput.py --levels 1,2,4 --num-tasks 5
	$(BIN)/python bench/service_list_domains.py
	$(BIN)/python bench/service_load.py

clean:
	rm -rf $(VENV) $(VENV03) results
