# shellcheck shell=bash
# Sourced by deploy/dev.sh and deploy/test.sh, which define say() first.
#
# install_missing PACKAGE…: installs Debian packages with apt-get when run as root; otherwise
# says which are missing and the command that installs them, and exits 1. Nothing to do without
# arguments.
install_missing() {
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" -ne 0 ]; then
    say "missing packages: $*; run as root once, or: sudo apt-get install -y $*"
    exit 1
  fi
  say "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
