#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A DPDK port and a kernel UDP socket on the two ends of a veth pair, each
# in a network namespace of its own that this script creates and removes:
# the DPDK side (net_af_packet on its veth, no kernel address) resolves the
# kernel's address by ARP and answers the kernel's ARP, and the two
# exchange datagrams with xport's header both ways (test_dpdk_port echo and
# kernel). The kernel checks our IPv4 and UDP checksums: any it refuses
# show in its Udp InCsumErrors, which must stay 0.
#
#   tests/dpdk/netns.sh TEST_DPDK_PORT [COUNT]
#
# Exit: 0 passed, 1 failed, 77 skipped (not root, no ip or ethtool, or the
# kernel refuses namespaces or veth pairs), with the reason.
set -u
bin=$1
count=${2:-200}
mode=${3:-veth}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
for t in ip ethtool; do
	command -v $t >/dev/null || skip "$t not found (Debian: apt-get install iproute2 ethtool)"
done
a=xpdA$$ b=xpdB$$ va=xpda$$ vb=xpdb$$
if [ "$mode" = tap ]; then
	# net_tap: DPDK's port is the user side of a kernel tap interface, in
	# one namespace with the kernel socket. Tap computes and verifies
	# checksums as a device does (offloads), so this checks the offload
	# path: our frames leave with the checksums left to the device
	# (ECHO_WANT_OFFLOAD makes the DPDK side prove it took that path), and
	# the kernel still counts none bad.
	trap 'ip netns del "$a" 2>/dev/null; rm -rf "/var/run/dpdk/xptest-tap-$$"' EXIT
	ip netns add "$a" 2>/dev/null || skip "cannot create a network namespace"
	ip netns exec "$a" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec "$a" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	ip -n "$a" link set lo up
	# The kernel side binds to any address: the tap and its address come
	# with the DPDK side.
	exec 3< <(ip netns exec "$a" "$bin" kernel 0.0.0.0 5000 10.79.1.1 4791 "$count")
	kpid=$!
	read -r -t 20 line <&3
	[ "${line:-}" = ready ] || { echo "the kernel side did not start"; exit 1; }
	eal="-l 0 --no-pci --no-huge -m 64 --file-prefix=xptest-tap-$$ --vdev=net_tap0,iface=xpt$$ --no-telemetry --log-level=lib.eal:error"
	ip netns exec "$a" env ECHO_WANT_OFFLOAD=1 "$bin" echo "$eal" 10.79.1.1 4791 10.79.1.2 5000 "$count" &
	dpid=$!
	for _ in $(seq 200); do ip -n "$a" link show "xpt$$" >/dev/null 2>&1 && break; sleep 0.05; done
	# Checksums finished in software before the kernel can send anything
	# (it needs the address for that): a frame left for an offload tap
	# never does would fail our check.
	ip netns exec "$a" ethtool -K "xpt$$" tx off >/dev/null 2>&1
	# DPDK configures the interface while it starts (address, flags): the
	# kernel's side is set again until it holds.
	# The DPDK side may finish its whole exchange (which needed the
	# address) and exit, taking the tap with it, before this loop sees
	# the address: then its exit status below is the verdict.
	for _ in $(seq 40); do
		ip -n "$a" addr replace 10.79.1.2/24 dev "xpt$$" 2>/dev/null &&
			ip -n "$a" link set "xpt$$" up 2>/dev/null &&
			ip -n "$a" addr show dev "xpt$$" | grep -q 10.79.1.2 && break
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.05
	done
	# A tap that is gone went with the DPDK side's exit (kill -0 still
	# succeeds on it until it is reaped): its exit status is the verdict.
	if kill -0 "$dpid" 2>/dev/null && addrs=$(ip -n "$a" addr show dev "xpt$$" 2>/dev/null) &&
		! grep -q 10.79.1.2 <<<"$addrs"; then
		echo "could not give the tap interface its address"
		exit 1
	fi
	wait "$dpid"
	rc=$?
	cat <&3
	wait "$kpid"
	krc=$?
	errors=$(ip netns exec "$a" awk '$1 == "Udp:" { if (!n++) { for (i = 2; i <= NF; i++) h[i] = $i }
		else for (i = 2; i <= NF; i++) if (h[i] == "InCsumErrors") print $i }' /proc/net/snmp)
	echo "kernel side: exit $krc, Udp InCsumErrors ${errors:-?}"
	[ "$rc" = 0 ] && [ "$krc" = 0 ] && [ "${errors:-x}" = 0 ]
	exit
fi
cleanup() {
	ip netns del "$a" 2>/dev/null
	ip netns del "$b" 2>/dev/null
	rm -rf "/var/run/dpdk/xptest-ns-$$" # if the DPDK side failed before its cleanup
}
trap cleanup EXIT
ip netns add "$a" 2>/dev/null && ip netns add "$b" 2>/dev/null ||
	skip "cannot create network namespaces"
ip link add "$va" type veth peer name "$vb" 2>/dev/null || skip "cannot create a veth pair"
ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" || exit 1
for ns in "$a" "$b"; do # no IPv6 chatter (router solicitations) on the wire
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	ip -n "$ns" link set lo up
done
ip -n "$a" link set "$va" up
ip -n "$b" addr add 10.79.0.2/24 dev "$vb"
ip -n "$b" link set "$vb" up
# A kernel socket sending over veth leaves the UDP checksum for an offload
# that af_packet never does (../shared/lab/DPDK.md): finish it in software.
ip netns exec "$b" ethtool -K "$vb" tx off >/dev/null || exit 1

# The kernel side first; it says "ready" once bound.
exec 3< <(ip netns exec "$b" "$bin" kernel 10.79.0.2 5000 10.79.0.1 4791 "$count")
kpid=$!
read -r -t 20 line <&3
[ "${line:-}" = ready ] || { echo "the kernel side did not start"; exit 1; }
eal="-l 0 --no-pci --no-huge -m 64 --file-prefix=xptest-ns-$$ --vdev=net_af_packet0,iface=$va --no-telemetry --log-level=lib.eal:error"
echo "DPDK side: $bin echo \"$eal\" 10.79.0.1 4791 10.79.0.2 5000 $count"
ip netns exec "$a" "$bin" echo "$eal" 10.79.0.1 4791 10.79.0.2 5000 "$count"
rc=$?
cat <&3
wait "$kpid"
krc=$?
errors=$(ip netns exec "$b" awk '$1 == "Udp:" { if (!n++) { for (i = 2; i <= NF; i++) h[i] = $i }
	else for (i = 2; i <= NF; i++) if (h[i] == "InCsumErrors") print $i }' /proc/net/snmp)
echo "kernel side: exit $krc, Udp InCsumErrors ${errors:-?}"
[ "$rc" = 0 ] && [ "$krc" = 0 ] && [ "${errors:-x}" = 0 ]
