# The two commands a new user runs are `make run` and `make test`; both set
# themselves up from nothing but python3.11 (and, for the control plane, go).
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Each prerequisite phase of run and unit (setup, controlplane, helm, crane,
# node-packages, image-tools, images) runs through lab/phase.sh: one line when it starts
# and one when it ends with its cost, or one "cached" line; the tool's own output goes
# to build/logs/<phase>.log, whose last lines are printed when it fails. A phase for a
# file make builds asks `make -q FILE` whether anything needs doing, then runs
# `make FILE`: plain `make`, not $(MAKE), so that `make -n` only prints the phase.
PHASE  := bash lab/phase.sh

.PHONY: run test check lint typecheck unit bench soak setup clean controlplane kstatus helm crane promtool prometheus kube-score node-packages mariadb contract images image-tools clean-images wheelhouse lua chart

SETUP_WHAT := installing the project and its pinned dependencies into $(VENV) (cold: a few minutes, from PyPI)

# make run and make unit say "setup: cached" when the virtualenv is current; the other
# targets depend on the stamp itself (its recipe is the same phase, said only when it
# runs), so `make -o $(STAMP)` can hold it back.
setup:
	@$(PHASE) setup "$(SETUP_WHAT)" --cached-if 'make -q $(STAMP)' \
		-- make --no-print-directory $(STAMP)

$(STAMP): pyproject.toml
	@$(PHASE) setup "$(SETUP_WHAT)" -- sh -c '{ test -x $(PY) || $(PYTHON) -m venv $(VENV); } \
		&& $(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip \
		&& $(PY) -m pip install --quiet --disable-pip-version-check -e ".[test,lab]"'
	@touch $(STAMP)

# make run: the chart on the lab's real single-node cluster (lab/clusterrun.py). Builds
# what is missing first (each prerequisite is reused when it is up to date) and says so.
# RUN_ARGS=--node-less is the older run with no node (lab/run.py).
# make images rebuilds only an image whose inputs changed (seconds when none did).
run: setup controlplane helm crane node-packages mariadb images
	$(PY) -m lab.clusterrun $(RUN_ARGS)

# The manager image (which also supplies the Jobs' runner) and the lab executor
# image (the stand-in for the stock ptah image), built with no Docker daemon: a base
# from debootstrap, then images/{manager,lab-executor}/Containerfile by buildah.
# Writes build/images/{ptah-operator,ptah-lab-executor}.{oci.tar,digest}, each digest
# checked against a throw-away registry (crane); a warm run says "cached" and builds
# nothing (images/build.sh).
images: setup image-tools crane
	@$(PHASE) images "building the manager, lab executor and scratch database images (cold: ~10 min; cached: seconds)" \
		--show '^# [0-9][0-9]:' -- bash images/build.sh

# Debian's buildah and debootstrap, installed when missing (root, apt).
image-tools:
	@$(PHASE) image-tools "installing buildah and debootstrap from Debian (cold: ~1 min)" \
		--cached-if 'command -v buildah && command -v debootstrap' \
		-- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah debootstrap'

clean-images:
	rm -rf build/images build/containers

# make chart: the chart as a platform team receives it, build/charts/ptah-operator-<version>.tgz
# (`helm package`; ci/ is left out by .helmignore). Push it with
#   helm push build/charts/ptah-operator-<version>.tgz oci://<registry>/charts
# and install from oci://<registry>/charts/ptah-operator --version <version>; make run
# does both against the lab's registry. Seconds once helm is built.
chart: helm
	@mkdir -p build/charts
	$(HELM) package charts/ptah-operator --destination build/charts

# Debian's Lua 5.1, for tests/gitops: Argo CD runs its health checks in gopher-lua,
# a Lua 5.1, and docs/gitops/ptah-health.lua is run by the same language version.
LUA := /usr/bin/lua5.1

lua:
	@$(PHASE) lua "installing lua5.1 from Debian (cold: ~10 s)" \
		--cached-if 'test -x $(LUA)' \
		-- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lua5.1'

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# images: CI builds everything from a clean clone, and tests/images checks the two
# archives (runc, from node-packages, starts them); a warm `make images` takes seconds.
# The suite runs in TEST_WORKERS pytest-xdist workers (default 2): every test under
# tests/cluster/ is one unit of work (tests/support/xdistrun.py), which one worker starts on
# at once while the other runs everything else beside it. The cluster part is mostly
# waiting on a real node, so the two overlap instead of adding up. TEST_WORKERS=0 runs the
# suite serially in one process, as before (`make test TEST_WORKERS=0`, or in the environment).
TEST_WORKERS ?= 2

unit: setup helm promtool prometheus kube-score controlplane kstatus crane node-packages mariadb images wheelhouse lua
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test: lint typecheck unit

# make check: the fast inner loop (and the pre-commit hook, .pre-commit-config.yaml).
# Lint, types, the structure tests (the layer table, the error tree, the documents
# that must match the code) first, then every test that needs nothing built: no
# control plane, cluster, PostgreSQL, registry or images, and no helm unless
# `make helm` already built it (tests/conftest.py marks the tests that use it). It
# depends on the virtualenv alone, so it never starts a Go build or an image build.
# For speed it also leaves to `make test` (which runs everything, at full depth):
# the tests marked `integration` (python -m runner with a ptah subprocess, the whole
# manager process, uvicorn over TLS under load, the built zipapp, `python -m` runs),
# and most Hypothesis examples: `--hypothesis-profile=check` runs a tenth of each
# property test's examples (tests/support/examples.py); the full profile is the default.
STRUCTURE_TESTS := tests/test_layers.py tests/test_test_imports.py tests/test_error_tree.py \
	tests/test_architecture_doc.py tests/test_security_doc.py tests/test_wheel.py
CHECK_MARKERS = not controlplane and not cluster and not postgres and not mariadb and not registry and not pythons \
	and not images and not integration$(if $(wildcard $(HELM_BUILD)),, and not helm)$(if $(wildcard $(PROMTOOL_BUILD)),, and not promtool) \
	$(if $(wildcard $(KUBE_SCORE_BUILD)),, and not kube_score)$(if $(wildcard $(LUA)),, and not lua)$(if $(wildcard $(KSTATUS_BIN)),, and not kstatus)

check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q $(STRUCTURE_TESTS)
	$(PY) -m pytest -q -n auto --hypothesis-profile=check -m '$(CHECK_MARKERS)' \
		$(addprefix --ignore=,$(STRUCTURE_TESTS))

# The real kube-apiserver + etcd harness for tests/realapi. Built once and then
# reused: make rebuilds it only when its Go sources or module pins change,
# because a cold build of Kubernetes takes minutes. -p=2 caps the compile
# parallelism so the build fits a 2-core CI machine's memory.
CONTROLPLANE_DIR := lab/controlplane
CONTROLPLANE_BIN := $(CONTROLPLANE_DIR)/bin/controlplane

controlplane:
	@$(PHASE) controlplane "building the control plane from Go modules (cold: ~22 min)" \
		--cached-if 'make -q $(CONTROLPLANE_BIN)' -- make --no-print-directory $(CONTROLPLANE_BIN)

# kstatus, the computation Flux and cli-utils read a resource's conditions with, as
# a small Go tool over sigs.k8s.io/cli-utils (lab/kstatus), for tests/gitops: built
# like the control plane from its pinned go.mod, rebuilt only when its sources or
# pins change. Seconds once the module cache holds apimachinery.
KSTATUS_DIR := lab/kstatus
KSTATUS_BIN := $(KSTATUS_DIR)/bin/kstatus

kstatus:
	@$(PHASE) kstatus "building kstatus from sigs.k8s.io/cli-utils (cold: ~1 min)" \
		--cached-if 'make -q $(KSTATUS_BIN)' -- make --no-print-directory $(KSTATUS_BIN)

$(KSTATUS_BIN): $(KSTATUS_DIR)/go.mod $(KSTATUS_DIR)/go.sum $(wildcard $(KSTATUS_DIR)/*.go)
	cd $(KSTATUS_DIR) && CGO_ENABLED=0 GOFLAGS='-p=2 -mod=readonly -buildvcs=false' \
		go build -trimpath -ldflags='-s -w' -o bin/kstatus .

# The components report the Kubernetes version their module pins (go.mod), set
# at link time as Kubernetes' own release build does: without it every one of
# them says v0.0.0-master, which a chart's kubeVersion constraint refuses and a
# kubelet's node status would show.
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ {print $$2; exit}' $(CONTROLPLANE_DIR)/go.mod)
KUBE_MAJOR   := $(word 1,$(subst ., ,$(KUBE_VERSION:v%=%)))
KUBE_MINOR   := $(word 2,$(subst ., ,$(KUBE_VERSION:v%=%)))
KUBE_LDFLAGS := -s -w $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(KUBE_VERSION) -X $(pkg).gitMajor=$(KUBE_MAJOR) \
	-X $(pkg).gitMinor=$(KUBE_MINOR) -X $(pkg).gitTreeState=clean)

$(CONTROLPLANE_BIN): $(CONTROLPLANE_DIR)/go.mod $(CONTROLPLANE_DIR)/go.sum $(wildcard $(CONTROLPLANE_DIR)/*.go)
	@test -n '$(KUBE_VERSION)' || { echo 'no k8s.io/kubernetes version in $(CONTROLPLANE_DIR)/go.mod' >&2; exit 1; }
	cd $(CONTROLPLANE_DIR) && GOFLAGS='-p=2 -mod=readonly -buildvcs=false' \
		go build -trimpath -ldflags='$(KUBE_LDFLAGS)' -o bin/controlplane .

# Helm, for the chart tests in tests/chart. The CI machines reach only PyPI, Debian
# and the Go module proxy, so helm is built from its pinned release's Go module
# rather than downloaded. The binary lives under a versioned directory so changing
# HELM_VERSION rebuilds it, and .tools/bin/helm links to it. CGO_ENABLED=0 gives
# the same static binary Helm's own release builds produce; -p=2 fits a 2-core
# machine. A cold build (module downloads included) takes several minutes.
HELM_VERSION := v4.3.2
HELM_BUILD   := .tools/helm-$(HELM_VERSION)/helm
HELM         := .tools/bin/helm

helm:
	@$(PHASE) helm "building helm $(HELM_VERSION) from its Go module (cold: ~15 min)" \
		--cached-if 'make -q $(HELM)' -- make --no-print-directory $(HELM)

$(HELM): $(HELM_BUILD)
	@mkdir -p $(dir $@)
	ln -sfn ../helm-$(HELM_VERSION)/helm $@

$(HELM_BUILD):
	GOBIN=$(abspath $(dir $@)) CGO_ENABLED=0 GOFLAGS='-p=2 -buildvcs=false' \
		go install -trimpath \
		-ldflags='-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' \
		helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

# crane, for the lab's OCI registry (`crane registry serve` on loopback) and for
# pushing images to it. Built from its Go module like helm, for the same reason.
CRANE_VERSION := v0.22.1
CRANE_BUILD   := .tools/crane-$(CRANE_VERSION)/crane
CRANE         := .tools/bin/crane

crane:
	@$(PHASE) crane "building crane $(CRANE_VERSION) from its Go module (cold: ~1 min)" \
		--cached-if 'make -q $(CRANE)' -- make --no-print-directory $(CRANE)

$(CRANE): $(CRANE_BUILD)
	@mkdir -p $(dir $@)
	ln -sfn ../crane-$(CRANE_VERSION)/crane $@

$(CRANE_BUILD):
	GOBIN=$(abspath $(dir $@)) CGO_ENABLED=0 GOFLAGS='-p=2 -buildvcs=false' \
		go install -trimpath -ldflags='-s -w' \
		github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION)

# kube-score, which tests/chart/test_kube_score.py runs over the chart's renders of
# its ci/ values: every finding must be one the chart README lists with its reason.
# Built from its Go module like helm, for the same reason; the version is linked in so
# `kube-score version` says what ran (its main package reads it, as its releases set it).
KUBE_SCORE_VERSION := v1.20.0
KUBE_SCORE_BUILD   := .tools/kube-score-$(KUBE_SCORE_VERSION)/kube-score
KUBE_SCORE         := .tools/bin/kube-score

kube-score:
	@$(PHASE) kube-score "building kube-score $(KUBE_SCORE_VERSION) from its Go module (cold: ~45 s)" \
		--cached-if 'make -q $(KUBE_SCORE)' -- make --no-print-directory $(KUBE_SCORE)

$(KUBE_SCORE): $(KUBE_SCORE_BUILD)
	@mkdir -p $(dir $@)
	ln -sfn ../kube-score-$(KUBE_SCORE_VERSION)/kube-score $@

$(KUBE_SCORE_BUILD):
	GOBIN=$(abspath $(dir $@)) CGO_ENABLED=0 GOFLAGS='-p=2 -buildvcs=false' \
		go install -trimpath -ldflags='-s -w -X main.version=$(KUBE_SCORE_VERSION)' \
		github.com/zegl/kube-score/cmd/kube-score@$(KUBE_SCORE_VERSION)

# The wheels kubectl ptah's install tests (tests/kubectl_ptah/test_pythons.py) install
# from on Python 3.11, 3.12 and 3.13 with pip --no-index: each version's pinned
# dependencies and the build backend, from PyPI once (lab/wheelhouse.py).
wheelhouse: $(STAMP)
	@$(PHASE) wheelhouse "downloading the wheels for Python 3.11, 3.12 and 3.13 (cold: ~20 s)" \
		--cached-if 'test -f build/wheelhouse/3.13/.complete -a -f build/wheelhouse/backend/.complete' \
		-- $(PY) -m lab.wheelhouse

# promtool, which checks the chart's alert rules and runs their unit tests
# (tests/chart/test_monitoring.py). Built from Prometheus's Go module like helm;
# Prometheus tags its Go module v0.X.Y for its release 3.X.Y. To keep the
# build elsewhere, PROMETHEUS_TOOLS (a directory, default .tools).
PROMETHEUS_VERSION := v0.316.0
PROMETHEUS_TOOLS     ?= .tools
PROMTOOL_BUILD     := $(PROMETHEUS_TOOLS)/promtool-$(PROMETHEUS_VERSION)/promtool
PROMTOOL           := $(PROMETHEUS_TOOLS)/bin/promtool

promtool:
	@$(PHASE) promtool "building promtool $(PROMETHEUS_VERSION) from its Go module (cold: ~6 min)" \
		--cached-if 'make -q $(PROMTOOL)' -- make --no-print-directory $(PROMTOOL)

$(PROMTOOL): $(PROMTOOL_BUILD)
	@mkdir -p $(dir $@)
	ln -sfn ../promtool-$(PROMETHEUS_VERSION)/promtool $@

$(PROMTOOL_BUILD):
	GOBIN=$(abspath $(dir $@)) CGO_ENABLED=0 GOFLAGS='-p=2 -buildvcs=false' \
		go install -trimpath -ldflags='-s -w' \
		github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION)

# Prometheus itself, from the same module, for the lab cluster's alert test
# (tests/cluster/test_faults_alerts.py: it scrapes the chart's manager and fires an alert
# for a real unknown outcome). Without the builtinassets tag it serves no web UI,
# which the test does not use: only the HTTP API.
PROMETHEUS_BUILD := $(PROMETHEUS_TOOLS)/prometheus-$(PROMETHEUS_VERSION)/prometheus
PROMETHEUS       := $(PROMETHEUS_TOOLS)/bin/prometheus

prometheus:
	@$(PHASE) prometheus "building prometheus $(PROMETHEUS_VERSION) from its Go module (cold: ~8 min; ~2 min after promtool)" \
		--cached-if 'make -q $(PROMETHEUS)' -- make --no-print-directory $(PROMETHEUS)

$(PROMETHEUS): $(PROMETHEUS_BUILD)
	@mkdir -p $(dir $@)
	ln -sfn ../prometheus-$(PROMETHEUS_VERSION)/prometheus $@

$(PROMETHEUS_BUILD):
	GOBIN=$(abspath $(dir $@)) CGO_ENABLED=0 GOFLAGS='-p=2 -buildvcs=false' \
		go install -trimpath -ldflags='-s -w' \
		github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_VERSION)

# The lab node's container runtime, from Debian's packages: containerd 1.6,
# runc, the CNI plugins (bridge, host-local, loopback, portmap in /usr/lib/cni),
# and iptables for kube-proxy. Debian's rather than their Go modules: they are
# packaged, patched and tested together (containerd's shim with that runc), they
# install in seconds where building containerd, runc (which needs cgo and
# libseccomp) and the plugins would add minutes to a cold build, and the
# kubelet talks to them only through the CRI and CNI contracts. Installed only
# when missing; the machines run as root and reach Debian's archive.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables

node-packages:
	@$(PHASE) node-packages "installing $(NODE_PACKAGES) from Debian (cold: ~1 min)" \
		--cached-if "dpkg-query -W -f='\$${Status}\n' $(NODE_PACKAGES) | grep -c '^install ok installed\$$' | grep -qx '$(words $(NODE_PACKAGES))'" \
		-- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(NODE_PACKAGES)'

# The lab's MySQL-family server (lab.mariadb): Debian's MariaDB 10.11, since MySQL 8.4
# is in no registry these machines reach. lab.mariadb runs its own mariadbd as the mysql
# user in a temporary directory; the package's own service is never started (Debian's
# policy-rc.d on these machines refuses it, and the lab never uses /var/lib/mysql).
MARIADB_PACKAGES := mariadb-server mariadb-client

mariadb:
	@$(PHASE) mariadb "installing $(MARIADB_PACKAGES) from Debian (cold: ~30 s)" \
		--cached-if "dpkg-query -W -f='\$${Status}\n' $(MARIADB_PACKAGES) | grep -c '^install ok installed\$$' | grep -qx '$(words $(MARIADB_PACKAGES))'" \
		-- sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(MARIADB_PACKAGES)'

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The crash simulation, run far longer than CI runs it.
soak: $(STAMP)
	PTAH_SOAK=2000 PTAH_SOAK_SEEDS=64 $(PY) -m pytest -q tests/lifecycle/test_crash_simulation.py

# The runner's end-to-end rows against another ptah-compatible executor (the lab's):
#   make contract EXECUTOR=/path/to/ptah DB_URL=postgres://user:pass@host/db [DEV_URL=...]
#   make contract EXECUTOR=... ENGINE=MySQL DB_URL=mysql://user:pass@host/db DEV_URL=mysql://user:pass@host/emptydb CONTRACT_K='and every_operation'
# (the built-Job rows build a PostgreSQL claim's Job, so a MySQL run selects every_operation;
# a MySQL dev database must be empty: the executor loads the desired schema into it).
# Every operation runs through the runner and its frame must read as a success; add
# CONTRACT_K='and not resolve and not verify' where no registry answers. The lab's
# executor runs these rows in `make test` (tests/labexecutor/test_runner_contract.py,
# with its own PostgreSQL, MariaDB and loopback registry); this target is for any other binary.
contract: $(STAMP)
	@test -n "$(EXECUTOR)" || { echo "make contract needs EXECUTOR=/path/to/ptah"; exit 2; }
	PTAH_CONTRACT_EXECUTOR=$(EXECUTOR) PTAH_CONTRACT_DB_URL=$(DB_URL) PTAH_CONTRACT_DEV_URL=$(DEV_URL) \
		PTAH_CONTRACT_ENGINE=$(ENGINE) \
		$(PY) -m pytest -q tests/runner -k "any_executor $(CONTRACT_K)"

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .tools $(CONTROLPLANE_DIR)/bin build/logs
