#!/bin/busybox sh
# The OpenSSH guest's /init, shared by the riscv64, x86_64 and aarch64 recipes
# (debian-openssh.toml, -x86_64.toml, -aarch64.toml): `uname -m` picks where the device
# slots are. The mode comes from tb.sshd= on the kernel command line:
#   net     the card on slot 2 (virtio-mmio transport 2 on riscv64 and aarch64, PCI
#           00:12.0 on x86_64) at 10.0.2.15/24 (gateway 10.0.2.2, no IPv6),
#           `sshd -D -e` in the foreground, each of its log lines on the console
#           prefixed "sshd: "; serves until QEMU is killed.
#   serial  no network: `sshd -i` reading the virtio-serial port named `ssh` and writing
#           the one named `ssh-out`, its log carried a line per write to the port named
#           `log`; powers off when sshd exits.
# The appended archive brings /etc/ssh/ssh_host_ed25519_key, /root/.ssh/authorized_keys
# and optionally /etc/ssh/sshd_config. Every line of /init's own starts with
# "testbench-guest: ", every failure with "testbench-guest: FAIL ", after which the
# guest powers off (QEMU exits 0: an SBI reset on riscv64, PSCI SYSTEM_OFF on aarch64,
# ACPI S5 on x86_64).
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts
# sshd gives a session asking for a terminal a pseudo-terminal from /dev/ptmx.
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts

say() { echo "testbench-guest: $*"; }
LOGDEV=
fail() {
  say "FAIL sshd: $*"
  # In the serial mode the case reads the log port, not the console: say it there too.
  [ -n "$LOGDEV" ] && echo "testbench-guest: FAIL sshd: $*" > "$LOGDEV"
  say "uptime $(cut -d ' ' -f 1 /proc/uptime) s"
  poweroff -f; sleep 10
}

MODE= TRACE= IP=10.0.2.15 MASK=255.255.255.0 GW=10.0.2.2
set -f
for w in $(cat /proc/cmdline); do
  case "$w" in
    tb.sshd=*) MODE=${w#*=} ;;
    tb.ip=*) IP=${w#*=} ;;
    tb.mask=*) MASK=${w#*=} ;;
    tb.gw=*) GW=${w#*=} ;;
    tb.trace) TRACE=1 ;;
  esac
done
set +f
[ -n "$TRACE" ] && set -x
say "init reached"
say "kernel $(uname -r) on $(uname -m)"
say "mode ${MODE:-none}"
hostname testbench-guest

load() {
  for m in "$@"; do
    [ -d /sys/module/$m ] && continue
    insmod /lib/modules/$m.ko.xz || fail "insmod $m.ko.xz failed"
  done
}

# Where slot N's device sits, per width (as in debian-devices.sh). BUS names the
# transport in messages; TRANSPORT is its module when Debian builds it as one (empty
# when built in). virtio_console, the serial mode's ports, is built into all three
# kernels (CONFIG_VIRTIO_CONSOLE=y).
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
  # QEMU q35: the bench puts slot N's device on the root bus at PCI 00:(0x10 + N).0;
  # virtio-pci is built into Debian's amd64 kernel.
  BUS=virtio-pci TRANSPORT=
  slot_dir() { printf '/sys/devices/pci0000:00/0000:00:%02x.0' $((0x10 + $1)); }
  ;;
*)
  fail "no device slots known on $(uname -m)"
  ;;
esac

# Logins: root (shell busybox sh, home /root) and sshd's privilege-separation user
# (compiled-in name `sshd`, never logs in). `*` in root's shadow entry is no password,
# not a lock: with UsePAM no, sshd refuses an account whose entry starts with `!`.
# The aging fields are empty, so no password expiry can stop a key login.
# Group tty (5) owns the session's pseudo-terminal.
cat > /etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/sh
sshd:x:100:65534:sshd privilege separation:/run/sshd:/bin/false
EOF
cat > /etc/group <<'EOF'
root:x:0:
tty:x:5:
nogroup:x:65534:
EOF
cat > /etc/shadow <<'EOF'
root:*:::::::
sshd:!:::::::
EOF
chmod 644 /etc/passwd /etc/group
chmod 600 /etc/shadow
printf 'passwd: files\ngroup: files\nshadow: files\n' > /etc/nsswitch.conf
# The login records sshd-session writes at each login and logout (utmp, wtmp, lastlog):
# present and empty, so that it writes them instead of logging that they are missing.
: > /run/utmp; : > /var/log/wtmp; : > /var/log/lastlog
# The login shell's prompt: the working folder and "# ".
printf 'PS1='"'"'\\w # '"'"'\nexport PS1\n' > /etc/profile

