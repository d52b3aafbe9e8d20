#!/bin/sh
# Installs Icarus Verilog and Verilator from Debian's packages when they are missing.
# Exits 2 with one sentence when they are missing and cannot be installed.
missing=""
command -v iverilog >/dev/null 2>&1 || missing="$missing iverilog"
command -v verilator >/dev/null 2>&1 || missing="$missing verilator"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing$missing with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null && exit 0
fi
echo "trainforge needs$missing for 'make test' and cannot install it here (needs root and apt-get): install the Debian packages$missing and run again." >&2
exit 2
