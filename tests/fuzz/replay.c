/* SPDX-License-Identifier: MIT */
/*
 * Runs a fuzz target (LLVMFuzzerTestOneInput, linked in beside this file)
 * the way ordinary builds can: over every file named on the command line
 * and every file in each directory named there (its corpus), over each
 * truncation of each file and each single-bit flip of its first bytes, and
 * over the target's own generated cases (replay_generated(), if the target
 * has any). A target reports a finding by aborting, so this exits 0 when
 * nothing did: gcc builds check what the fuzzer found without libFuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replay.h"

/* Bit flips cover this many leading bytes of each file: the headers. */
#define FLIP_BYTES 256u
#define FILE_MAX (1u << 20)

__attribute__((weak)) long replay_generated(void)
{
	return 0;
}

static long cases;

/* Runs @data exactly as given, in its own allocation of @size bytes, so
 * a read past the end is one past a heap block (ASan sees it). */
static void run(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	if (copy == NULL)
		abort();
	if (size != 0)
		memcpy(copy, data, size);
	LLVMFuzzerTestOneInput(copy, size);
	free(copy);
	cases++;
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		perror(path);
		return 1;
	}
	uint8_t *buf = malloc(FILE_MAX);
	size_t n = buf != NULL ? fread(buf, 1, FILE_MAX, f) : 0;
	int err = buf == NULL || ferror(f);
	fclose(f);
	if (err) {
		fprintf(stderr, "%s: cannot read\n", path);
		free(buf);
		return 1;
	}
	for (size_t len = 0; len <= n; len++)
		run(buf, len);
	size_t flip = n < FLIP_BYTES ? n : FLIP_BYTES;
	for (size_t bit = 0; bit < flip * 8; bit++) {
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		run(buf, n);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	free(buf);
	return 0;
}

/* A corpus directory: each regular file in it (libFuzzer's layout). */
static int run_dir(const char *path, int *files)
{
	DIR *d = opendir(path);
	if (d == NULL) {
		perror(path);
		return 1;
	}
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		struct stat st;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = run_file(p);
			(*files)++;
		}
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	int files = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		int rc = S_ISDIR(st.st_mode) ? run_dir(argv[i], &files) : run_file(argv[i]);
		if (rc != 0)
			return 1;
		if (!S_ISDIR(st.st_mode))
			files++;
	}
	if (files == 0) {
		fprintf(stderr, "no corpus files: name the corpus directory\n");
		return 1;
	}
	long generated = replay_generated();
	printf("replayed %d corpus files (%ld cases with their truncations and bit flips) "
	       "and %ld generated cases\n",
	       files, cases, generated);
	return 0;
}
