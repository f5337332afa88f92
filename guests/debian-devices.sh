#!/bin/busybox sh
# One device check per boot, chosen by tb.do= on the kernel command line; every line
# meant for a case starts with "testbench-guest: ", every failure with
# "testbench-guest: FAIL ". Then the guest powers off (QEMU exits 0: an SBI reset on
# riscv64, PSCI SYSTEM_OFF on aarch64, ACPI S5 on x86_64). The same script serves the
# riscv64, aarch64 and x86_64 recipes: `uname -m` picks where the device slots are.
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys

say() { echo "testbench-guest: $*"; }
finish() { sync; say "uptime $(cut -d ' ' -f 1 /proc/uptime) s"; say "done ${ACT:-none}"; poweroff -f; sleep 10; }
fail() { say "FAIL $ACT: $*"; finish; }

ACT= ECHO= TRACE= SLOT= PART= FILE= SHA= PORT= ADDR= TEXT= IP=10.0.2.15 MASK=255.255.255.0 GW=10.0.2.2 COUNT=1 WAIT=60 FS=ext4
set -f
for w in $(cat /proc/cmdline); do
  case "$w" in
    tb.do=*) ACT=${w#*=} ;;
    tb.slot=*) SLOT=${w#*=} ;;
    tb.part=*) PART=${w#*=} ;;
    tb.file=*) FILE=${w#*=} ;;
    tb.sha=*) SHA=${w#*=} ;;
    tb.fs=*) FS=${w#*=} ;;
    tb.port=*) PORT=${w#*=} ;;
    tb.addr=*) ADDR=${w#*=} ;;
    tb.text=*) TEXT=${w#*=} ;;
    tb.ip=*) IP=${w#*=} ;;
    tb.mask=*) MASK=${w#*=} ;;
    tb.gw=*) GW=${w#*=} ;;
    tb.count=*) COUNT=${w#*=} ;;
    tb.wait=*) WAIT=${w#*=} ;;
    tb.echo=*) ECHO=${w#*=} ;;
    tb.trace) TRACE=1 ;;
  esac
done
set +f
[ -n "$TRACE" ] && set -x
say "init reached"
say "kernel $(uname -r) on $(uname -m)"
say "action ${ACT:-none}"

# insmod each module unless it is loaded already; busybox insmod takes the .ko.xz.
load() {
  for m in "$@"; do
    [ -d /sys/module/$m ] && continue
    insmod /lib/modules/$m.ko.xz || fail "insmod $m.ko.xz failed"
  done
}

# Where slot N's device sits, per width. BUS names the transport in messages;
# TRANSPORT is its module when Debian builds it as one (empty when built in).
case "$(uname -m)" in
riscv64)
  # QEMU virt: virtio-mmio transport N (virtio-mmio-bus.N) at 0x10001000 + N * 0x1000.
  BUS=virtio-mmio TRANSPORT=virtio_mmio
  slot_dir() { printf '/sys/devices/platform/soc/%x.virtio_mmio' $((0x10001000 + $1 * 0x1000)); }
  ;;
aarch64)
  # QEMU virt: virtio-mmio transport N (virtio-mmio-bus.N) at 0x0a000000 + N * 0x200.
  BUS=virtio-mmio TRANSPORT=virtio_mmio
  slot_dir() { printf '/sys/devices/platform/%x.virtio_mmio' $((0x0a000000 + $1 * 0x200)); }
  ;;
x86_64)
  # QEMU q35: the bench puts slot N's device on the root bus at PCI 00:(0x10 + N).0
  # (bus=pcie.0,addr=0x1N); virtio-pci is built into Debian's amd64 kernel.
  BUS=virtio-pci TRANSPORT=
  slot_dir() { printf '/sys/devices/pci0000:00/0000:00:%02x.0' $((0x10 + $1)); }
  ;;
*)
  fail "no device slots known on $(uname -m)"
  ;;
