/* SPDX-License-Identifier: MIT */
/*
 * The logger the harness gives the plugin's init, as NCCL gives its own:
 * it keeps every line (level, file, line, text) so that the checks can
 * ask whether a failure was explained, and where in the plugin.
 */
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "harness.h"

#define MAX_LINES 512

static struct h_line lines[MAX_LINES];
static int nlines;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void h_logger(enum xnccl_log_level level, unsigned long flags, const char *file, int line,
	      const char *fmt, ...)
{
	struct h_line l = { .level = (int)level, .line = line };
	snprintf(l.file, sizeof(l.file), "%s", file != NULL ? file : "(null)");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l.text, sizeof(l.text), fmt, ap);
	va_end(ap);
	if (getenv("XPN_HARNESS_VERBOSE") != NULL)
		fprintf(stderr, "[%s] log %d %s:%d %s\n", h_who, l.level, l.file, l.line, l.text);
	pthread_mutex_lock(&lock);
	if (nlines < MAX_LINES)
		lines[nlines++] = l;
	pthread_mutex_unlock(&lock);
}

int h_log_count(void)
{
	pthread_mutex_lock(&lock);
	int n = nlines;
	pthread_mutex_unlock(&lock);
	return n;
}

static const struct h_line *find(int from, const char *sub, bool warnings)
{
	const struct h_line *found = NULL;
	pthread_mutex_lock(&lock);
	for (int i = from; i < nlines && found == NULL; i++)
		if ((!warnings || lines[i].level == XNCCL_LOG_WARN) &&
		    strstr(lines[i].text, sub) != NULL)
			found = &lines[i];
	pthread_mutex_unlock(&lock);
	return found;
}

const struct h_line *h_log_find(int from, const char *sub)
{
	return find(from, sub, true);
}

const struct h_line *h_log_find_any(int from, const char *sub)
{
	return find(from, sub, false);
}

void h_log_dump(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nlines; i++)
		fprintf(stderr, "[%s] log %d %s:%d %s\n", h_who, lines[i].level, lines[i].file,
			lines[i].line, lines[i].text);
	pthread_mutex_unlock(&lock);
}
