/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the Slurm host-list parser (src/job/launcher.c,
 * xpi_hostlist_first): any text must either give a first host that fits
 * the buffer and is made of host-name characters only, or be refused with
 * -EINVAL, a reason and an offset inside the text; never crash or read
 * past the text. The input is cut at its first NUL, as an environment
 * variable is. Built with clang -fsanitize=fuzzer when available;
 * replay.c runs the corpus in ordinary builds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "job/launcher.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *list = malloc(size + 1), out[64];
	const char *why = NULL;
	size_t at = (size_t)-1;
	if (list == NULL)
		abort();
	memcpy(list, data, size);
	list[size] = '\0';
	int rc = xpi_hostlist_first(list, out, sizeof(out), &why, &at);
	if (rc == 0) {
		size_t n = strlen(out);
		if (n == 0 || n >= sizeof(out))
			abort();
		if (strspn(out,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") !=
		    n)
			abort(); /* brackets or commas leaked into the host */
	} else if (rc != -EINVAL || why == NULL || at > strlen(list)) {
		abort();
	}
	free(list);
	return 0;
}
