#!/usr/bin/env bash
# Install the Debian packages the tests and benchmarks use, when missing.
# umoci/skopeo/podman/runc check images; busybox-static makes test root filesystems;
# docker-registry is the reference registry; dpkg-dev/gnupg build and sign fixture apt repos.
# python3-venv: the SBOM test installs the SPDX validator (pyspdxtools) into a venv.
# gcc/binutils/unzip: the device-code test builds a shared object, adds a fatbin section to it
# (objcopy), reads its section headers (readelf) and unpacks NVIDIA's tool wheels.
# openssl/apache2-utils/python3-cryptography: the registry fixture makes its CA and
# certificates (openssl), its bcrypt htpasswd file (htpasswd) and signs tokens (the token
# server in tests/fixtures).
# qemu-user-static: the arm64 self-test runs under qemu-aarch64-static (scripts/build-selftest-arm64.sh).
set -euo pipefail
pkgs=(umoci skopeo podman runc busybox-static docker-registry uidmap gnupg dpkg-dev
      fakeroot python3 python3-venv pigz hyperfine mmdebstrap time ca-certificates
      gcc binutils patchelf unzip python3-pip openssl apache2-utils python3-cryptography
      qemu-user-static)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Wait for another apt (unattended upgrades, a second job) instead of failing on its lock.
  lock=(-o DPkg::Lock::Timeout=600)
  apt-get "${lock[@]}" update -qq
  apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Podman settings that work on these machines (README.md, Development): cgroupfs instead of a
# systemd cgroup manager, no default ulimits, no pids limit. Root podman
# reads only the system files, so as root they go into a drop-in; otherwise the user's file.
if [ "$(id -u)" = 0 ]; then
  conf=/etc/containers/containers.conf.d/50-gpuimg.conf
else
  conf="${XDG_CONFIG_HOME:-$HOME/.config}/containers/containers.conf"
fi
mkdir -p "$(dirname "$conf")"
if [ ! -f "$conf" ]; then
  cat > "$conf" <<'CONF'
[containers]
default_ulimits = []
pids_limit = 0

[engine]
cgroup_manager = "cgroupfs"
CONF
fi
