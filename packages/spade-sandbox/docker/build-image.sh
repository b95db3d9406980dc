#!/usr/bin/env bash
# Build the Docker image that the spade-sandbox Docker backend runs environments in:
# a minimal Debian with python3, made by debootstrap and `docker import`, because no
# image registry is reachable from the machines this project runs on.
#
# The image is tagged spade-sandbox:py3-<hash of this script's build inputs> and also
# spade-sandbox:py3 (the name the backend uses by default). When the hashed tag already
# exists the build is skipped, so CI pays for it once per change of inputs.
#
# Usage: build-image.sh [--force]
# Environment: SPADE_DEBIAN_MIRROR (default: the first deb.debian.org-style URI apt uses),
#              SPADE_DEBIAN_SUITE (default: bookworm).
set -euo pipefail

suite="${SPADE_DEBIAN_SUITE:-bookworm}"
mirror="${SPADE_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  # Use the mirror apt is configured with (deb822 "URIs:" or one-line "deb URL suite").
  mirror="$(grep -hoE '^(URIs:[[:space:]]*|deb[[:space:]]+)https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
              /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
            | head -n1 | grep -oE 'https?://[^[:space:]]+' || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi
packages="python3"
force=0
[ "${1:-}" = "--force" ] && force=1

for tool in docker debootstrap; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build-image.sh: '$tool' is not installed; install it with: apt-get install -y docker.io debootstrap" >&2
    exit 2
  fi
done

# The mirror is not an input: any mirror serves the same suite's packages.
inputs_hash="$(printf '%s\n%s\n' "$suite" "$packages" | cat - "$0" | sha256sum | cut -c1-12)"
tag="spade-sandbox:py3-$inputs_hash"

if [ $force -eq 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  docker tag "$tag" spade-sandbox:py3
  echo "build-image.sh: $tag exists, build skipped"
  exit 0
fi

previous="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
root="$(mktemp -d /tmp/spade-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
start=$(date +%s)

echo "build-image.sh: debootstrap $suite from $mirror into $root"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
  echo "build-image.sh: debootstrap failed; last lines of $root.log:" >&2
  tail -n 20 "$root.log" >&2
  exit 1
}
rm -f "$root.log"

# Nothing in the sandbox needs package tooling, docs or caches; less in the image is
# less for hostile code to use and a faster import.
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
       "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/* \
       "$root"/var/log/* "$root"/tmp/*

tar -C "$root" --numeric-owner -c . \
  | docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'USER 65534:65534' \
      --change 'WORKDIR /work' \
      --change 'CMD ["python3"]' \
      - "$tag" >/dev/null
docker tag "$tag" spade-sandbox:py3
# Older builds (other input hashes, or the image a forced rebuild replaced) are dropped
# unless a container still uses them.
for old in $(docker images --format '{{.Repository}}:{{.Tag}}' spade-sandbox | grep '^spade-sandbox:py3-' | grep -vx "$tag"); do
  docker rmi "$old" >/dev/null 2>&1 || true
done
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi

echo "build-image.sh: built $tag in $(( $(date +%s) - start )) s ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MiB", $1/1048576}'))"
