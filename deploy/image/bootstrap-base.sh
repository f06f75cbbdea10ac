#!/usr/bin/env bash
# Builds a local Debian bookworm base image with python3 (3.11) from the Debian mirror in this
# machine's apt sources, for building daiku's image where no registry serves python:3.11-slim.
#   deploy/image/bootstrap-base.sh [IMAGE]     (default localhost/daiku-base:bookworm)
# Skips the work when IMAGE already exists in buildah's storage (the cache between runs).
set -euo pipefail
image="${1:-localhost/daiku-base:bookworm}"

if buildah inspect --type image "$image" >/dev/null 2>&1; then
  echo "base image $image: cached"
  exit 0
fi

# The first deb.debian.org-style URI in the apt sources (deb822 or one-line format).
mirror="$(grep -hoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/*.sources \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1 | tr -d ' ' || true)"
mirror="${mirror:-http://deb.debian.org/debian}"

rootfs="$(mktemp -d /var/tmp/daiku-base.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm from $mirror"
# python3-venv: the build stage makes a venv to pip-install uv (as on python:3.11-slim).
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  bookworm "$rootfs" "$mirror" >/dev/null
# What an image never needs: downloaded packages, package lists, docs, man pages, translations.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
  "$rootfs"/var/log/* "$rootfs"/var/cache/debconf/*-old
find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
# glibc's iconv converters (8 MB): Python's codecs are its own.
rm -rf "$rootfs"/usr/lib/x86_64-linux-gnu/gconv "$rootfs"/usr/lib/aarch64-linux-gnu/gconv
# Trust what this machine trusts: CAs it added locally (a TLS-intercepting proxy's, say) go into
# the base too, and pip and uv read the system bundle, so the build stage can reach PyPI.
extra_env=()
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$rootfs"/usr/local/share/ca-certificates/
  chroot "$rootfs" update-ca-certificates >/dev/null
  extra_env=(--env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
    --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt)
fi
# python:3.11-slim has `python`; so does this base, for RUN lines written against either.
ln -sf python3 "$rootfs"/usr/bin/python

container="$(buildah from scratch)"
buildah copy --quiet "$container" "$rootfs" / >/dev/null
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 "${extra_env[@]}" --cmd python3 \
  --label org.opencontainers.image.description="Debian bookworm minbase with python3, built by debootstrap" \
  "$container"
buildah commit --quiet --rm "$container" "$image" >/dev/null
echo "base image $image: built"
