/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"

static int level_from_env(void)
{
	static const char *const names[] = { "none", "error", "warn", "info", "debug" };
	const char *s = getenv("XP_LOG_LEVEL");
	if (s == NULL)
		return XPI_LOG_WARN;
	for (int i = 0; i < 5; i++)
		if (strcasecmp(s, names[i]) == 0)
			return i;
	return XPI_LOG_WARN;
}

bool xpi_log_enabled(int level)
{
	/* Read every time: cheap next to what is being logged, and tests can
	 * change the environment between contexts. */
	return level <= level_from_env();
}

bool xpi_debug_on(const char *subsystem)
{
	const char *s = getenv("XP_DEBUG");
	if (s == NULL || *s == '\0')
		return false;
	size_t n = strlen(subsystem);
	for (const char *p = s; *p != '\0';) {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if ((len == 3 && strncmp(p, "all", 3) == 0) ||
		    (len == n && strncmp(p, subsystem, n) == 0))
			return true;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return false;
}

void xpi_log(int level, const char *fmt, ...)
{
	static const char *const tags[] = { "", "ERROR", "WARN", "INFO", "DEBUG" };
	if (!xpi_log_enabled(level))
		return;
	char line[1024];
	int n = snprintf(line, sizeof(line), "xport[%d] %s: ", (int)getpid(), tags[level]);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line so lines of several threads never interleave. */
	size_t len = strlen(line);
	if (len < sizeof(line) - 1)
		line[len++] = '\n';
	(void)!write(STDERR_FILENO, line, len);
}
