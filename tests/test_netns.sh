#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Two ranks in two network namespaces joined by a veth pair, so the TCP
# transport crosses a real (virtual) link and not loopback: rank 0 in one
# namespace, rank 1 in the other, XP_ADDR at rank 0's veth address and
# XP_SOCKET_IFNAME naming each side's veth. Both must ping-pong every size
# from 0 to 4 MiB intact (netns_pingpong prints "ok"), and the bytes must
# show on the veth counters. Then a rank whose XP_SOCKET_IFNAME names no
# interface: it fails at once naming it, and rank 0 fails at its timeout.
#
# The namespaces and the link exist only for this run (names carry the PID,
# addresses come from 10.200.X.0/24 inside the namespaces only) and are
# removed on every exit path. Needs root and `ip netns`.
#
# usage: test_netns.sh NETNS_PINGPONG      exits 0 pass, 1 fail, 77 skip
set -uo pipefail
if (($# != 1)) || [[ ! -x $1 ]]; then
	echo "usage: $0 NETNS_PINGPONG (an executable)" >&2
	exit 1
fi
prog=$(realpath "$1")

if ((EUID != 0)); then
	echo "SKIP: network namespaces need root"
	exit 77
fi
if ! command -v ip >/dev/null; then
	echo "SKIP: no ip command (iproute2)"
	exit 77
fi

nsa=xpA$$
nsb=xpB$$
va=xva$$
vb=xvb$$
net=10.200.$(($$ % 250 + 1))
addr_a=$net.1
addr_b=$net.2
port=29500
tmp=$(mktemp -d)
pids=()
made=()

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local p ns
	for p in "${pids[@]}"; do # timeout and the rank it runs
		pkill -KILL -P "$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	# Deleting a namespace also deletes the veth end inside it (and so
	# its peer).
	for ns in "${made[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
# Killed (meson's timeout sends SIGTERM): still clean up.
trap 'exit 1' INT TERM HUP

fail() {
	echo "FAIL: $*" >&2
	local f
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[[ -s $f ]] && { echo "--- $(basename "$f")" >&2; cat "$f" >&2; }
	done
	exit 1
}

for ns in "$nsa" "$nsb"; do
	if ! ip netns add "$ns" 2>"$tmp/netns.err"; then
		echo "SKIP: ip netns add $ns failed: $(cat "$tmp/netns.err")"
		exit 77
	fi
	made+=("$ns")
done
if ! ip link add "$va" netns "$nsa" type veth peer name "$vb" netns "$nsb" 2>"$tmp/veth.err"; then
	echo "SKIP: cannot create a veth pair: $(cat "$tmp/veth.err")"
	exit 77
fi
ip -n "$nsa" addr add "$addr_a/24" dev "$va" || fail "address on $va"
ip -n "$nsb" addr add "$addr_b/24" dev "$vb" || fail "address on $vb"
for ns in "$nsa" "$nsb"; do
	ip -n "$ns" link set lo up || fail "lo up in $ns"
done
ip -n "$nsa" link set "$va" up || fail "$va up"
ip -n "$nsb" link set "$vb" up || fail "$vb up"

key=netns-$$-$RANDOM$RANDOM

# Starts rank $1 in namespace $2 with XP_SOCKET_IFNAME=$3 and XP_TIMEOUT_MS=$4,
# output in $tmp/$5.{out,err}. Every rank dies within 60 s whatever happens.
start_rank() {
	# timeout's child is the rank itself (ip and env exec it).
	timeout -s KILL 60 ip netns exec "$2" env XP_RANK="$1" XP_SIZE=2 \
		XP_ADDR="$addr_a:$port" XP_JOB_KEY="$key" XP_SOCKET_IFNAME="$3" XP_TRANSPORTS=tcp \
		XP_TIMEOUT_MS="$4" "$prog" >"$tmp/$5.out" 2>"$tmp/$5.err" &
	pids+=($!)
}

rx_bytes() { # namespace, interface
	ip netns exec "$1" cat "/sys/class/net/$2/statistics/rx_bytes"
}

# --- the ping-pong across the link
rx_b0=$(rx_bytes "$nsb" "$vb") || fail "no counters for $vb"
rx_a0=$(rx_bytes "$nsa" "$va") || fail "no counters for $va"
start_rank 0 "$nsa" "$va" 20000 r0
start_rank 1 "$nsb" "$vb" 20000 r1
wait "${pids[0]}"
rc0=$?
wait "${pids[1]}"
rc1=$?
pids=()
if ((rc0 == 77 && rc1 == 77)); then
	echo "SKIP: $(head -n 1 "$tmp/r0.out")"
	exit 77
fi
((rc0 == 0 && rc1 == 0)) || fail "ping-pong across namespaces: rank 0 exited $rc0, rank 1 $rc1"
grep -q '^ok rank 0 ' "$tmp/r0.out" || fail "rank 0 did not print ok"
grep -q '^ok rank 1 ' "$tmp/r1.out" || fail "rank 1 did not print ok"
# Each side received at least the payload the other sent: it went over the veth.
bytes=$(awk '{print $5}' "$tmp/r0.out")
rx_b=$(($(rx_bytes "$nsb" "$vb") - rx_b0))
rx_a=$(($(rx_bytes "$nsa" "$va") - rx_a0))
((rx_b >= bytes && rx_a >= bytes)) ||
	fail "veth counters: $vb received $rx_b, $va received $rx_a bytes; $bytes sent each way"
echo "ok: ping-pong across namespaces, $bytes bytes each way ($va rx $rx_a, $vb rx $rx_b)"

# --- XP_SOCKET_IFNAME naming no interface
start_rank 0 "$nsa" "$va" 2000 bad0
start_rank 1 "$nsb" nosuch$$ 2000 bad1
t0=$(date +%s%N)
wait "${pids[0]}"
rc0=$?
wait "${pids[1]}"
rc1=$?
pids=()
ms=$((($(date +%s%N) - t0) / 1000000))
((rc0 != 0 && rc1 != 0)) || fail "with a wrong XP_SOCKET_IFNAME: rank 0 exited $rc0, rank 1 $rc1"
((rc0 != 137 && rc1 != 137)) || fail "a rank hung until killed (exit 137)"
grep -q "nosuch$$" "$tmp/bad1.err" || fail "rank 1 did not name the missing interface nosuch$$"
grep -q "rank 1" "$tmp/bad0.err" || fail "rank 0 did not name the missing rank 1"
((ms < 10000)) || fail "the failing job took $ms ms"
echo "ok: a wrong XP_SOCKET_IFNAME fails in $ms ms"
exit 0