esac
load_blk() { load $TRANSPORT virtio_blk; }
load_ext4() { load crc16 crc32c_generic mbcache jbd2 ext4; }
load_vfat() { load fat vfat nls_cp437 nls_ascii; }
load_net() { load $TRANSPORT failover net_failover virtio_net; }
# The block device (vda, ...) on slot N, found by its sysfs path, not by name order.
slot_blk() {
  for b in $(slot_dir $1)/virtio*/block/*; do
    [ -e "$b" ] && { echo "${b##*/}"; return 0; }
  done
  return 1
}
# The network interface on slot N.
slot_net() {
  for n in $(slot_dir $1)/virtio*/net/*; do
    [ -e "$n" ] && { echo "${n##*/}"; return 0; }
  done
  return 1
}
# The partition of disk $1 named $2 (GPT partition name) or numbered $2.
part_of() {
  case "$2" in
    *[!0-9]*) ;;
    *) [ -e /sys/class/block/$1/$1$2 ] && { echo $1$2; return 0; }; return 1 ;;
  esac
  for u in /sys/class/block/$1/$1*/uevent; do
    [ -e "$u" ] || continue
    grep -qx "PARTNAME=$2" "$u" && { p=${u%/uevent}; echo "${p##*/}"; return 0; }
  done
  return 1
}
# Where a raw text goes on disk $1: its first partition if it has one, else the disk.
raw_target() { if [ -e /sys/class/block/$1/${1}1 ]; then echo ${1}1; else echo $1; fi; }
# The text at the start of a device: its first line, NULs dropped.
first_line() { dd if=/dev/$1 bs=512 count=1 2>/dev/null | tr -d '\000' | head -n 1; }
# dd's own complaint (its last lines are the record counts).
dd_err() { grep -m 1 -v 'records' /tmp/dd.err; }
write_line() {
  printf '%s\n' "$2" | dd of=/dev/$1 bs=512 count=1 conv=sync,fsync 2>/tmp/dd.err \
    || fail "writing /dev/$1: $(dd_err)"
  sync
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; blockdev --flushbufs /dev/$1 2>/dev/null; }
disk_of() {
  load_blk
  DISK=$(slot_blk $1) || fail "no block device on $BUS slot $1 ($(slot_dir $1))"
}
# Mounts partition $PART of the slot's disk read-only as $1 (ext4 or vfat) on /mnt.
mount_part() {
  disk_of ${SLOT:-0}
  [ -n "$PART" ] || fail "tb.part= (a GPT partition name or number) missing"
  P=$(part_of $DISK "$PART") || fail "no partition '$PART' on $DISK (slot ${SLOT:-0})"
  case "$1" in ext4) load_ext4 ;; vfat) load_vfat ;; *) fail "tb.fs=$1: ext4 or vfat" ;; esac
  mount -t $1 -o ro /dev/$P /mnt 2>/tmp/mount.err
}
listing() {
  (cd /mnt && find . | sort) | while read -r f; do
    [ "$f" = . ] && continue
    if [ -d "/mnt/$f" ]; then
      say "$ACT: dir ${f#./}"
    else
      say "$ACT: file ${f#./} $(wc -c < "/mnt/$f") $(sha256sum "/mnt/$f" | cut -d ' ' -f 1)"
    fi
  done
}

net_up() {
  # No IPv6 at all: the card must send nothing but ARP and IPv4.
  echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
  echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
  load_net
  IF=$(slot_net 2) || fail "no network interface on $BUS slot 2 ($(slot_dir 2))"
  ifconfig lo 127.0.0.1 up
  ifconfig $IF $IP netmask $MASK up || fail "ifconfig $IF $IP"
  route add default gw $GW || fail "route add default gw $GW"
  say "net: $IF (slot 2) up $IP netmask $MASK gateway $GW"
}
# Waits until a socket is bound on local port $2 of /proc/net/$1 or $1 6 (tcp: listening;
# busybox nc listens on an IPv6 socket that takes IPv4 too, so it shows in tcp6).
wait_bound() {
  hex=$(printf ':%04X ' $2)
  i=0
  while [ $i -lt 100 ]; do
    if [ $1 = tcp ]; then grep -q "^ *[0-9]*: [0-9A-F]*$hex[0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 && return 0
    else grep -q "^ *[0-9]*: [0-9A-F]*$hex" /proc/net/udp /proc/net/udp6 && return 0; fi
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

case "$ACT" in
disk-write)
  disk_of ${SLOT:-0}; T=$(raw_target $DISK)
  write_line $T "TESTBENCH ${TEXT:-written-by-disk-write}"
  say "disk-write: wrote 'TESTBENCH ${TEXT:-written-by-disk-write}' to $T (slot ${SLOT:-0})"
  ;;