net_up() {
  # No IPv6 at all: the card sends nothing but ARP and IPv4.
  echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
  echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
  load $TRANSPORT failover net_failover virtio_net
  IF=
  for n in $(slot_dir 2)/virtio*/net/*; do [ -e "$n" ] && IF=${n##*/}; done
  [ -n "$IF" ] || fail "no network interface on $BUS slot 2 ($(slot_dir 2))"
  ifconfig lo 127.0.0.1 up
  ifconfig $IF $IP netmask $MASK up || fail "ifconfig $IF $IP"
  route add default gw $GW || fail "route add default gw $GW"
  say "net: $IF (slot 2) up $IP netmask $MASK gateway $GW"
}

# sshd ends each log line with "\r\n"; the carriers drop the "\r".
CR=$(printf '\r')

# The device node of the virtio-serial port named $1, made from sysfs if devtmpfs has
# none. QEMU sends the names after the driver starts, so wait for them (10 s at most).
port_named() {
  i=0
  while [ $i -lt 100 ]; do
    for p in /sys/class/virtio-ports/*; do
      [ -e "$p/name" ] || continue
      [ "$(cat $p/name)" = "$1" ] || continue
      d=/dev/${p##*/}
      [ -c $d ] || mknod $d c $(sed 's/:/ /' $p/dev)
      echo $d; return 0
    done
    sleep 0.1; i=$((i + 1))
  done
  return 1
}

# In the serial mode, a session that has not ended 30 s after sshd started (a passing
# one ends within 15 s) is described on the console every 15 s: the virtio interrupts
# taken, each port's counters as the driver keeps them (debugfs), and every process's
# state, kernel wait channel, kernel stack and open files. It reads and writes no
# virtio-serial port, so it cannot wake one that stalled.
watchdog() {
  mkdir -p /sys/kernel/debug
  mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
  sleep 30
  while :; do
    say "watchdog: sshd still runs at uptime $(cut -d ' ' -f 1 /proc/uptime) s"
    grep -i -e virtio -e plic /proc/interrupts | sed 's/^/testbench-guest: watchdog: irq /'
    for f in /sys/kernel/debug/virtio-ports/*; do
      [ -e "$f" ] && sed "s|^|testbench-guest: watchdog: ${f##*/} |" "$f"
    done
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      # Kernel threads (kthreadd, 2, and its children) are left out; zombies are not.
      pp=$(sed -n 's/^PPid:\t//p' $d/status 2>/dev/null)
      [ "$p" = 2 ] || [ "$pp" = 2 ] && continue
      c=$(cat $d/comm 2>/dev/null) || continue
      say "watchdog: pid $p ($c) $(grep -e '^State' -e '^PPid' $d/status | tr '\t\n' '  ') wchan $(cat $d/wchan 2>/dev/null)"
      say "watchdog:     $(grep -e '^Sig' -e '^ShdPnd' $d/status | tr '\t\n' '  ')"
      say "watchdog:     $(tr '\n' ' ' < $d/io 2>/dev/null) syscall $(cat $d/syscall 2>/dev/null)"
      sed 's/^/testbench-guest: watchdog:     /' $d/stack 2>/dev/null
      # In ppoll (riscv64's system call 73): the pollfd array it waits on (fd, events,
      # revents), read from its memory.
      set -- $(cat $d/syscall 2>/dev/null)
      if [ "$1" = 73 ] && [ $(($3)) -le 16 ]; then
        say "watchdog:     pollfds: $(dd if=$d/mem bs=4 skip=$(($2 / 4)) count=$(($3 * 2)) 2>/dev/null | od -A n -t d4 | tr -s ' \n' '  ')"
      fi
      for fd in $d/fd/*; do
        [ -e "$fd" ] || [ -L "$fd" ] || continue
        say "watchdog:     fd ${fd##*/} -> $(readlink $fd) $(grep -e '^flags' -e '^pos' $d/fdinfo/${fd##*/} 2>/dev/null | tr '\t\n' '  ')"
      done
    done
    sleep 15
  done
}

# The appended archive's files and the configuration, checked once the mode's devices
# are up (in the serial mode a failure then reaches the log port too).
prepare() {
  # The appended archive's files, with the owners and modes sshd insists on
  # (StrictModes: nothing on the way to authorized_keys writable by another user; the
  # host key readable by root alone). An archive written on a host may carry its
  # user's uid and any mode.
  HK=/etc/ssh/ssh_host_ed25519_key AK=/root/.ssh/authorized_keys
  [ -s $HK ] || fail "no host key $HK: the archive appended to the initramfs must bring it"
  [ -s $AK ] || fail "no $AK: the archive appended to the initramfs must bring it"
  chown 0:0 /root /root/.ssh $AK /etc/ssh $HK
  chmod 755 /root /etc/ssh
  chmod 700 /root/.ssh
  chmod 600 $AK $HK
  say "host key $HK, $(grep -c . $AK) authorized key line(s) in $AK"

  if [ -s /etc/ssh/sshd_config ]; then
    chown 0:0 /etc/ssh/sshd_config; chmod 644 /etc/ssh/sshd_config
    say "sshd_config from the appended archive"
  else
    # Root alone, by key alone, with a shell or a command and nothing else. Subsystem is
    # left out, so no subsystem (sftp) exists. PerSourcePenalties no: since OpenSSH 9.8
    # sshd counts penalty seconds against a source address for failed logins and
    # connections closed before authentication (a refused host key), and refuses the
    # address once they reach 15 s; in the net mode every session comes from QEMU's
    # gateway (10.0.2.2), so a few refused logins in a case would refuse the next,
    # legitimate session. PrintLastLog no: a session's output is the shell's own.
    cat > /etc/ssh/sshd_config <<'EOF'
Port 22
AddressFamily inet
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
AllowUsers root
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
GSSAPIAuthentication no
UsePAM no
StrictModes yes
LogLevel VERBOSE
PerSourcePenalties no
X11Forwarding no
AllowAgentForwarding no
AllowTcpForwarding no
AllowStreamLocalForwarding no
PermitTunnel no
PermitUserEnvironment no
PermitUserRC no
PrintMotd no
PrintLastLog no
UseDNS no
PidFile none
EOF
    chmod 644 /etc/ssh/sshd_config
  fi
  # OpenSSH's own version line (sshd -V writes it to stderr), so that a log can show
  # which server answered.
  VERSION=$(/usr/sbin/sshd -V 2>&1) || fail "sshd -V: $VERSION"
  say "sshd version $VERSION"
}

case "$MODE" in
net)
  prepare
  net_up
  # sshd -D: the foreground; -e: its log (and sshd-session's, which inherits its
  # stderr) to stderr, carried whole, a line at a time, onto the console.
  ( /usr/sbin/sshd -D -e 2>&1 | while IFS= read -r l; do echo "sshd: ${l%$CR}"; done ) &
  i=0
  until grep -q '^ *[0-9]*: 00000000:0016 00000000:0000 0A ' /proc/net/tcp; do
    i=$((i + 1)); [ $i -gt 300 ] && fail "sshd is not listening on port 22 after 30 s"
    sleep 0.1
  done
  say "sshd listening on 22 (uptime $(cut -d ' ' -f 1 /proc/uptime) s)"
  # Serve until the case ends: the bench kills QEMU.
  wait
  fail "sshd exited"
  ;;
