#!/usr/bin/env bash
# Installs whatever estuary needs to build, test and run that is missing on a Debian 12 machine:
# Debian packages (compiler, CMake, Ninja, libraries, Chromium for the report and dashboard tests,
# dpkg-dev for `make package`) and the npm packages of the HTML report and of the service's
# dashboard. Idempotent and quiet when everything is present. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build make pkg-config googletest libgtest-dev libgmock-dev
  libbenchmark-dev nlohmann-json3-dev libcli11-dev libfccp-dev libyaml-cpp-dev coinor-libcbc-dev libsqlite3-dev libcpp-httplib-dev etcd-server etcd-client openssl nodejs npm chromium dpkg-dev)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# nodejs may come from another repository that bundles npm; accept a working npm binary.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm}")
fi
if command -v node >/dev/null 2>&1; then
  missing=("${missing[@]/nodejs}")
fi
read -r -a missing <<<"${missing[*]}"
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm packages of the report (charting library embedded into report.html at build time).
if [ ! -f report/node_modules/.package-lock.json ] || [ report/package-lock.json -nt report/node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages of the report" >&2
  (cd report && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# npm packages of the service's dashboard (charting library embedded into the estuary binary at
# build time; playwright-core for the dashboard's browser test).
if [ ! -f dashboard/node_modules/.package-lock.json ] || [ dashboard/package-lock.json -nt dashboard/node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages of the dashboard" >&2
  (cd dashboard && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