disk-read)
  disk_of ${SLOT:-0}; T=$(raw_target $DISK)
  L=$(first_line $T)
  case "$L" in
    "TESTBENCH "*) say "disk-read: found '$L' on $T (slot ${SLOT:-0})" ;;
    *) fail "no text on $T (slot ${SLOT:-0}): first bytes $(dd if=/dev/$T bs=16 count=1 2>/dev/null | hexdump -v -e '16/1 "%02x"')" ;;
  esac
  ;;
disk-keep)
  # Same command line every boot: reads the generation the last boot left, writes the next.
  disk_of ${SLOT:-0}; T=$(raw_target $DISK)
  L=$(first_line $T)
  case "$L" in
    "TESTBENCH generation "*) G=${L#TESTBENCH generation }; case "$G" in *[!0-9]*|'') fail "unreadable '$L' on $T" ;; esac; FOUND="generation $G" ;;
    *) G=0; FOUND=nothing ;;
  esac
  write_line $T "TESTBENCH generation $((G + 1))"
  say "disk-keep: found $FOUND, wrote generation $((G + 1)) on $T (slot ${SLOT:-0})"
  ;;
vault)
  disk_of ${SLOT:-4}; T=$(raw_target $DISK)
  W="TESTBENCH vault ${TEXT:-written-by-vault}"
  write_line $T "$W"
  drop_caches $T
  L=$(first_line $T)
  [ "$L" = "$W" ] || fail "wrote '$W' to $T (slot ${SLOT:-4}) but read back '$L'"
  say "vault: wrote and read back '$W' on $T (slot ${SLOT:-4})"
  ;;
ro-write)
  disk_of ${SLOT:-1}
  say "ro-write: $DISK (slot ${SLOT:-1}) has ro=$(cat /sys/block/$DISK/ro)"
  B=$(dd if=/dev/$DISK bs=512 count=1 2>/dev/null | sha256sum | cut -d ' ' -f 1)
  if printf 'TESTBENCH ro-write\n' | dd of=/dev/$DISK bs=512 count=1 conv=sync,fsync 2>/tmp/dd.err; then
    fail "the write to $DISK (slot ${SLOT:-1}) succeeded"
  fi
  say "ro-write: write refused: $(dd_err)"
  drop_caches $DISK
  A=$(dd if=/dev/$DISK bs=512 count=1 2>/dev/null | sha256sum | cut -d ' ' -f 1)
  [ "$A" = "$B" ] || fail "the first sector of $DISK changed after the refused write"
  say "ro-write: first sector unchanged"
  # Past Linux's own check: clear the ro flag and send the write to the device.
  if blockdev --setrw /dev/$DISK 2>/tmp/bd.err; then
    say "ro-write: after blockdev --setrw, ro=$(cat /sys/block/$DISK/ro)"
    if printf 'TESTBENCH ro-write\n' | dd of=/dev/$DISK bs=512 count=1 conv=sync oflag=direct 2>/tmp/dd.err; then
      say "ro-write: direct write accepted by Linux"
    else
      say "ro-write: direct write refused: $(dd_err)"
    fi
  else
    say "ro-write: blockdev --setrw refused: $(tail -n 1 /tmp/bd.err)"
  fi
  drop_caches $DISK
  A=$(dd if=/dev/$DISK bs=512 count=1 2>/dev/null | sha256sum | cut -d ' ' -f 1)
  [ "$A" = "$B" ] || fail "the first sector of $DISK changed"
  say "ro-write: first sector still unchanged"
  ;;
ext4-read|fat-read)
  [ $ACT = ext4-read ] && F=ext4 || F=vfat
  mount_part $F || fail "mounting $P ($F, read-only): $(cat /tmp/mount.err)"
  say "$ACT: mounted $P (partition '$PART' of $DISK, slot ${SLOT:-0}) as $F read-only"
  if [ -n "$FILE" ]; then
    [ -f "/mnt/$FILE" ] || fail "no file '$FILE' on $P"
    say "$ACT: sha256 $(sha256sum "/mnt/$FILE" | cut -d ' ' -f 1) $FILE"
  fi
  listing
  umount /mnt
  ;;
