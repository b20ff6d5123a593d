/* SPDX-License-Identifier: MIT */
/*
 * Who listens on a TCP port of this host, for the message of a rank 0
 * that cannot bind its rendezvous port: read from /proc/net/tcp and tcp6
 * (the listening socket's inode) and /proc/<pid>/fd (which process holds
 * that socket). Best effort: processes of other users are found only as
 * root, and other network namespaces not at all.
 */
#ifndef XPI_PORT_OWNER_H
#define XPI_PORT_OWNER_H

#include <stddef.h>

/*
 * Writes into @out (@n bytes) who listens on TCP port @port here:
 * "pid 1234 (python3)", or "a process this user cannot see" when the
 * socket is there but its process is not found, or "" when no socket in
 * this namespace listens on it. Never fails; reads /proc only.
 */
void xpi_port_owner(int port, char *out, size_t n);

#endif
