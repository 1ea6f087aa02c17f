#!/bin/bash
# Builds (or removes) a star of Linux network namespaces for multi-host tests:
# one root namespace and N worker namespaces, each worker joined to the root
# by its own veth pair, optionally rate-limited with tc tbf on both ends. The
# root namespace forwards between the workers, as a switch would: each
# namespace's link carries all of its traffic, to the root and to the other
# workers (a tensor-parallel group's mesh). (Delay is added by tessera-relay:
# this kernel has no netem qdisc.)
#
#   netns_cluster.sh up   NAME N SUBNET [RATE_MBIT]   # NAME-r, NAME-w1..wN; 10.SUBNET.i.1 <-> 10.SUBNET.i.2
#   netns_cluster.sh down NAME N
#
# Needs root. Touches only the namespaces and interfaces it creates.
set -euo pipefail
action=$1 name=$2 n=$3
root="$name-r"
if [ "$action" = down ]; then
  for i in $(seq 1 "$n"); do ip netns del "$name-w$i" 2>/dev/null || true; done
  ip netns del "$root" 2>/dev/null || true
  exit 0
fi
subnet=$4 rate=${5:-0}
ip netns add "$root"
ip -n "$root" link set lo up
ip netns exec "$root" sysctl -qw net.ipv4.ip_forward=1
for i in $(seq 1 "$n"); do
  ns="$name-w$i"
  # Interface names are at most 15 characters: keep them short and unique.
  a="${name:0:8}r$i" b="${name:0:8}w$i"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "$a" type veth peer name "$b"
  ip link set "$a" netns "$root"
  ip link set "$b" netns "$ns"
  ip -n "$root" addr add "10.$subnet.$i.1/24" dev "$a"
  ip -n "$ns" addr add "10.$subnet.$i.2/24" dev "$b"
  ip -n "$root" link set "$a" up
  ip -n "$ns" link set "$b" up
  ip -n "$ns" route add default via "10.$subnet.$i.1"
  if [ "$rate" != 0 ]; then
    # Burst of a few ms at the rate; queue up to 50 ms before dropping.
    # TESSERA_NETNS_BURST shrinks it: 256 KB pass at once after an idle
    # moment, which hides a message of that size on a slow link.
    burst=${TESSERA_NETNS_BURST:-256kb}
    ip netns exec "$root" tc qdisc add dev "$a" root tbf rate "${rate}mbit" burst "$burst" latency 50ms
    ip netns exec "$ns" tc qdisc add dev "$b" root tbf rate "${rate}mbit" burst "$burst" latency 50ms
  fi
done
