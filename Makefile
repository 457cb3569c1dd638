# The two commands a new user runs are `make run` and `make test`; both set
# themselves up from nothing but python3.11 (and, for the control plane, go).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench soak setup clean controlplane helm

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

run: $(STAMP) controlplane
	$(PY) -m lab.run $(RUN_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP) helm controlplane
	$(PY) -m pytest

test: lint typecheck unit

# The real kube-apiserver + etcd harness for tests/realapi. Built once and then
# reused: make rebuilds it only when its Go sources or module pins change,
# because a cold build of Kubernetes takes minutes. -p=2 caps the compile
# parallelism so the build fits a 2-core CI machine's memory.
CONTROLPLANE_DIR := lab/controlplane
CONTROLPLANE_BIN := $(CONTROLPLANE_DIR)/bin/controlplane

controlplane: $(CONTROLPLANE_BIN)

$(CONTROLPLANE_BIN): $(CONTROLPLANE_DIR)/go.mod $(CONTROLPLANE_DIR)/go.sum $(wildcard $(CONTROLPLANE_DIR)/*.go)
	cd $(CONTROLPLANE_DIR) && GOFLAGS='-p=2 -mod=readonly -buildvcs=false' \
		go build -trimpath -ldflags='-s -w' -o bin/controlplane .

# Helm, for the chart tests in tests/chart. The CI machines reach only PyPI, Debian
# and the Go module proxy, so helm is built from its pinned release's Go module
# rather than downloaded. The binary lives under a versioned directory so changing
# HELM_VERSION rebuilds it, and .tools/bin/helm links to it. CGO_ENABLED=0 gives
# the same static binary Helm's own release builds produce; -p=2 fits a 2-core
# machine. A cold build (module downloads included) takes several minutes.
HELM_VERSION := v4.3.2
HELM_BUILD   := .tools/helm-$(HELM_VERSION)/helm
HELM         := .tools/bin/helm

helm: $(HELM)

$(HELM): $(HELM_BUILD)
	@mkdir -p $(dir $@)
	ln -sfn ../helm-$(HELM_VERSION)/helm $@

$(HELM_BUILD):
	GOBIN=$(abspath $(dir $@)) CGO_ENABLED=0 GOFLAGS='-p=2 -buildvcs=false' \
		go install -trimpath \
		-ldflags='-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' \
		helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The crash simulation, run far longer than CI runs it.
soak: $(STAMP)
	PTAH_SOAK=2000 PTAH_SOAK_SEEDS=64 $(PY) -m pytest -q tests/lifecycle/test_crash_simulation.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .tools $(CONTROLPLANE_DIR)/bin
