/* SPDX-License-Identifier: MIT */
/*
 * shell_words(): a command line as a shell would read it back, for the
 * programs that record how they were run (xprun's XPRUN_COMMAND,
 * xport-perf's run record). Header-only: the tools link nothing else.
 */
#ifndef XP_SHELL_WORDS_H
#define XP_SHELL_WORDS_H

#include <stdlib.h>
#include <string.h>

/* @argv joined by blanks: words of harmless characters as they are, others
 * in single quotes (a quote inside as '\''). Returns a malloc'd string
 * for the caller to free, or NULL without memory. */
static inline char *shell_words(int argc, char **argv)
{
	static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789_-+=/.,:@%";
	size_t cap = 1;
	for (int i = 0; i < argc; i++)
		cap += 4 * strlen(argv[i]) + 3;
	char *out = malloc(cap), *p = out;
	if (out == NULL)
		return NULL;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (i > 0)
			*p++ = ' ';
		if (*a != '\0' && a[strspn(a, plain)] == '\0') {
			p = stpcpy(p, a);
			continue;
		}
		*p++ = '\'';
		for (; *a; a++) {
			if (*a == '\'')
				p = stpcpy(p, "'\\''"); /* close, escaped quote, reopen */
			else
				*p++ = *a;
		}
		*p++ = '\'';
	}
	*p = '\0';
	return out;
}

#endif
