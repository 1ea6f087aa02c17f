#!/bin/bash
# Builds (or removes) one Ethernet segment of Linux network namespaces for
# tests of what crosses a LAN (keyed discovery's broadcast and multicast):
# a switch namespace holding a bridge, and N host namespaces each joined to
# it by a veth pair. Hosts get 10.SUBNET.0.i/24 and their IPv6 link-local
# address (DAD off, so it is usable at once); the bridge floods multicast
# (no snooping), as a small switch does.
#
#   netns_lan.sh up   NAME N SUBNET   # NAME-s (switch), NAME-h1..hN
#   netns_lan.sh cut  NAME I          # unplugs host I (its veth pair deleted): no FIN, no RST
#   netns_lan.sh down NAME N
#
# Needs root. Touches only the namespaces and interfaces it creates.
set -euo pipefail
action=$1 name=$2
switch="$name-s"
if [ "$action" = down ]; then
  # Whatever still runs in a host (a test that failed half-way) goes with it.
  for i in $(seq 1 "$3"); do
    ip netns pids "$name-h$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$name-h$i" 2>/dev/null || true
  done
  ip netns del "$switch" 2>/dev/null || true
  exit 0
fi
if [ "$action" = cut ]; then
  ip -n "$switch" link del "${name:0:8}p$3"
  exit 0
fi
n=$3 subnet=$4
ip netns add "$switch"
ip -n "$switch" link set lo up
ip -n "$switch" link add br0 type bridge mcast_snooping 0
ip -n "$switch" link set br0 up
for i in $(seq 1 "$n"); do
  ns="$name-h$i"
  # Interface names are at most 15 characters: keep them short and unique.
  port="${name:0:8}p$i" host="${name:0:8}h$i"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0 \
    net.ipv6.conf.default.disable_ipv6=0 net.ipv6.conf.all.disable_ipv6=0 2>/dev/null || true
  ip link add "$port" type veth peer name "$host"
  ip link set "$port" netns "$switch"
  ip link set "$host" netns "$ns"
  ip -n "$switch" link set "$port" master br0
  ip -n "$switch" link set "$port" up
  ip -n "$ns" addr add "10.$subnet.0.$i/24" dev "$host"
  ip -n "$ns" link set "$host" up
done
