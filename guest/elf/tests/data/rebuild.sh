#!/bin/sh
# Rebuilds the test fixtures sample-rv64.elf and sample-rv32.elf: guest/programs' bin
# `sample`, release, linked by the same command cargo uses but with user.ld (the same
# layout at 0x1_0000, inside both user ranges) instead of guest/programs/link.ld.
# Run from anywhere; needs the two riscv targets.
set -eu
data=$(cd "$(dirname "$0")" && pwd)
guest=$(cd "$data/../../.." && pwd)
for pair in riscv64gc-unknown-none-elf:rv64 riscv32imac-unknown-none-elf:rv32; do
    target=${pair%%:*}
    width=${pair##*:}
    touch "$guest/programs/src/bin/sample.rs"
    link=$(cargo rustc -q --manifest-path "$guest/Cargo.toml" -p programs --bin sample --target "$target" \
        --release -- --print link-args -C save-temps | grep rust-lld)
    link=$(printf '%s' "$link" | sed "s|-T[^\"]*link.ld|-T$data/user.ld|; s|\"-o\" \"[^\"]*\"|\"-o\" \"$data/sample-$width.elf\"|")
    eval "$link"
done
