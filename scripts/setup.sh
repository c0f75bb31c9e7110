#!/usr/bin/env bash
# Installs what the project needs on Debian 12, idempotently: system packages through apt-get (only those
# missing) and the Python packages into the project's venv (only when pyproject.toml changed).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# sudo, ping and net-tools (route, arp): what p4lang/tutorials' Makefiles and topologies run
# tshark: the tests read our Wireshark dissector's output
# gcc and libc6-dev: p4switch's native engine compiles each program to C (cffi opens the library in ABI
# mode, so neither Python's nor libffi's headers are needed); gcc brings AddressSanitizer for the fuzz test
# openssh-server: the cluster test runs its own sshd as the second server (docs/cluster.md); nothing here
# starts the system's sshd
APT_PACKAGES=(python3-venv python3-pip iproute2 tcpdump ethtool mininet sudo iputils-ping net-tools tshark gcc
              libc6-dev openssh-server)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "setup: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark's wireshark-common asks whether non-root users may capture: no (we capture as root)
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ ! -x $VENV/bin/python ]]; then
    echo "setup: creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
stamp=$VENV/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [[ ! -e $stamp ]]; then
    echo "setup: pip install -e .[dev] into $VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e '.[dev]'
    rm -f "$VENV"/.installed-*
    touch "$stamp"
fi

# Mininet is Debian's pure-Python package (mnexec comes with it); the venv's Python is not Debian's, so the
# package is linked into the venv's site-packages rather than installed twice.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ ! -e $site/mininet ]]; then
    echo "setup: linking Debian's mininet into $VENV"
    ln -sfn /usr/lib/python3/dist-packages/mininet "$site/mininet"
fi
