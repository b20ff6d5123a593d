/* SPDX-License-Identifier: MIT */
/* Who listens on a TCP port; see port_owner.h. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port_owner.h"

#define TCP_LISTEN 0x0A /* the state column of /proc/net/tcp (include/net/tcp_states.h) */

/* The inode of a socket listening on @port in @table (/proc/net/tcp or
 * tcp6), or 0. Lines: "sl local_address rem_address st ... inode ...",
 * the address as HEX:HEXPORT. */
static unsigned long listening_inode(const char *table, int port)
{
	FILE *f = fopen(table, "re");
	if (f == NULL)
		return 0;
	char line[512];
	unsigned long found = 0;
	if (fgets(line, sizeof(line), f) == NULL) { /* the header */
		fclose(f);
		return 0;
	}
	while (found == 0 && fgets(line, sizeof(line), f) != NULL) {
		char local[80];
		unsigned st, lport;
		unsigned long inode;
		/* sl: local rem st tx:rx tr:when retrnsmt uid timeout inode */
		if (sscanf(line, "%*s %79s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &inode) !=
		    3)
			continue;
		const char *colon = strrchr(local, ':');
		if (colon == NULL || sscanf(colon + 1, "%x", &lport) != 1)
			continue;
		if (st == TCP_LISTEN && (int)lport == port && inode != 0)
			found = inode;
	}
	fclose(f);
	return found;
}

/* The process holding socket @inode: "pid N (comm)" into @out, or false. */
static int find_holder(unsigned long inode, char *out, size_t n)
{
	char want[48];
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	DIR *proc = opendir("/proc");
	if (proc == NULL)
		return 0;
	struct dirent *p;
	int found = 0;
	while (!found && (p = readdir(proc)) != NULL) {
		if (p->d_name[0] < '1' || p->d_name[0] > '9')
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
		DIR *fds = opendir(path);
		if (fds == NULL)
			continue; /* gone, or another user's */
		struct dirent *d;
		while (!found && (d = readdir(fds)) != NULL) {
			char link[600], target[64];
			snprintf(link, sizeof(link), "%s/%s", path, d->d_name);
			ssize_t k = readlink(link, target, sizeof(target) - 1);
			if (k <= 0)
				continue;
			target[k] = '\0';
			found = strcmp(target, want) == 0;
		}
		closedir(fds);
		if (found) {
			char comm[64] = "?";
			snprintf(path, sizeof(path), "/proc/%s/comm", p->d_name);
			FILE *f = fopen(path, "re");
			if (f != NULL) {
				if (fgets(comm, sizeof(comm), f) != NULL)
					comm[strcspn(comm, "\n")] = '\0';
				fclose(f);
			}
			snprintf(out, n, "pid %s (%s)", p->d_name, comm);
		}
	}
	closedir(proc);
	return found;
}

void xpi_port_owner(int port, char *out, size_t n)
{
	if (n == 0)
		return;
	out[0] = '\0';
	unsigned long inode = listening_inode("/proc/net/tcp", port);
	if (inode == 0)
		inode = listening_inode("/proc/net/tcp6", port);
	if (inode == 0)
		return;
	if (!find_holder(inode, out, n))
		snprintf(out, n, "a process this user cannot see");
}
