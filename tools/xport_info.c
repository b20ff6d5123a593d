/* SPDX-License-Identifier: MIT */
/*
 * xport-info: what this build of xport is and can do here, as ucx_info -d
 * and fi_info tell theirs.
 *
 *   xport-info [--json] [--version] [--help]
 *
 * Prints the version; every transport the capability cards know, whether
 * this build has it and whether this host can run it (with the reason when
 * not: no /dev/shm, io_uring disabled, not built); huge pages; every
 * setting with its value, where the value came from (default or
 * environment; a program's own xp_config_t shows as "config" in its log at
 * XP_LOG_LEVEL=info) and what it accepts. Under a launcher (xprun, srun,
 * mpirun, torchrun) every rank joins the job and rank 0 prints, for every
 * pair of ranks, the transport of its messages, the rendezvous threshold
 * and the transport of rendezvous payloads: what xp_init chose.
 *
 * Exit status: 0; 1 if a setting in the environment is not accepted (it is
 * marked, and the job part is skipped) or the job cannot form; 2 for a
 * usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/engine.h"
#include "core/settings.h"
#include "job/backend.h"
#include "job/pmi2.h"
#include "job/pmix.h"
#include "select/card.h"

/* The project's version (meson.build); the header's XP_VERSION_* must
 * agree, which the static assertion below checks. */
#define VERSION_TEXT XPORT_VERSION_STRING
#define XPI_STR_(x) #x
#define XPI_STR(x) XPI_STR_(x)
#define HEADER_VERSION                                                                             \
	XPI_STR(XP_VERSION_MAJOR) "." XPI_STR(XP_VERSION_MINOR) "." XPI_STR(XP_VERSION_PATCH)
/* Routes are gathered for jobs up to this size; larger ones show rank 0's. */
#define ROUTE_MATRIX_MAX 64

static bool json;

static bool versions_agree(void)
{
	return strcmp(VERSION_TEXT, HEADER_VERSION) == 0;
}

/* ---------------------------------------------------------------------- */
/* Output: one value at a time, as text or as JSON                        */

