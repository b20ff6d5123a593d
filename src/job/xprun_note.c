/* SPDX-License-Identifier: MIT */
/*
 * Telling xprun that this process called xp_init and xp_finalize, so that
 * it can name a rank that exits without finalizing (issue 24, 4.4). Such a
 * rank may leave sends it completed unsent (a completed send only means
 * its buffer may be reused: xport.h), and its peers then fail; without
 * this, xprun named the peer that failed rather than the rank that left.
 * Open MPI's mpirun does the same ("exited without calling finalize").
 *
 * XPRUN_STATUS_FD=FD:PID: xprun's end of a datagram socket pair, meant for
 * process PID only (a program the rank starts inherits the variable, not
 * the socket: the first note makes it close-on-exec, and a forked child
 * has another pid). One byte per call, 'I' or 'F'; never blocks, never
 * raises SIGPIPE, and any failure is ignored: the note is a diagnostic.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int note_fd = -1;

static void find_fd(void)
{
	const char *v = getenv("XPRUN_STATUS_FD");
	int fd;
	long pid;
	if (v == NULL || sscanf(v, "%d:%ld", &fd, &pid) != 2 || fd < 0 || pid != (long)getpid())
		return;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return; /* not open here */
	note_fd = fd;
}

void xpi_xprun_note(char what)
{
	pthread_once(&once, find_fd);
	if (note_fd >= 0)
		(void)!send(note_fd, &what, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}