flip-detect)
  [ -n "$FILE" ] && [ -n "$SHA" ] || fail "tb.file= and tb.sha= needed"
  if ! mount_part $FS; then
    say "flip-detect: MOUNT-FAILED $P ($FS): $(tail -n 1 /tmp/mount.err)"
    finish
  fi
  S=$(sha256sum "/mnt/$FILE" 2>/tmp/sha.err | cut -d ' ' -f 1)
  if [ -z "$S" ]; then say "flip-detect: READ-FAILED $FILE: $(tail -n 1 /tmp/sha.err)"
  elif [ "$S" = "$SHA" ]; then say "flip-detect: MATCH $FILE sha256 $S"
  else say "flip-detect: MISMATCH $FILE sha256 $S expected $SHA"; fi
  umount /mnt
  ;;
echo-server)
  net_up
  PORT=${PORT:-7}
  # tb.echo=line: echo one line and close; otherwise echo until the peer closes. Both
  # keep a copy of what they echoed, so a connection that carried nothing (a dial that
  # gave up before the guest answered) is not counted. tb.count=N (default 1) echoed
  # connections, then power off; tb.count=0 serves until the case ends.
  printf '#!/bin/sh\nexec tee /tmp/echoed\n' > /tmp/echo-cat
  printf '#!/bin/sh\nIFS= read -r l && printf "%%s\\n" "$l" | tee /tmp/echoed\n' > /tmp/echo-line
  chmod 755 /tmp/echo-cat /tmp/echo-line
  [ "$ECHO" = line ] && E=/tmp/echo-line || E=/tmp/echo-cat
  n=0
  while [ $COUNT = 0 ] || [ $n -lt $COUNT ]; do
    rm -f /tmp/echoed
    nc -l -p $PORT -e $E &
    NC=$!
    wait_bound tcp $PORT || fail "nothing listening on tcp port $PORT"
    say "echo-server: listening on $IP:$PORT"
    wait $NC
    if [ -s /tmp/echoed ]; then
      n=$((n + 1))
      say "echo-server: connection $n echoed $(wc -c < /tmp/echoed) bytes"
    else
      say "echo-server: a connection closed with nothing echoed"
    fi
  done
  ;;
connect)
  net_up
  [ -n "$ADDR" ] && [ -n "$PORT" ] || fail "tb.addr= and tb.port= needed"
  W=${TEXT:-testbench-hello}
  mkfifo /tmp/in
  nc $ADDR $PORT < /tmp/in > /tmp/out 2>/tmp/nc.err &
  NC=$!
  exec 3>/tmp/in
  say "connect: sending '$W' to $ADDR:$PORT"
  echo "$W" >&3
  i=0
  while [ $i -lt $((WAIT * 10)) ] && ! grep -q . /tmp/out && kill -0 $NC 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  sleep 0.2
  exec 3>&-
  kill $NC 2>/dev/null; wait $NC 2>/dev/null
  R=$(head -n 1 /tmp/out)
  [ -n "$R" ] || fail "nothing came back from $ADDR:$PORT $(cat /tmp/nc.err)"
  say "connect: received '$R'"
  ;;
poke)
  net_up
  PORT=${PORT:-47000}
  sleep 100000 | nc.traditional -u -l -p $PORT > /tmp/poke 2>/tmp/nc.err &
  wait_bound udp $PORT || fail "nothing bound on udp port $PORT: $(cat /tmp/nc.err)"
  say "poke: waiting on udp port $PORT"
  i=0
  while [ $i -lt $((WAIT * 10)) ] && ! [ -s /tmp/poke ]; do sleep 0.1; i=$((i + 1)); done
  [ -s /tmp/poke ] || fail "no datagram on udp port $PORT in $WAIT s"
  sleep 0.2
  say "poke: received '$(cat /tmp/poke)'"
  ;;
rtc)
  # The real-time clocks the kernel registered: a device-tree edit that hides the RTC's
  # node from its driver (aarch64 and riscv virt) shows here as none.
  R=$(ls /sys/class/rtc 2>/dev/null | tr '\n' ' ')
  R=${R% }
  say "rtc: ${R:-none}"
  ;;
rng)
  # 16 bytes from the kernel's random pool, in hex: what a boot draws from its entropy
  # (the seed QEMU hands the kernel, RDRAND/RNDR, timings). Under icount with a pinned
  # -seed the line repeats; with QEMU's seed drawn from host entropy it does not.
  say "rng: $(head -c 16 /dev/urandom | hexdump -v -e '16/1 "%02x"')"
  ;;
