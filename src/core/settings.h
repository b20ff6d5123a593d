/* SPDX-License-Identifier: MIT */
/*
 * Every setting of a context in one table: its XP_* variable, its
 * xp_config_t field, its type and what it accepts. The table drives
 * xp_config_init (defaults, then the environment), the validation of a
 * program's config in xpi_config_resolve, the error texts (variable or
 * field, value, what is accepted) and what xport-info prints.
 *
 * One policy (docs/SETTINGS.md): a value that is not accepted is an error,
 * never ignored, raised or replaced by a default.
 */
#ifndef XPI_SETTINGS_H
#define XPI_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "xport/xport.h"

enum xpi_setting_type {
	XPI_SET_MS,     /* int, milliseconds, decimal digits only */
	XPI_SET_SIZE,   /* size_t, digits with an optional k/m/g suffix (powers of 1024) */
	XPI_SET_ENUM,   /* int: the index of one of names[] (case-insensitive) */
	XPI_SET_LIST,   /* const char *: a comma list of names[] */
	XPI_SET_STRING, /* const char *: any text of 1 to max bytes */
};

struct xpi_setting {
	const char *var;   /* XP_TIMEOUT_MS */
	const char *field; /* timeout_ms */
	enum xpi_setting_type type;
	size_t offset;            /* of the field in xp_config_t */
	long long min, max;       /* MS, SIZE: inclusive bounds; STRING: max length */
	const char *const *names; /* ENUM, LIST: the accepted names, NULL-terminated */
	/* SIZE: a word meaning SIZE_MAX ("off"), or NULL. MS: value 0 means
	 * this word ("timeout_ms") and is accepted besides [min, max]. */
	const char *special;
	const char *meaning; /* one line, for xport-info */
};

/* Where a setting's value came from. */
enum xpi_origin { XPI_ORIGIN_DEFAULT = 0, XPI_ORIGIN_ENV, XPI_ORIGIN_CONFIG };

#define XPI_SETTINGS_MAX 32

/* The table, @n entries. */
const struct xpi_setting *xpi_settings(size_t *n);

/* The table index of the setting of variable @var, or -1. */
int xpi_setting_index(const char *var);

/* "default", "environment", "config". */
const char *xpi_origin_name(enum xpi_origin o);

/*
 * Defaults into @cfg (all of it: struct_size included), then each XP_*
 * variable that is set and non-empty. @origin (XPI_SETTINGS_MAX entries, or
 * NULL) learns which fields came from the environment. Returns 0, or
 * -EINVAL for the first variable whose value is not accepted (its field
 * keeps the default) with the text in @why (@n bytes): variable, value,
 * what is accepted. The other variables are still applied.
 */
int xpi_settings_from_env(xp_config_t *cfg, unsigned char *origin, char *why, size_t n);

/* One variable: 0 if unset or empty, 1 if applied to @cfg, -EINVAL (with
 * @why, if not NULL) if not accepted, @cfg untouched. */
int xpi_setting_from_env(const struct xpi_setting *s, xp_config_t *cfg, char *why, size_t n);

/*
 * Checks every field of @cfg against the table. Returns 0 or -EINVAL with
 * the text in @why naming the field, its variable, the value and what is
 * accepted.
 */
int xpi_settings_check(const xp_config_t *cfg, char *why, size_t n);

/* True if setting @s has the same value in @a and @b. */
bool xpi_setting_equal(const struct xpi_setting *s, const xp_config_t *a, const xp_config_t *b);

/* Writes @s's value in @cfg as its variable would spell it ("30000", "64m",
 * "auto", "(unset)"; a job key is never shown: "(set)"). */
void xpi_setting_format(const struct xpi_setting *s, const xp_config_t *cfg, char *out, size_t n);

/* What @s accepts, in words ("1 to 86400000", "auto, on, off"). */
void xpi_setting_accepted(const struct xpi_setting *s, char *out, size_t n);

/* XP_DEBUG's names as bits: bit i for the i-th name of its list, all bits
 * for "all". @list must have passed the check. */
unsigned xpi_settings_debug_mask(const char *list);

#endif
