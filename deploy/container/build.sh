#!/bin/sh
# Builds carryover's container image from Debian's packages, with no base image pulled from a
# registry: mmdebstrap makes the root file system from the Debian archive (the apt sources this
# host uses), and the Containerfile puts it, the carryover binary and the config into a scratch
# image. Needs mmdebstrap and buildah or podman (all in Debian: apt-get install mmdebstrap buildah).
#
#   deploy/container/build.sh [IMAGE]       # default carryover:latest
#
# The packages: the kernel's Python with what the checkpoint agent uses (dill, xxhash, zstandard)
# and the libraries the warm pool pre-imports, pip for the sessions' own installs; bubblewrap,
# util-linux (setpriv, prlimit), mount and e2fsprogs (workspace disk images) for the sandbox; CA
# certificates for S3 over TLS. The same list as the Makefile's DEBS, less the test tools.
set -eu
image=${1:-carryover:latest}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
suite=${SUITE:-bookworm}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

PACKAGES="python3 python3-ipykernel python3-dill python3-xxhash python3-zstandard python3-numpy \
python3-pandas python3-matplotlib python3-pip bubblewrap util-linux mount e2fsprogs procps \
ca-certificates tzdata"

mmdebstrap --variant=minbase --include="$(echo $PACKAGES | tr ' ' ',')" \
	--aptopt='APT::Install-Recommends "false"' \
	--customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
	"$suite" "$work/rootfs.tar"

(cd "$root" && CGO_ENABLED=1 go build -trimpath -o "$work/carryover" ./cmd/carryover)
cp "$here/Containerfile" "$here/carryover.yaml" "$work/"

if command -v buildah >/dev/null; then
	buildah bud -f "$work/Containerfile" -t "$image" "$work"
else
	podman build -f "$work/Containerfile" -t "$image" "$work"
fi
