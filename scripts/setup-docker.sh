#!/usr/bin/env bash
# A Docker daemon and the local images the container runbook tests use.
#
# Usage: scripts/setup-docker.sh            (run as root; `make test` runs it)
#
# 1. Installs Debian's docker.io and docker-compose (Compose 1.29) when dockerd is missing.
# 2. Starts `dockerd --bridge=none --iptables=false` when no daemon answers. With no bridge
#    network a container can only use the host's network (`--network host`) or none; the tests
#    use host networking and 127.0.0.1 only. Its pid and log are in $CACHE (.cache/docker).
# 3. When `docker compose` is not available but `docker-compose` is, installs a Docker CLI plugin
#    that hands `docker compose …` to `docker-compose …`, so pages written for Compose v2 run.
# 4. Builds two images from a Debian bookworm minbase root file system (debootstrap; no image
#    registry is needed). The root file system tarball is kept in $CACHE, so a second build on a
#    fresh daemon takes seconds:
#      wiki-test/bookworm:minbase-v1     plain; `vllm` on PATH runs the engine bind-mounted at
#                                        /opt/venv (`python -m vllm.entrypoints.cli.main`)
#      wiki-test/vllm-openai:cpu-v1      ENTRYPOINT = the OpenAI-compatible API server, so
#                                        `docker run IMAGE --model X …` starts it, as the
#                                        vllm/vllm-openai images do
#    Neither image holds an engine: tests bind-mount the vLLM CPU environment at /opt/venv, its
#    base Python at the same path as on the host, and the model directory.
#
# When the daemon cannot be started, the reason goes to $CACHE/unavailable and the script exits 0:
# the Docker tests then skip with that reason. Any other failure exits non-zero.
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE=${WIKI_DOCKER_CACHE:-.cache/docker}
BASE_IMAGE=wiki-test/bookworm:minbase-v1
ENTRY_IMAGE=wiki-test/vllm-openai:cpu-v1
ROOTFS_TAR=$CACHE/bookworm-minbase-v1.tar
# Libraries the host-built Python and vLLM CPU need besides what minbase has.
INCLUDE=libssl3,libffi8,libsqlite3-0,libexpat1,libbz2-1.0,liblzma5,libnuma1,libgomp1,libstdc++6,ca-certificates
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

mkdir -p "$CACHE"
rm -f "$CACHE/unavailable"
T0=$(date +%s)
say() { printf '[setup-docker] %s (%ds)\n' "$1" $(($(date +%s) - T0)); }
unavailable() {
  printf '%s\n' "$1" >"$CACHE/unavailable"
  say "Docker unavailable: $1"
  exit 0
}

daemon_answers() { timeout 20 docker info >/dev/null 2>&1; }

# apt_get: apt-get once the apt/dpkg lock is free (waits, bounded, saying so)
APT_LOG_TAG=setup-docker
source "$(dirname "${BASH_SOURCE[0]}")/apt-lock.sh"

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local APT_LOG="$CACHE/apt.log"
  : >"$APT_LOG"
  apt_get install -y -q "$@" || { apt_get update -q && apt_get install -y -q "$@"; }
}

# ----------------------------------------------------------------------------- the daemon
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker-compose >/dev/null 2>&1; then
  [[ $(id -u) == 0 ]] || unavailable "dockerd is not installed and this user is not root"
  command -v apt-get >/dev/null 2>&1 || unavailable "dockerd is not installed and there is no apt-get"
  say "installing docker.io and docker-compose"
  apt_install docker.io docker-compose || unavailable "apt-get install docker.io failed (see $CACHE/apt.log)"
fi

if ! daemon_answers; then
  [[ $(id -u) == 0 ]] || unavailable "no Docker daemon answers and this user cannot start one (not root)"
  say "starting dockerd --bridge=none --iptables=false"
  setsid dockerd --bridge=none --iptables=false --ip6tables=false \
    >"$CACHE/dockerd.log" 2>&1 </dev/null &
  echo $! >"$CACHE/dockerd.pid"
  for _ in $(seq 1 60); do
    daemon_answers && break
    if ! kill -0 "$(cat "$CACHE/dockerd.pid")" 2>/dev/null; then
      unavailable "dockerd exited during start-up: $(tail -n 1 "$CACHE/dockerd.log")"
    fi
    sleep 0.5
  done
  daemon_answers || unavailable "dockerd did not answer within 30 s: $(tail -n 1 "$CACHE/dockerd.log")"
fi
say "daemon: $(docker version --format '{{.Server.Version}}' 2>/dev/null), storage $(docker info --format '{{.Driver}}' 2>/dev/null)"

# ----------------------------------------------------------------------------- docker compose
if ! docker compose version >/dev/null 2>&1 && command -v docker-compose >/dev/null 2>&1; then
  plugin_dir=/usr/local/lib/docker/cli-plugins
  if [[ -w /usr/local/lib || -w $plugin_dir ]]; then
    mkdir -p "$plugin_dir"
    cat >"$plugin_dir/docker-compose" <<'EOF'
#!/bin/sh
# Docker CLI plugin: `docker compose ARGS` runs `docker-compose ARGS` (Compose 1.x).
if [ "$1" = docker-cli-plugin-metadata ]; then
  printf '%s\n' '{"SchemaVersion":"0.1.0","Vendor":"docker-compose 1.x","Version":"1","ShortDescription":"Docker Compose (docker-compose)"}'
  exit 0
fi
shift
exec docker-compose "$@"
EOF
    chmod 755 "$plugin_dir/docker-compose"
    say "docker compose → docker-compose plugin installed"
  fi
fi

# ----------------------------------------------------------------------------- images
has_image() { docker image inspect "$1" >/dev/null 2>&1; }

if ! has_image "$BASE_IMAGE"; then
  if [[ ! -s $ROOTFS_TAR ]]; then
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
    rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    say "debootstrap --variant=minbase bookworm (about a minute and a half)"
    debootstrap --variant=minbase --include="$INCLUDE" bookworm "$rootfs" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1 || {
      tail -n 5 "$CACHE/debootstrap.log" >&2
      exit 1
    }
    # `vllm` on PATH runs the engine bind-mounted at /opt/venv. (The environment's own console
    # script names the host's interpreter path in its first line, which a container may not have.)
    cat >"$rootfs/usr/local/bin/vllm" <<'EOF'
#!/bin/sh
exec /opt/venv/bin/python -m vllm.entrypoints.cli.main "$@"
EOF
    chmod 755 "$rootfs/usr/local/bin/vllm"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar --numeric-owner -C "$rootfs" -cf "$ROOTFS_TAR.part" .
    mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    rm -rf "$rootfs"
    trap - EXIT
  fi
  say "docker import $BASE_IMAGE"
  docker import --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
fi

if ! has_image "$ENTRY_IMAGE"; then
  say "docker commit $ENTRY_IMAGE"
  cid=$(docker create "$BASE_IMAGE")
  docker commit \
    --change 'ENTRYPOINT ["/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]' \
    --change 'CMD []' "$cid" "$ENTRY_IMAGE" >/dev/null
  docker rm "$cid" >/dev/null
fi
say "images ready: $BASE_IMAGE $ENTRY_IMAGE"