ram-secret)
  # A secret made at run time (nothing in this script or on the command line spells it
  # out), written by a subshell to a file in RAM; the subshell exits and the file is
  # removed. Whether the pages that held it are wiped is the kernel's choice:
  # init_on_free=1 on the command line zeroes every page it frees. The guest then idles
  # while the bench reads its RAM (ram_forbid).
  ( S=$(printf 'tb-ram-secret-%s' $((42 * 1001))); printf '%s\n' "$S" > /tmp/secret )
  rm -f /tmp/secret
  say "ram-secret: written to /tmp/secret by a process that exited, then removed"
  say "ram-secret: idle"
  while :; do sleep 3600; done
  ;;
idle)
  # Nothing to do: the guest says so and rests, for the bench's window at rest ([idle]).
  say "idle: at rest"
  while :; do sleep 3600; done
  ;;
input)
  # One line from the console, with a deadline; the tty echoes what is typed.
  say "input: type a line"
  IFS= read -r -t 30 L || fail "no line on the console in 30 s"
  say "input: got '${L%$(printf '\r')}'"
  ;;
split-word)
  # A word a case might forbid, split by an ANSI escape sequence (SGR reset).
  printf 'testbench-guest: split PAN\033[0mIC word\n'
  ;;
reset)
  # A reset instead of a poweroff: under -no-reboot QEMU ends (reason guest-reset).
  say "reset: rebooting"
  sync
  reboot -f
  sleep 10
  fail "reboot -f returned"
  ;;
crash)
  # The kernel's own crash on demand: sysrq c dereferences NULL in sysrq_handle_crash,
  # an oops the kernel turns into a panic (with panic=-1, a reset).
  say "crash: sysrq c"
  echo c > /proc/sysrq-trigger
  sleep 10
  fail "sysrq c returned"
  ;;
hung-task)
  # A task in D state past the hung-task detector's timeout: a write into a frozen
  # filesystem (partition $PART of the slot's disk, ext4, mounted read-write) waits,
  # uninterruptibly, for a thaw that never comes.
  [ -e /proc/sys/kernel/hung_task_timeout_secs ] || fail "no hung-task detector in this kernel"
  mount_part ext4 || fail "mounting $P (ext4): $(cat /tmp/mount.err)"
  mount -o remount,rw /mnt || fail "remounting /mnt read-write"
  fsfreeze --freeze /mnt || fail "fsfreeze --freeze /mnt"
  echo 2 > /proc/sys/kernel/hung_task_timeout_secs
  say "hung-task: writing into a frozen filesystem"
  echo stuck > /mnt/stuck &
  sleep 60
  fail "no hung task reported in 60 s"
  ;;
reboot)
  # Boots the same kernel and /init again until it has booted COUNT + 1 times: the boots
  # so far are counted on the first line of the slot's disk (its first partition), the one
  # thing that lasts across a reset. The bench expects COUNT resets (reboots = COUNT).
  load_blk
  B=$(slot_blk ${SLOT:-0}) || fail "no disk on slot ${SLOT:-0}"
  T=$(raw_target $B)
  N=$(first_line $T | sed -n 's/^boots \([0-9][0-9]*\)$/\1/p')
  N=$((${N:-0} + 1))
  write_line $T "boots $N"
  say "reboot: boot $N of $((COUNT + 1))"
  if [ $N -le $COUNT ]; then
    say "reboot: rebooting"
    reboot -f
    sleep 10
    fail "reboot -f returned"
  fi
  ;;
oom)
  # The kernel's out-of-memory killer, reached from user space: a program whose one
  # string doubles until the kernel kills it (an OOM report, a kind the bench allows
  # unless a case forbids it). The program's end and the boot's go on.
  say "oom: a program allocating until the kernel kills it"
  awk 'BEGIN { s = "0123456789abcdef"; while (1) s = s s }'
  say "oom: the program ended with status $?"
  ;;
probe)
  load_blk; load_net
  for d in /sys/block/* /sys/class/net/*; do
    say "probe: $d -> $(readlink -f $d)"
  done
  for s in 0 1 2 3 4 5 6 7; do say "probe: slot $s: $(slot_dir $s): block $(slot_blk $s) net $(slot_net $s)"; done
  say "probe: applets $(busybox --list | tr '\n' ' ')"
  nc --help 2>&1 | sed 's/^/testbench-guest: probe: nc: /'
  blockdev --help 2>&1 | sed 's/^/testbench-guest: probe: blockdev: /' 
  ;;
'')
  say "no action: put tb.do=ACTION on the kernel command line"
  ;;
*)
  fail "unknown action '$ACT'"
  ;;
esac
finish