static void json_string(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* "key": "value" with a comma before it unless it is the first. */
static void json_field(bool *first, const char *key, const char *value)
{
	printf("%s", *first ? "" : ", ");
	*first = false;
	json_string(key);
	printf(": ");
	json_string(value);
}

/* ---------------------------------------------------------------------- */
/* Transports                                                             */

struct tl_row {
	const char *name;
	bool built, usable;
	char note[200];
};

static const uint8_t card_types[] = { XPI_TL_SHM, XPI_TL_TCP, XPI_TL_RDMA, XPI_TL_DPDK };

static void transport_rows(struct tl_row *rows, size_t *n)
{
	*n = 0;
	rows[*n] = (struct tl_row){ .name = "inproc", .built = true, .usable = true };
	snprintf(rows[*n].note, sizeof(rows[*n].note),
		 "ranks as threads of one process (xp_local_run, xp_local_job_create)");
	(*n)++;
	for (size_t i = 0; i < sizeof(card_types); i++) {
		struct tl_row *r = &rows[(*n)++];
		memset(r, 0, sizeof(*r));
		r->name = xpi_tl_type_name(card_types[i]);
		const struct xpi_backend *b = xpi_backend_find(r->name, strlen(r->name));
		r->built = b != NULL;
		if (b == NULL)
			snprintf(r->note, sizeof(r->note), "not in this build");
		else
			r->usable = b->probe(r->note, sizeof(r->note)) == 0;
	}
}

static void print_transports(void)
{
	struct tl_row rows[8];
	size_t n;
	transport_rows(rows, &n);
	if (json) {
		printf("  \"transports\": [");
		for (size_t i = 0; i < n; i++) {
			printf("%s\n    {\"name\": ", i == 0 ? "" : ",");
			json_string(rows[i].name);
			printf(", \"built\": %s, \"usable\": %s, \"note\": ",
			       rows[i].built ? "true" : "false", rows[i].usable ? "true" : "false");
			json_string(rows[i].note);
			printf("}");
		}
		printf("\n  ],\n");
		return;
	}
	printf("\nTransports\n  %-8s %-6s %-7s %s\n", "name", "built", "usable", "note");
	for (size_t i = 0; i < n; i++)
		printf("  %-8s %-6s %-7s %s\n", rows[i].name, rows[i].built ? "yes" : "no",
		       !rows[i].built ? "-" :
		       rows[i].usable ? "yes" :
					"no",
		       rows[i].note);
}

/* ---------------------------------------------------------------------- */
/* Huge pages                                                             */

static void print_hugepages(const xp_config_t *cfg)
{
	long total = -1, free_pages = -1, size_kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		sscanf(line, "HugePages_Total: %ld", &total);
		sscanf(line, "HugePages_Free: %ld", &free_pages);
		sscanf(line, "Hugepagesize: %ld kB", &size_kb);
	}
	if (f != NULL)
		fclose(f);
	char note[256];
	const char *mode = cfg->hugepages == XP_HUGEPAGES_ON  ? "on" :
			   cfg->hugepages == XP_HUGEPAGES_OFF ? "off" :
								"auto";
	if (total < 0)
		snprintf(note, sizeof(note), "no huge page support in this kernel (/proc/meminfo)");
	else if (free_pages <= 0)
		snprintf(note, sizeof(note),
			 "none free (%ld reserved, vm.nr_hugepages): pools use ordinary pages%s",
			 total,
			 cfg->hugepages == XP_HUGEPAGES_ON ?
				 "; XP_HUGEPAGES=on makes xp_init fail" :
				 "");
	else
		snprintf(note, sizeof(note), "%ld of %ld free, %ld kB each: pools use them%s",
			 free_pages, total, size_kb,
			 cfg->hugepages == XP_HUGEPAGES_OFF ? " unless XP_HUGEPAGES=off (it is)" :
							      "");
	if (json) {
		printf("  \"hugepages\": {\"total\": %ld, \"free\": %ld, \"size_kb\": %ld, "
		       "\"mode\": ",
		       total, free_pages, size_kb);
		json_string(mode);
		printf(", \"note\": ");
		json_string(note);
		printf("},\n");
	} else {
		printf("\nHuge pages (XP_HUGEPAGES=%s)\n  %s\n", mode, note);
	}
}

/* ---------------------------------------------------------------------- */
/* Settings                                                               */

/* Prints every setting; returns how many in the environment are not
 * accepted. */
static int print_settings(xp_config_t *cfg)
{
	size_t n;
	const struct xpi_setting *table = xpi_settings(&n);
	int bad = 0;
	xpi_settings_from_env(cfg, NULL, NULL, 0);
	if (json)
		printf("  \"settings\": [");
	else
		printf("\nSettings (variable, xp_config_t field, value, origin)\n");
	for (size_t i = 0; i < n; i++) {
		const struct xpi_setting *s = &table[i];
		xp_config_t scratch = *cfg;
		char why[512] = "", value[1024], accepted[256];
		int got = xpi_setting_from_env(s, &scratch, why, sizeof(why));
		bad += got < 0;
		xpi_setting_format(s, cfg, value, sizeof(value));
		xpi_setting_accepted(s, accepted, sizeof(accepted));
		const char *origin = got < 0  ? "environment (not accepted)" :
				     got == 1 ? xpi_origin_name(XPI_ORIGIN_ENV) :
						xpi_origin_name(XPI_ORIGIN_DEFAULT);
		if (json) {
			bool first = true;
			printf("%s\n    {", i == 0 ? "" : ",");
			json_field(&first, "variable", s->var);
			json_field(&first, "field", s->field);
			json_field(&first, "value", value);
			json_field(&first, "origin", got < 0 ? "environment" : origin);
			json_field(&first, "accepted", accepted);
			json_field(&first, "meaning", s->meaning);
			if (got < 0)
				json_field(&first, "error", why);
			printf("}");
		} else {
			printf("  %-24s %-21s %-14s %s\n", s->var, s->field, value, origin);
			if (got < 0)
				printf("    error: %s\n", why);
		}
	}
	if (json)
		printf("\n  ],\n");
	return bad;
}