serial)
  load $TRANSPORT
  LOGDEV=$(port_named log) || fail "no virtio-serial port named log"
  SSHDEV=$(port_named ssh) || fail "no virtio-serial port named ssh"
  SSHOUT=$(port_named ssh-out) || fail "no virtio-serial port named ssh-out"
  say "serial: port ssh $SSHDEV, port ssh-out $SSHOUT, port log $LOGDEV"
  prepare
  # Every sshd process opens its log (-E) anew, and a port takes one open at a time:
  # they all write to this FIFO, and one reader carries it to the log port, a line per
  # write (busybox's echo writes its whole line at once). A FIFO write of up to 4 KiB
  # is never mixed with another's, and sshd writes each line at once. The reader holds
  # the FIFO open for writing too, so it never sees an end of file between sshd's
  # processes; /init ends it with the END line once sshd has exited.
  END=testbench-guest-log-end-$$
  mkfifo /tmp/sshd-log
  ( exec 4<>/tmp/sshd-log
    while IFS= read -r l <&4; do
      [ "$l" = "$END" ] && break
      echo "${l%$CR}"
    done > $LOGDEV ) &
  CARRIER=$!
  echo "testbench-guest: sshd version $VERSION" > /tmp/sshd-log
  say "sshd -i on $SSHDEV and $SSHOUT (uptime $(cut -d ' ' -f 1 /proc/uptime) s)"
  watchdog &
  WATCHDOG=$!
  # sshd's stdin the port ssh, its stdout the port ssh-out: one port each way, each
  # polled through one descriptor. One port both ways, polled through stdin and stdout,
  # loses a wake-up in Linux's virtio console driver (crates/testbench/src/loopback.rs).
  /usr/sbin/sshd -i -E /tmp/sshd-log <$SSHDEV >$SSHOUT
  say "sshd exited with status $? (uptime $(cut -d ' ' -f 1 /proc/uptime) s)"
  kill $WATCHDOG 2>/dev/null
  echo "$END" > /tmp/sshd-log
  wait $CARRIER
  poweroff -f; sleep 10
  ;;
*)
  fail "tb.sshd=${MODE} on the kernel command line: net or serial"
  ;;
esac
