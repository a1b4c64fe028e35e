# Sourced by the arm64 scripts: apt confined to a directory of its own. `private_apt DIR ARCH…
# [-- SOURCES_DIR]` sets the array `apt_opts`: apt's lists and downloads under DIR, the given
# architectures (none registered with dpkg: the host's architectures are untouched), no package
# cache files, and the host's sources, or only the deb822 files in SOURCES_DIR. Signatures are
# checked as for the host's own apt.
private_apt() {
  local dir=$1 arch
  shift
  mkdir -p "$dir/lists/partial" "$dir/debs/partial"
  apt_opts=(
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache::Archives=$dir/debs"
    -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root"
  )
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    arch=$1
    shift
    apt_opts+=(-o "APT::Architectures::=$arch")
  done
  if [ "${1:-}" = -- ]; then
    apt_opts+=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$2")
  fi
}