/* ---------------------------------------------------------------------- */
/* Routes under a launcher                                                */

struct route_cell {
	char small[16], bulk[16];
	uint64_t rndv_threshold;
};

static void fill_row(xp_context_t *ctx, struct route_cell *row)
{
	for (int p = 0; p < ctx->size; p++) {
		xp_route_t r;
		memset(&row[p], 0, sizeof(row[p]));
		if (xp_route_get(ctx, p, 0, &r) < 0)
			continue;
		snprintf(row[p].small, sizeof(row[p].small), "%s", r.transport);
		snprintf(row[p].bulk, sizeof(row[p].bulk), "%s",
			 ctx->tls[ctx->peers[p].tl_bulk].ops->name);
		row[p].rndv_threshold = r.rndv_threshold;
	}
}

static void print_cell(int from, int to, const struct route_cell *c, bool *first)
{
	char thr[32];
	xpi_format_size((size_t)c->rndv_threshold, thr, sizeof(thr));
	if (c->rndv_threshold == UINT64_MAX || c->rndv_threshold == SIZE_MAX)
		snprintf(thr, sizeof(thr), "never");
	if (json) {
		printf("%s\n      {\"from\": %d, \"to\": %d, \"messages\": ", *first ? "" : ",",
		       from, to);
		json_string(c->small);
		printf(", \"rndv_threshold\": %llu, \"payloads\": ",
		       (unsigned long long)c->rndv_threshold);
		json_string(c->bulk);
		printf("}");
	} else {
		printf("  rank %d -> rank %d: messages over %s, rendezvous from %s B, payloads over "
		       "%s\n",
		       from, to, c->small, thr, c->bulk);
	}
	*first = false;
}

/* Every rank joins; rank 0 prints. Returns 0 or the failure's code. */
static int job_part(bool *printed)
{
	xp_context_t *ctx;
	int rc = xp_init(NULL, &ctx);
	*printed = false;
	if (rc < 0) {
		fprintf(stderr, "xport-info: xp_init: %s: %s\n", xp_strerror(rc),
			xp_error_detail());
		return rc;
	}
	int n = xp_size(ctx), me = xp_rank(ctx);
	if (n == 1) {
		xp_finalize(ctx);
		return 0;
	}
	int rows = n <= ROUTE_MATRIX_MAX ? n : 1;
	struct route_cell *mine = calloc((size_t)n, sizeof(*mine));
	struct route_cell *all = calloc((size_t)n * (size_t)rows, sizeof(*all));
	if (mine == NULL || all == NULL) {
		free(mine);
		free(all);
		xp_finalize(ctx);
		return -ENOMEM;
	}
	fill_row(ctx, mine);
	if (rows == n)
		rc = xp_oob_allgather(ctx, mine, (size_t)n * sizeof(*mine), all);
	else
		memcpy(all, mine, (size_t)n * sizeof(*mine));
	if (rc == 0 && me == 0) {
		bool first = true;
		if (json)
			printf("  \"job\": {\"size\": %d, \"pmix_used\": %s, \"pmi2_used\": %s, "
			       "\"routes\": [",
			       n, xpi_pmix_used() ? "true" : "false",
			       xpi_pmi2_used() ? "true" : "false");
		else
			printf("\nJob of %d ranks (formed through PMIx: %s, Slurm's PMI-2: %s): "
			       "what serves each pair%s\n",
			       n, xpi_pmix_used() ? "yes" : "no", xpi_pmi2_used() ? "yes" : "no",
			       rows == n ? "" : " (rank 0's only: a large job)");
		for (int from = 0; from < rows; from++)
			for (int to = 0; to < n; to++)
				if (to != from)
					print_cell(from, to,
						   &all[(size_t)from * (size_t)n + (size_t)to],
						   &first);
		if (json)
			printf("\n  ]},\n");
		*printed = true;
	}
	free(mine);
	free(all);
	xp_finalize(ctx);
	return rc;
}

/* ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: xport-info [--json] [--version] [--help]\n"
		   "  Prints this build's version, the transports built and usable here (and\n"
		   "  why not), huge pages, every setting with its value and origin, and under\n"
		   "  a launcher (xprun -n N xport-info) what serves each pair of ranks.\n"
		   "  --json     one JSON object instead of the text\n"
		   "  --version  the version, and exit\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "jVh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'V':
			printf("xport-info (xport) %s\n", VERSION_TEXT);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "xport-info: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!versions_agree()) {
		fprintf(stderr, "xport-info: built as xport %s but xport.h says %s\n", VERSION_TEXT,
			HEADER_VERSION);
		return 1;
	}
	/* Only rank 0 of a job prints the host's part: the others would
	 * print the same lines again. */
	const char *launched_rank = getenv("XP_RANK");
	if (launched_rank == NULL)
		launched_rank = getenv("OMPI_COMM_WORLD_RANK");
	if (launched_rank == NULL)
		launched_rank = getenv("PMIX_RANK");
	if (launched_rank == NULL)
		launched_rank = getenv("PMI_RANK");
	bool quiet = launched_rank != NULL && strcmp(launched_rank, "0") != 0;
	xp_config_t cfg;
	int bad = 0;
	FILE *saved = NULL;
	if (quiet) {
		fflush(stdout);
		saved = freopen("/dev/null", "w", stdout);
	}
	char built[64], missing[64];
	xpi_backends_built(built, sizeof(built));
	xpi_backends_not_built(missing, sizeof(missing));
	if (json) {
		printf("{\n  \"version\": \"%s\",\n  \"built\": ", VERSION_TEXT);
		json_string(built);
		printf(",\n  \"not_built\": ");
		json_string(missing);
		printf(",\n");
	} else {
		printf("xport %s\n  transports built: inproc, %s%s%s\n", VERSION_TEXT, built,
		       missing[0] != '\0' ? "; not built: " : "", missing);
	}
	if (json)
		printf("  \"pmix_built\": %s,\n  \"pmi2_built\": %s,\n",
		       xpi_pmix_built() ? "true" : "false", xpi_pmi2_built() ? "true" : "false");
	else
		printf("  PMIx: %s\n  Slurm PMI-2: %s\n",
		       xpi_pmix_built() ? "built (mpirun and srun --mpi=pmix need no address)" :
					  "not built (meson option pmix; libpmix-dev)",
		       xpi_pmi2_built() ? "built (srun --mpi=pmi2 needs no derived port)" :
					  "not built (meson option pmi2; libpmi2-0-dev)");
	print_transports();
	bad = print_settings(&cfg);
	print_hugepages(&cfg);
	bool printed = false;
	int rc = bad == 0 ? job_part(&printed) : 0;
	if (!printed && !json && bad == 0)
		printf("\nJob\n  not under a launcher: run under xprun -n N, srun, mpirun or "
		       "torchrun to see what serves each pair of ranks\n");
	if (json)
		printf("  \"settings_ok\": %s\n}\n", bad == 0 ? "true" : "false");
	fflush(stdout);
	(void)saved;
	if (bad != 0)
		fprintf(stderr, "xport-info: %d setting%s in the environment not accepted\n", bad,
			bad == 1 ? "" : "s");
	return bad != 0 || rc < 0 ? 1 : 0;
}
