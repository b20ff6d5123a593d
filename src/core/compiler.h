/* SPDX-License-Identifier: MIT */
/* Small compiler and CPU helpers shared by the whole library. */
#ifndef XPI_COMPILER_H
#define XPI_COMPILER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XPI_CACHELINE 64
#define xpi_likely(x) __builtin_expect(!!(x), 1)
#define xpi_unlikely(x) __builtin_expect(!!(x), 0)
#define XPI_EXPORT __attribute__((visibility("default")))
#define xpi_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define XPI_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Tells the CPU we are spinning: cheaper for the sibling hyperthread and for
 * the memory-order machinery when the awaited line changes. */
static inline void xpi_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#endif
}

/* Copies @n bytes, @w <= n <= 2 * @w, as one load of the first @w bytes
 * and one of the last @w (they overlap when n < 2 * @w), then two stores:
 * no loop and no branch on @n. @w is a constant where it is inlined. */
static inline void xpi_copy_ends(unsigned char *d, const unsigned char *s, size_t n, size_t w)
{
	uint64_t a, b;
	memcpy(&a, s, w);
	memcpy(&b, s + n - w, w);
	memcpy(d, &a, w);
	memcpy(d + n - w, &b, w);
}

/* memcpy for payloads that are often a few bytes (eager messages): up to
 * 16 bytes inline, with no call to the C library's memcpy (whose call and
 * size dispatch cost more than the copy at these sizes). */
static inline void xpi_copy(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n > 16)
		memcpy(d, s, n);
	else if (n >= 8)
		xpi_copy_ends(d, s, n, 8);
	else if (n >= 4)
		xpi_copy_ends(d, s, n, 4);
	else
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
}

static inline size_t xpi_align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static inline uint32_t xpi_next_pow2_u32(uint32_t v)
{
	if (v <= 1)
		return 1;
	return 1u << (32 - __builtin_clz(v - 1));
}

#endif
