#!/usr/bin/env bash
# Regenerates corpus/{train,valid}.{en,eu}.txt from the pinned Debian
# packages of the LibreOffice help (English and Basque).  See PROVENANCE.md.
#
#   bash corpus/fetch.sh
#
# Needs: apt-get, dpkg, sha256sum, python3 (standard library only).  Works on
# Debian 12 (bookworm) with the main archive in its apt sources.  Running as
# root lets the script run `apt-get update` once if the package lists are
# stale.  Re-running reproduces the committed files byte for byte.
set -euo pipefail

VERSION='4:7.4.7-1+deb12u14'
PKGS=(libreoffice-help-en-us libreoffice-help-eu)
declare -A SHA256=(
  [libreoffice-help-en-us]=8faa840285734d6cfe1ed25537b48f07e74bd6412e3917bf8e5f8a653f7b3712
  [libreoffice-help-eu]=e88eaa5da5d9254a7c9bc1a6ac89d04758380adc044f9a007f666de68ef9aa91
)

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

for tool in apt-get apt-cache dpkg sha256sum python3; do
  command -v "$tool" >/dev/null || { echo "fetch.sh: '$tool' not found (needs a Debian system)" >&2; exit 1; }
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/debs" "$TMP/root"

download() {  # download PKG -> exit status of apt-get download
  (cd "$TMP/debs" && apt-get download -q "$1=$VERSION")
}

updated=no
for pkg in "${PKGS[@]}"; do
  if ! download "$pkg"; then
    if [[ $updated == no && $(id -u) -eq 0 ]]; then
      echo "fetch.sh: $pkg=$VERSION not found; running apt-get update and retrying" >&2
      apt-get update -q >&2
      updated=yes
    fi
    if [[ $updated == no ]] || ! download "$pkg"; then
      {
        echo "fetch.sh: ERROR: $pkg version $VERSION is not served by the configured apt sources."
        echo "Versions apt can see now:"
        apt-cache policy "$pkg" || true
        echo "The corpus is pinned to $VERSION (sha256 ${SHA256[$pkg]})."
        echo "Obtain that exact .deb (e.g. from the Debian snapshot archive), or re-pin"
        echo "VERSION/SHA256 here and update PROVENANCE.md if the text changes."
      } >&2
      exit 1
    fi
  fi
done

for pkg in "${PKGS[@]}"; do
  debs=("$TMP/debs/${pkg}_"*.deb)
  if [[ ${#debs[@]} -ne 1 || ! -f ${debs[0]} ]]; then
    echo "fetch.sh: expected exactly one .deb for $pkg, found: ${debs[*]}" >&2
    exit 1
  fi
  deb=${debs[0]}
  actual=$(sha256sum "$deb" | cut -d' ' -f1)
  if [[ $actual != "${SHA256[$pkg]}" ]]; then
    echo "fetch.sh: ERROR: sha256 mismatch for $(basename "$deb")" >&2
    echo "  expected ${SHA256[$pkg]}" >&2
    echo "  got      $actual" >&2
    exit 1
  fi
  echo "fetch.sh: $(basename "$deb") sha256 OK"
  dpkg -x "$deb" "$TMP/root"
done

python3 "$HERE/extract.py" "$TMP/root/usr/share/libreoffice/help" "$HERE"
echo "fetch.sh: wrote $HERE/{train,valid}.{en,eu}.txt"
