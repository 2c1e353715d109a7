# Sourced by scripts/ensure-*.sh: `apt_install WHO PACKAGE WHAT INSTEAD` installs Debian's PACKAGE
# with apt-get when this runs as root (as in CI, .ci/run). Not root, no apt-get, or apt-get failing:
# says why on stderr (WHO: the tests that need it; WHAT: what is missing; INSTEAD: what to do) and
# returns 1, so the caller decides whether the missing tool skips its tests or fails them.
apt_install() {
  local who="$1" package="$2" what="$3" instead="$4"
  if [ "$(id -u)" -ne 0 ]; then
    echo "$who: $what is not installed and this is not root, so it cannot be installed here; $instead" >&2
    return 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$who: $what is not installed and there is no apt-get to install Debian's; $instead" >&2
    return 1
  fi
  echo "$who: installing Debian's $package (apt-get)" >&2
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null; }; then
    echo "$who: apt-get could not install $package; $instead" >&2
    return 1
  fi
}
