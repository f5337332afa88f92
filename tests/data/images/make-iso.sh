#!/usr/bin/env bash
# boot-sector.iso: an ISO 9660 CD whose El Torito boot entry (no emulation, one 512-byte
# sector loaded) is boot-sector.img's boot sector. Needs xorriso (Debian's package);
# SOURCE_DATE_EPOCH pins its dates so the same input gives the same bytes. The file is
# committed: the bench's cases need no xorriso.
set -euo pipefail
cd "$(dirname "$0")"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
head -c 512 boot-sector.img > "$tree/boot.bin"
SOURCE_DATE_EPOCH=1700000000 xorriso -as mkisofs -quiet -V TESTBENCH \
    -b boot.bin -no-emul-boot -boot-load-size 1 -o boot-sector.iso "$tree"
