/* SPDX-License-Identifier: MIT */
/* Small compiler and CPU helpers shared by the whole library. */
#ifndef XPI_COMPILER_H
#define XPI_COMPILER_H

#include <stddef.h>
#include <stdint.h>

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
